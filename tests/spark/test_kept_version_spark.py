"""A pinned version stays usable by the Spark readers after delta-rs's zero-retention VACUUM and
log cleanup: the keyed diff N -> latest and latest -> N, change data over a range ending at N
whose change files VACUUM kept, and the history of three rows through N, each started as the
app starts it (the job's parameters say where each side is read from) and run on Spark, equal
delta-rs's reads of the table taken before the VACUUM.

Tables: three golden tables written by Spark (partitioned with deletion vectors, column
mapping with deletion vectors, one with a checkpoint) and one written by delta-rs with its
change data feed on."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import golden_path
from tests.core.builders import writable
from tests.web.kept_tables import peer_table, register, vacuum

deltalake = pytest.importorskip("deltalake")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

pytestmark = pytest.mark.django_db


@pytest.fixture
def place(settings, tmp_path) -> Path:
    src = tmp_path / "tables"
    src.mkdir()
    settings.DELTAWEB_ALLOWED_ROOTS = [str(src)]
    settings.DELTAWEB_PIN_STORE = str(tmp_path / "pins")
    settings.DELTAWEB_RESULTS_DIR = str(tmp_path / "results")
    from tables.delta.storage import api as storage_api

    # the app's confinement (tables/apps.py): the allowed roots and the pin store (the Spark
    # tests' own fixture confines each table to its root and is restored after the test)
    storage_api.set_roots_provider(lambda: [*settings.DELTAWEB_ALLOWED_ROOTS, settings.DELTAWEB_PIN_STORE])
    return src


@pytest.fixture
def analyst(django_user_model):
    from django.contrib.auth.models import Group

    from tables.services.access.roles import ANALYST

    user = django_user_model.objects.create_user("ana")
    user.groups.add(Group.objects.get_or_create(name=ANALYST)[0])
    return user


def peer_rows(path: Path, version: int | None = None) -> list[dict]:
    return peer_table(path, version).to_pylist()


def run(spark, job) -> dict:
    """The job run as the worker runs it, on the test's session."""
    from tables.models import Job
    from tables.services.data import jobs as data_jobs
    from tables.services.data.kinds import data_kind

    def compute(location, params, out, _progress):
        return data_kind(params["kind"]).run(spark, location, params, out, lambda _s: None)

    data_jobs.run_job(job.pk, compute)
    job = Job.objects.get(pk=job.pk)
    assert job.status == "succeeded", job.error
    return job.result


def result_rows(result: dict) -> list[dict]:
    parts = sorted(Path(result["path"]).glob("*.parquet"))
    return pa.concat_tables([pq.read_table(p) for p in parts]).to_pylist() if parts else []


def expected_diff(before: list[dict], after: list[dict], keys: list[str]) -> dict:
    """{key: (kind, changed columns, before's other columns, after's)} of two reads."""
    a = {tuple(r[k] for k in keys): r for r in before}
    b = {tuple(r[k] for k in keys): r for r in after}
    assert len(a) == len(before) and len(b) == len(after)
    out = {}
    for key in a.keys() | b.keys():
        ra, rb = a.get(key), b.get(key)
        # a version of key columns only has null _before/_after (rowdiff's contract)
        rest_a = {c: v for c, v in ra.items() if c not in keys} or None if ra else None
        rest_b = {c: v for c, v in rb.items() if c not in keys} or None if rb else None
        if ra is None:
            out[key] = ("added", (), None, rest_b)
        elif rb is None:
            out[key] = ("removed", (), rest_a, None)
        else:
            rest_a, rest_b = rest_a or {}, rest_b or {}
            changed = tuple(sorted(c for c in rest_a if c in rest_b and rest_a[c] != rest_b[c]))
            if changed:
                out[key] = ("changed", changed, rest_a, rest_b)
    return out


def our_diff(result: dict, keys: list[str]) -> dict:
    return {
        tuple(r[k] for k in keys): (r["_diff"], tuple(sorted(r["_changed_columns"])), r["_before"], r["_after"])
        for r in result_rows(result)
    }


