"""The Delta Sharing server (tables.api.sharing, tables.services.sharing) checked with the
official `delta-sharing` connector on a live server, against delta-rs reading the same version
(the Delta kernel where delta-rs refuses a table's reader features): at the latest version, at
`version=N` and at a `timestamp`; change data over a range; the limit and partition hints; the
refusals (a window, an expired or revoked token, another share's table, expired and altered
file URLs); two tables on moto's S3 through pre-signed URLs."""

from __future__ import annotations

import json
import re
import urllib.request
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
import requests
from django.utils import timezone

from tables.delta.history.timestamps import commit_times, format_ms
from tables.models import RecipientQuery
from tables.services.sharing.recipients import revoke
from tests.conftest import golden_path, s3_buckets

from ..sharing_site import assert_same_rows, peer_rows, register, share_tables

delta_sharing = pytest.importorskip("delta_sharing")
deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

# golden table -> (what it stands for, the earlier version read by number and by time, whether
# the peer is the kernel: delta-rs refuses deletion vectors and type widening, and reads the
# column-mapped table's binary column as nulls)
GOLDEN = {
    "time-travel-partition-changes-b": ("partitioned", 0, False),
    "dv-partitioned-with-checkpoint": ("deletion vectors", 8, True),
    "table-with-columnmapping-mode-name": ("column mapping", 0, True),
    "basic-with-inserts-deletes-checkpoint": ("checkpoint", 11, False),
    "type-widening": ("type widening", 1, True),
}


def reader_version(path: Path) -> int:
    """The table's reader version at its latest metadata, as its log says it."""
    from tables.delta.snapshot.state import load_snapshot

    return load_snapshot(str(path)).protocol.min_reader_version


def write_cdf_table(path: Path) -> Path:
    """v0 ids 1..5 in two partitions, v1 append, v2 delete id 2, v3 update id 3; change data on."""
    data = pa.table({"id": pa.array([1, 2, 3, 4, 5], pa.int64()), "part": ["a", "a", "b", "b", "b"]})
    write_deltalake(str(path), data, partition_by=["part"], configuration={"delta.enableChangeDataFeed": "true"})
    more = pa.table({"id": pa.array([6, 7], pa.int64()), "part": ["a", "b"]})
    write_deltalake(str(path), more, mode="append")
    dt = DeltaTable(str(path))
    dt.delete("id = 2")
    dt.update(updates={"id": "30"}, predicate="id = 3")
    return path


def query(site, name: str, body: dict, caps: str | None = None) -> requests.Response:
    headers = {"Authorization": f"Bearer {site.token}"}
    if caps:
        headers["delta-sharing-capabilities"] = caps
    return requests.post(
        f"{site.base}/delta-sharing/shares/s1/schemas/default/tables/{name}/query",
        json=body,
        headers=headers,
        timeout=30,
    )


def lines(response: requests.Response) -> list[dict]:
    return [json.loads(line) for line in response.text.splitlines() if line.strip()]


@pytest.mark.parametrize("name", sorted(GOLDEN), ids=[GOLDEN[n][0] for n in sorted(GOLDEN)])
def test_golden_table_equals_the_peer_at_latest_version_and_timestamp(name, live_server, settings, tmp_path) -> None:
    path = golden_path(name)
    settings.DELTAWEB_ALLOWED_ROOTS = [str(path.parent)]
    site = share_tables(live_server.url, tmp_path, {"t": {"table": register("t", path)}})
    times = commit_times(str(path))
    _what, earlier, kernel = GOLDEN[name]
    # the latest in the format the connector negotiates (parquet unless the table needs delta:
    # the partitioned table), else in the delta format (the parquet format's files are fetched
    # by fsspec in many small requests, seconds a table)
    negotiated = None if name == "time-travel-partition-changes-b" else True
    latest = delta_sharing.load_as_pandas(site.url("t"), use_delta_format=negotiated)
    assert_same_rows(latest, peer_rows(path, times.latest, tmp_path, kernel))
    want = peer_rows(path, earlier, tmp_path, kernel)
    assert_same_rows(delta_sharing.load_as_pandas(site.url("t"), version=earlier, use_delta_format=True), want)
    stamp = format_ms(times.timestamp(earlier)[0])
    at_time = delta_sharing.load_as_pandas(site.url("t"), timestamp=stamp, use_delta_format=True)
    assert_same_rows(at_time, want)
    assert delta_sharing.get_table_version(site.url("t")) == times.latest
    # a table with reader features is never answered in the parquet format
    if reader_version(path) > 1:
        refused(query(site, "t", {}), 400, "UNSUPPORTED_OPERATION")
        assert query(site, "t", {}, caps="responseformat=delta,parquet").headers["delta-sharing-capabilities"] == (
            "responseformat=delta"
        )
    # every request recorded: which versions, how many files
    kinds = list(RecipientQuery.objects.values_list("kind", "version", "refused"))
    assert ("query", earlier, "") in kinds and ("query", times.latest, "") in kinds


