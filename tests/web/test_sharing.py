"""The Delta Sharing server (tables.api.sharing, tables.services.sharing) checked with the
official `delta-sharing` connector on a live server, against delta-rs reading the same version
(the Delta kernel where delta-rs refuses a table's reader features): at the latest version, at
`version=N` and at a `timestamp`; change data over a range; the limit and partition hints; the
refusals (a window, an expired or revoked token, another share's table, expired and altered
file URLs); two tables on moto's S3 through pre-signed URLs."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
import requests

from tables.delta.history.timestamps import commit_times, format_ms
from tables.models import RecipientQuery
from tests.conftest import golden_path

from .sharing_site import assert_same_rows, peer_rows, register, share_tables

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
    # every request recorded: which versions, how many files
    kinds = list(RecipientQuery.objects.values_list("kind", "version", "refused"))
    assert ("query", earlier, "") in kinds and ("query", times.latest, "") in kinds