def check_diffs(spark, table, n: int, keys: list[str], at_n: list[dict], latest: list[dict], tmp: Path) -> None:
    from tables.services.data import jobs as data_jobs
    from tables.services.versions.source import from_params, source_of
    from tables.spark.jobs.rowdiff import keyed_diff

    last = table.last_synced_version
    job = data_jobs.start_row_diff(table, n, last, keys)
    side = job.params["sources"]["from"]
    assert side["pin"] is not None and from_params(side, table.location)[0] != table.location  # the pin
    assert "location" not in side  # the job's parameters (shown to its readers) never name the pin store
    assert our_diff(run(spark, job), keys) == expected_diff(at_n, latest, keys)
    # latest -> N: the same rule gives each side its place
    places = tuple(from_params(source_of(table, v).as_params(), table.location) for v in (last, n))
    back = keyed_diff(spark, table.location, last, n, keys, tmp / "back", sources=places)
    assert our_diff(back, keys) == expected_diff(latest, at_n, keys)


GOLDEN = [
    ("dv-partitioned-with-checkpoint", 5, ["col1"]),  # partitioned, deletion vectors
    ("dv-with-columnmapping", 5, ["col1"]),  # column mapping (name), deletion vectors
    ("basic-with-inserts-deletes-checkpoint", 5, ["id"]),  # a checkpoint, deletes
]


@pytest.mark.parametrize(("name", "n", "keys"), GOLDEN, ids=[g[0] for g in GOLDEN])
def test_a_keyed_diff_either_side_pinned_after_vacuum_and_log_cleanup(
    spark, place, analyst, tmp_path, name, n, keys
) -> None:
    from tables.services.pins import lifecycle as pins

    path = place / name
    shutil.copytree(golden_path(name), path)
    writable(path)
    table = register(path)
    at_n = peer_rows(path, n)
    pins.create_pin(table, n, "kept", "quarter-end", analyst)
    vacuum(path, table, age_log=True)
    with pytest.raises(Exception):  # noqa: B017  # delta-rs: the table lost version N
        peer_rows(path, n)
    check_diffs(spark, table, n, keys, at_n, peer_rows(path), tmp_path)


# --- a delta-rs table with its change data feed ---------------------------------------------------


def cdf_table(path: Path) -> int:
    """Versions: 0 insert 1..6, 1 update id 2, 2 delete id 3 (both with change files), 3 append
    7..9 (its inserts are its added file: N), 4 overwrite with 2 and 10..12, 5 append 13. Every
    file of 0..3 is gone after a VACUUM; those of 1 and 3 are kept by pins."""
    from deltalake import DeltaTable, write_deltalake

    def rows(ids: list[int], tag: str) -> pa.Table:
        return pa.table({"id": pa.array(ids, pa.int64()), "v": [f"{tag}{i}" for i in ids]})

    write_deltalake(str(path), rows([1, 2, 3, 4, 5, 6], "a"), configuration={"delta.enableChangeDataFeed": "true"})
    DeltaTable(str(path)).update({"v": "'b2'"}, predicate="id = 2")
    DeltaTable(str(path)).delete("id = 3")
    write_deltalake(str(path), rows([7, 8, 9], "c"), mode="append")
    write_deltalake(str(path), rows([2, 10, 11, 12], "d"), mode="overwrite")
    write_deltalake(str(path), rows([13], "e"), mode="append")
    return 3


def expected_history(reads: dict[int, list[dict]], key: int, start: int, end: int) -> list[tuple]:
    """(version, change, before, after) of the row with `key`, newest first, from whole reads."""
    events, current = [], None
    for v in range(start, end + 1):
        row = next((r for r in reads[v] if r["id"] == key), None)
        if row != current:
            change = "insert" if current is None else ("delete" if row is None else "update")
            events.append((v, change, current, row))
        current = row
    return events[::-1]