def cdf_frame(df, drop=("_commit_timestamp",)):
    return df.drop(columns=[c for c in drop if c in df.columns])


@pytest.mark.parametrize("delta_format", [False, True], ids=["parquet", "delta"])
def test_change_data_over_a_range_equals_delta_rs_load_cdf(delta_format, live_server, settings, tmp_path) -> None:
    path = write_cdf_table(tmp_path / "cdf")
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    site = share_tables(live_server.url, tmp_path, {"t": {"table": register("t", path), "change_data": True}})
    got = delta_sharing.load_table_changes_as_pandas(
        site.url("t"), starting_version=1, ending_version=3, use_delta_format=delta_format
    )
    want = DeltaTable(str(path)).load_cdf(starting_version=1, ending_version=3).read_all()
    want = pa.table(want).to_pandas()
    # _commit_timestamp: delta-rs gives commitInfo.timestamp, the protocol the commit's timestamp
    # (ICT, else the file's time); checked against the core's rule below
    assert_same_rows(cdf_frame(got), cdf_frame(want))
    times = commit_times(str(path))
    stamps = {
        int(v): int(pd.Timestamp(t).value // 1_000_000) if not isinstance(t, int) else t
        for v, t in zip(got["_commit_version"], got["_commit_timestamp"], strict=True)
    }
    # the connector's delta-format reader gives the commit's time to the second (it sets the
    # file time of the log it writes with os.utime in seconds)
    unit = 1000 if delta_format else 1
    assert {v: t // unit for v, t in stamps.items()} == {v: times.timestamp(v)[0] // unit for v in stamps}
    if not delta_format:
        return  # the parquet format's files come in many small requests: one range is enough
    # by timestamps: the same range
    start, end = format_ms(times.timestamp(1)[0]), format_ms(times.timestamp(3)[0])
    by_time = delta_sharing.load_table_changes_as_pandas(
        site.url("t"), starting_timestamp=start, ending_timestamp=end, use_delta_format=delta_format
    )
    assert_same_rows(cdf_frame(by_time), cdf_frame(want))
    assert RecipientQuery.objects.filter(kind="changes", start_version=1, end_version=3, refused="").count() == 2
    # which versions the timestamps picked, and by which rule: the answer's headers
    head = requests.get(
        f"{site.base}/delta-sharing/shares/s1/schemas/default/tables/t/changes",
        params={"startingTimestamp": start, "endingTimestamp": end},
        headers={"Authorization": f"Bearer {site.token}"},
        timeout=30,
    )
    assert head.status_code == 200 and head.headers["Delta-Table-Version"] == "3"
    assert "searched" in head.headers["Deltaweb-Timestamp-Rule"]


def test_limit_and_partition_hints_prune_files(live_server, settings, tmp_path) -> None:
    path = golden_path("time-travel-partition-changes-b")
    settings.DELTAWEB_ALLOWED_ROOTS = [str(path.parent)]
    site = share_tables(live_server.url, tmp_path, {"t": {"table": register("t", path)}})
    every = [x for x in lines(query(site, "t", {})) if "file" in x]
    assert len(every) > 2
    # limitHint: only as many files as hold that many rows (by their stats)
    one = [x for x in lines(query(site, "t", {"limitHint": 1})) if "file" in x]
    assert len(one) == 1
    # a partition predicate: only part2 = 1's files, JSON or SQL
    hint = '{"op":"equal","children":[{"op":"column","name":"part2","valueType":"int"},{"op":"literal","value":"1","valueType":"int"}]}'
    pruned = [x["file"] for x in lines(query(site, "t", {"jsonPredicateHints": hint})) if "file" in x]
    assert pruned and {f["partitionValues"]["part2"] for f in pruned} == {"1"} and len(pruned) < len(every)
    sql = [x["file"] for x in lines(query(site, "t", {"predicateHints": ["part2 = 1"]})) if "file" in x]
    assert {f["id"] for f in sql} == {f["id"] for f in pruned}
    # a hint on a data column or one that does not parse prunes nothing (best effort)
    assert len([x for x in lines(query(site, "t", {"predicateHints": ["id = 3", "nonsense"]})) if "file" in x]) == len(
        every
    )
    # through the connector: the hint and the limit, rows equal to delta-rs's filtered
    got = delta_sharing.load_as_pandas(site.url("t"), jsonPredicateHints=hint)
    want = DeltaTable(str(path)).to_pandas()
    assert_same_rows(got[got["part2"] == 1], want[want["part2"] == 1])
    assert len(delta_sharing.load_as_pandas(site.url("t"), limit=2)) == 2


def refused(response: requests.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["errorCode"] == code and body["message"]


def test_refusals_window_tokens_other_share_and_file_urls(live_server, settings, tmp_path) -> None:
    path = golden_path("basic-with-inserts-deletes-checkpoint")
    settings.DELTAWEB_ALLOWED_ROOTS = [str(path.parent)]
    table = register("t", path)
    site = share_tables(live_server.url, tmp_path, {"t": {"table": table, "first_version": 5, "last_version": 9}})
    other = share_tables(live_server.url, tmp_path, {"o": {"table": table}}, share="s2")
    # the window: its last version is the recipient's latest; versions outside it are refused
    assert delta_sharing.get_table_version(site.url("t")) == 9
    refused(query(site, "t", {"version": 3}), 400, "INVALID_PARAMETER_VALUE")
    refused(query(site, "t", {"version": 12}), 400, "INVALID_PARAMETER_VALUE")
    assert query(site, "t", {"version": 7}).headers["Delta-Table-Version"] == "7"
    stamp = format_ms(commit_times(str(path)).timestamp(2)[0])
    refused(query(site, "t", {"timestamp": stamp}), 400, "INVALID_PARAMETER_VALUE")
    assert RecipientQuery.objects.filter(refused="INVALID_PARAMETER_VALUE").count() == 3
    with pytest.raises(requests.HTTPError):
        delta_sharing.load_as_pandas(site.url("t"), version=3)
    # change data not shared
    changes = f"{site.base}/delta-sharing/shares/s1/schemas/default/tables/t/changes?startingVersion=5"
    refused(
        requests.get(changes, headers={"Authorization": f"Bearer {site.token}"}, timeout=30),
        400,
        "INVALID_PARAMETER_VALUE",
    )
    # another share's table: as if it did not exist
    refused(
        requests.post(
            f"{site.base}/delta-sharing/shares/s2/schemas/default/tables/o/query",
            json={},
            headers={"Authorization": f"Bearer {site.token}"},
            timeout=30,
        ),
        404,
        "RESOURCE_DOES_NOT_EXIST",
    )
    # no token, a wrong one, an expired one, a revoked one
    shares = f"{site.base}/delta-sharing/shares"
    refused(requests.get(shares, timeout=30), 401, "UNAUTHENTICATED")
    refused(requests.get(shares, headers={"Authorization": "Bearer nope"}, timeout=30), 401, "UNAUTHENTICATED")
    assert requests.get(shares, headers={"Authorization": f"Bearer {site.token}"}, timeout=30).json()["items"] == [
        {"name": "s1", "id": f"share-{site.share.pk}"}
    ]
    # file URLs: good, expired, altered
    files = [x["file"]["url"] for x in lines(query(site, "t", {})) if "file" in x]
    assert requests.get(files[0], headers={"Range": "bytes=0-3"}, timeout=30).content == b"PAR1"
    payload = files[0].split("/files/")[1].split("?")[0]
    other_key = files[1].split("/files/")[1].split("?")[0]
    refused(requests.get(files[0].replace(payload, other_key), timeout=30), 403, "PERMISSION_DENIED")
    se = files[0].split("se=")[1].split("&")[0]
    refused(requests.get(files[0].replace(f"se={se}", f"se={int(se) + 1000}"), timeout=30), 403, "PERMISSION_DENIED")
    settings.DELTAWEB_SHARING_URL_SECONDS = 0
    expired = next(x["file"]["url"] for x in lines(query(site, "t", {})) if "file" in x)
    refused(requests.get(expired, timeout=30), 403, "PERMISSION_DENIED")
    site.recipient.expires_at = timezone.now() - timedelta(seconds=1)
    site.recipient.save()
    refused(requests.get(shares, headers={"Authorization": f"Bearer {site.token}"}, timeout=30), 401, "UNAUTHENTICATED")
    revoke(other.recipient)
    refused(
        requests.get(shares, headers={"Authorization": f"Bearer {other.token}"}, timeout=30), 401, "UNAUTHENTICATED"
    )


def upload(client, bucket: str, source: Path, prefix: str) -> str:
    for file in sorted(source.rglob("*")):
        if file.is_file():
            client.upload_file(str(file), bucket, f"{prefix}/{file.relative_to(source).as_posix()}")
    return f"s3://{bucket}/{prefix}"


@contextmanager
def presigned_urls_answered(endpoint: str):
    """moto's access control reads every request's Authorization header and fails (500) on a
    pre-signed URL, which has none: its authentication is paused while the connector fetches
    (the server's reset-auth: that many requests unchecked), and turned on again after."""

    def reset(count: str) -> None:
        req = urllib.request.Request(
            f"{endpoint}/moto-api/reset-auth",
            data=count.encode(),
            method="POST",
            headers={"Content-Type": "text/plain"},
        )
        urllib.request.urlopen(req, timeout=10).read()

    reset("1000000000")
    try:
        yield
    finally:
        reset("0")


def test_tables_on_s3_through_presigned_urls(live_server, s3_server, monkeypatch, settings, tmp_path) -> None:
    client = s3_buckets(s3_server, monkeypatch, settings, "sharing")
    partitioned = golden_path("time-travel-partition-changes-b")
    cdf = write_cdf_table(tmp_path / "cdf")
    part_uri = upload(client, "sharing", partitioned, "allowed/partitioned")
    cdf_uri = upload(client, "sharing", cdf, "allowed/cdf")
    site = share_tables(
        live_server.url,
        tmp_path,
        {
            "p": {"table": register("p", part_uri)},
            "c": {"table": register("c", cdf_uri), "change_data": True},
        },
    )
    answer = lines(query(site, "p", {}))
    url = next(x["file"]["url"] for x in answer if "file" in x)
    assert url.startswith(s3_server.endpoint) and "X-Amz-Signature=" in url
    expires = int(re.search(r"X-Amz-Expires=(\d+)", url)[1])
    assert 890 <= expires <= 900  # the URL's life: what is left of the 15 minutes, never more
    with presigned_urls_answered(s3_server.endpoint):
        _read_s3_tables(site, partitioned, cdf, url)


def _read_s3_tables(site, partitioned: Path, cdf: Path, url: str) -> None:
    assert requests.get(url, timeout=30).content[:4] == b"PAR1"
    want = DeltaTable(str(partitioned), version=0).to_pandas()
    assert_same_rows(delta_sharing.load_as_pandas(site.url("p"), version=0, use_delta_format=True), want)
    assert_same_rows(delta_sharing.load_as_pandas(site.url("p")), DeltaTable(str(partitioned)).to_pandas())
    want_cdf = pa.table(DeltaTable(str(cdf)).load_cdf(starting_version=0, ending_version=3).read_all()).to_pandas()
    got = delta_sharing.load_table_changes_as_pandas(
        site.url("c"), starting_version=0, ending_version=3, use_delta_format=True
    )
    assert_same_rows(cdf_frame(got), cdf_frame(want_cdf))
    assert_same_rows(
        delta_sharing.load_as_pandas(site.url("c"), use_delta_format=True), DeltaTable(str(cdf)).to_pandas()
    )


def test_queries_on_metrics_and_the_table_page(live_server, settings, tmp_path, browser, client) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    path = golden_path("time-travel-partition-changes-b")
    settings.DELTAWEB_ALLOWED_ROOTS = [str(path.parent)]
    table = register("t", path)
    site = share_tables(live_server.url, tmp_path, {"t": {"table": table, "last_version": 0}})
    assert query(site, "t", {"version": 0}).status_code == 200
    assert query(site, "t", {"version": 1}).status_code == 400
    found = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(client.get("/metrics").content.decode())
        for s in family.samples
    }
    assert found[("deltaweb_sharing_queries_total", (("kind", "query"), ("outcome", "served")))] == 1
    assert found[("deltaweb_sharing_queries_total", (("kind", "query"), ("outcome", "refused")))] == 1
    assert found[("deltaweb_sharing_files_served_total", ())] > 0
    page = browser.get(f"/t/{table.slug}/").content.decode()
    assert 'id="recipient-queries"' in page and "partner-s1" in page and "s1.default.t" in page
    assert "refused: INVALID_PARAMETER_VALUE" in page


def test_admin_issues_a_token_once_with_its_profile_and_revokes_it(admin_client) -> None:
    import base64
    import hashlib
    import re

    from tables.models import Recipient, Share

    recipient = Recipient.objects.create(name="auditor")
    recipient.shares.add(Share.objects.create(name="q3"))
    page = admin_client.post("/admin/tables/recipient/", {"action": "issue_token", "_selected_action": [recipient.pk]})
    assert page.status_code == 200 and "no-store" in page["Cache-Control"]
    html = page.content.decode()
    encoded = re.search(r'href="data:application/json;base64,([^"]+)"', html)[1]
    profile = json.loads(base64.b64decode(encoded))
    assert profile["endpoint"].endswith("/delta-sharing/") and profile["shareCredentialsVersion"] == 1
    recipient.refresh_from_db()
    # only the token's hash is kept; the page showed the token itself, once
    assert recipient.token_hash == hashlib.sha256(profile["bearerToken"].encode()).hexdigest()
    assert (
        profile["bearerToken"]
        not in admin_client.get(f"/admin/tables/recipient/{recipient.pk}/change/").content.decode()
    )
    admin_client.post("/admin/tables/recipient/", {"action": "revoke_tokens", "_selected_action": [recipient.pk]})
    recipient.refresh_from_db()
    assert recipient.revoked_at is not None