def test_change_data_diff_and_row_history_through_a_pinned_version(spark, place, analyst, tmp_path) -> None:
    import json

    from tables.services.data import jobs as data_jobs
    from tables.services.pins import lifecycle as pins

    path = place / "orders"
    n = cdf_table(path)
    table = register(path)
    latest = table.last_synced_version
    reads = {v: peer_rows(path, v) for v in range(latest + 1)}
    cdf = pa.table(deltalake.DeltaTable(str(path)).load_cdf(starting_version=1, ending_version=n).read_all())
    expected_cdf = sorted((r["id"], r["v"], r["_change_type"], r["_commit_version"]) for r in cdf.to_pylist())
    assert {r[2] for r in expected_cdf} >= {"update_preimage", "update_postimage", "delete", "insert"}
    pins.create_pin(table, n, "kept", "training set", analyst)
    # the range's start is pinned too: a range is read from a version the app can read (its
    # change files would do, but the range's start must be readable or pinned)
    pins.create_pin(table, 1, "start", "before the training set", analyst)
    vacuum(path, table, age_log=False)
    assert any((path / "_change_data").iterdir())  # VACUUM kept the change files

    # the keyed diff, both ways
    check_diffs(spark, table, n, ["id"], reads[n], peer_rows(path), tmp_path)

    # change data over 1..N: the change files of 1 and 2 from the table, N's inserts from its pin
    job = data_jobs.start_changes(table, 1, n)
    assert job.params["sources"]["to"]["pin"] is not None and job.params["kept"]
    got = run(spark, job)
    assert got["filesFromPin"] >= 1
    ours = sorted((r["id"], r["v"], r["_change_type"], r["_commit_version"]) for r in result_rows(got))
    assert ours == expected_cdf

    # the history of three rows through N: from 1 (pinned) to the latest, the files of N read
    # from N's pin
    for key in (2, 4, 8):
        job = data_jobs.start_row_history(table, {"id": str(key)}, 1, latest)
        assert len(job.params["kept"]) == 2  # the start's pin and N's, inside the range
        events = [
            (r["version"], r["change"], r["before"] and json.loads(r["before"]), r["after"] and json.loads(r["after"]))
            for r in result_rows(run(spark, job))
        ]
        assert events == expected_history(reads, key, 1, latest), key


def test_an_s3_table_read_through_its_pin_after_vacuum(spark, place, analyst, s3_server, monkeypatch, settings) -> None:
    """On moto: version 1 pinned (server-side copies in the pin store's prefix), then delta-rs's
    VACUUM deletes the file version 2 dropped. The keyed diff 1 -> latest reads version 1 from
    the pin store, and the change data of 1..latest reads the dropped file's deletes from it."""
    import uuid

    from tables.services.data import jobs as data_jobs
    from tables.services.pins import lifecycle as pins
    from tables.services.pins import store as pin_store
    from tests.conftest import s3_buckets
    from tests.core.test_keep_s3 import rows as s3_rows
    from tests.core.test_keep_s3 import write_table

    bucket = "kept-spark"
    client = s3_buckets(s3_server, monkeypatch, settings)
    if bucket not in {b["Name"] for b in client.list_buckets()["Buckets"]}:
        client.create_bucket(Bucket=bucket)
    settings.DELTAWEB_ALLOWED_ROOTS = [f"s3://{bucket}/allowed"]
    settings.DELTAWEB_PIN_STORE = f"s3://{bucket}/allowed/pins"
    location = f"s3://{bucket}/allowed/t-{uuid.uuid4().hex[:8]}"
    write_table(s3_server, location)  # 0: ids 0..9, 1: ids 10..19, 2: delete ids < 10 (a whole file)
    at_1 = s3_rows(s3_server, location, 1)
    opts = s3_server.storage_options()
    cdf = pa.table(deltalake.DeltaTable(location, storage_options=opts).load_cdf(starting_version=1).read_all())
    from tables.services.catalog import registration
    from tables.services.sync import store as sync
    from tables.services.versions import read as versions

    table = registration.register_table(f"s3-{uuid.uuid4().hex[:6]}", location)
    sync.sync_table(table.pk)
    table.refresh_from_db()
    latest = table.last_synced_version
    pin = pins.create_pin(table, 1, "s3 pin", "why", analyst)
    assert pin_store.write_pin(pin.pk)["state"] == "active"  # an object store: a worker keeps it
    dt = deltalake.DeltaTable(location, storage_options=opts)
    assert dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    sync.sync_table(table.pk)
    table.refresh_from_db()
    versions._SNAPSHOTS.clear()

    job = data_jobs.start_row_diff(table, 1, table.last_synced_version, ["id"])
    assert job.params["sources"]["from"]["pin"] == pin.pk
    assert our_diff(run(spark, job), ["id"]) == expected_diff(at_1, s3_rows(s3_server, location), ["id"])

    got = run(spark, data_jobs.start_changes(table, 1, latest))
    assert got["filesFromPin"] == 1  # the file VACUUM deleted: version 2's deletes
    ours = sorted((r["id"], r["v"], r["_change_type"], r["_commit_version"]) for r in result_rows(got))
    assert ours == sorted((r["id"], r["v"], r["_change_type"], r["_commit_version"]) for r in cdf.to_pylist())
