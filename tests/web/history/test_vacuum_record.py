"""VACUUM on the record: each sync looks at the files the versions still in the log reference,
and records the ones found gone (FileRemovalEvent) with the versions they made unreadable,
linked to the VACUUM START/END commits around them; the event is on the History tab, the
timeline, the export and the API, and fires the alert rule.

The oracle is delta-rs: its VACUUM returns the paths it deleted (their bytes read before), and a
version is unreadable when delta-rs can no longer load it."""

from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from alerts.models import Alert
from tables.delta.history.vanished import in_ranges
from tables.models import Commit, FileLook, FileRemovalEvent, Table
from tables.services.catalog import registration
from tables.services.sync import store as sync
from tests.conftest import s3_buckets

from ..pages.test_api import make_user, token_client

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

pytestmark = pytest.mark.django_db


def churned(path: Path, commits: int = 7, **options) -> str:
    """Appends with two overwrites: tombstones of several ages; returns the location."""
    where = str(path)
    for i in range(commits):
        mode = "overwrite" if i in (2, 4) else "append"
        write_deltalake(where, pa.table({"id": pa.array([i, i + 100], pa.int64())}), mode=mode, **options)
    return where


def vacuum(path: Path) -> tuple[list[str], int]:
    """delta-rs's VACUUM with retention 0: the paths it deleted, their bytes (read before)."""
    sizes = {str(f.relative_to(path)): f.stat().st_size for f in path.rglob("*.parquet")}
    returned = DeltaTable(str(path)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    deleted = sorted(p for p in returned if p in sizes)  # delta-rs also names files gone already
    return deleted, sum(sizes[p] for p in deleted)


def tombstones(path: Path) -> list[str]:
    return sorted(DeltaTable(str(path)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=True))


def unloadable(location: str, latest: int, **options) -> set[int]:
    out = set()
    for v in range(latest + 1):
        try:
            DeltaTable(location, version=v, **options).to_pyarrow_table()
        except Exception:
            out.add(v)
    return out


def write_commit(path: Path, version: int, info: dict) -> None:
    """A commit holding a commitInfo alone, as Spark writes VACUUM START and END."""
    (path / "_delta_log" / f"{version:020d}.json").write_text(json.dumps({"commitInfo": info}) + "\n")


def spark_vacuum(operation: str, metrics: dict, user: str = "ops@example.com") -> dict:
    return {
        "timestamp": int(time.time() * 1000),
        "operation": operation,
        "operationParameters": {"retentionCheckEnabled": True, "defaultRetentionMillis": 604800000}
        if operation == "VACUUM START"
        else {"status": "COMPLETED"},
        "operationMetrics": metrics,
        "userName": user,
        "engineInfo": "Apache-Spark/3.5.1 Delta-Lake/3.2.0",
    }


def register_and_sync(name: str, location: str) -> Table:
    table = registration.register_table(name, location)
    sync.sync_table(table.pk)
    table.refresh_from_db()
    return table


def synced(table: Table, capture) -> Table:
    with capture(execute=True):  # the alert fires when the look's transaction commits
        sync.sync_table(table.pk)
    table.refresh_from_db()
    return table


@pytest.fixture
def roots(settings, tmp_path):
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    return tmp_path


def test_a_delta_rs_vacuum_between_two_syncs(roots, django_capture_on_commit_callbacks) -> None:
    path = roots / "t"
    table = register_and_sync("t", churned(path))
    look = FileLook.objects.get(table=table)
    assert (look.missing, look.version, look.complete) == (0, 6, True) and look.referenced == len(
        [f for f in path.glob("*.parquet")]
    )
    assert not FileRemovalEvent.objects.exists()  # the first look is where the record starts
    deleted, size = vacuum(path)
    table = synced(table, django_capture_on_commit_callbacks)

    event = FileRemovalEvent.objects.get(table=table)
    assert (event.files, event.bytes) == (len(deleted), size) and sorted(event.paths) == deleted
    assert in_ranges(event.unreadable) == unloadable(str(path), table.last_synced_version)
    assert (event.unreadable_from, event.unreadable_to) == (0, 3) and event.unreadable_count == 4
    # delta-rs logged its VACUUM: START and END, the new commits the sync stored
    ops = dict(Commit.objects.filter(table=table, version__gt=6).values_list("operation", "version"))
    assert (event.vacuum_start_version, event.vacuum_end_version) == (ops["VACUUM START"], ops["VACUUM END"])
    assert event.vacuum_deleted_files == len(deleted) and event.version == table.last_synced_version == 8
    assert (event.previous_version, event.complete, event.exact) == (6, True, True)
    end = Commit.objects.get(table=table, version=ops["VACUUM END"])
    assert event.vacuum_timestamp == end.timestamp
    alert = Alert.objects.get(table=table, rule="vacuum_unreadable")
    assert alert.explanation.startswith("VACUUM made versions 0..3 unreadable")
    assert (alert.version, alert.commit_id, alert.severity) == (end.version, end.pk, "critical")
    look.refresh_from_db()
    assert (look.missing, look.missing_bytes, look.version) == (len(deleted), size, 8)
    assert len(bytes(look.missing_hashes)) == 8 * len(deleted)  # 8 bytes a missing file, no paths
    # the next sync sees the same files missing: nothing new
    write_deltalake(str(path), pa.table({"id": pa.array([9, 10], pa.int64())}), mode="append")
    synced(table, django_capture_on_commit_callbacks)
    assert FileRemovalEvent.objects.filter(table=table).count() == 1


def test_spark_vacuum_commits_written_by_hand_are_linked(roots, django_capture_on_commit_callbacks) -> None:
    path = roots / "t"
    table = register_and_sync("t", churned(path))
    gone = tombstones(path)
    sizes = {p: (path / p).stat().st_size for p in gone}
    write_commit(path, 7, spark_vacuum("VACUUM START", {"numFilesToDelete": str(len(gone))}))
    for p in gone:
        (path / p).unlink()
    write_commit(
        path, 8, spark_vacuum("VACUUM END", {"numDeletedFiles": str(len(gone)), "numVacuumedDirectories": "1"})
    )
    table = synced(table, django_capture_on_commit_callbacks)
    event = FileRemovalEvent.objects.get(table=table)
    assert (event.files, event.bytes) == (len(gone), sum(sizes.values()))
    assert (event.vacuum_start_version, event.vacuum_end_version, event.vacuum_user) == (7, 8, "ops@example.com")
    assert event.vacuum_timestamp == Commit.objects.get(table=table, version=8).timestamp
    assert event.vacuum_deleted_files == len(gone)
    assert in_ranges(event.unreadable) == unloadable(str(path), 8)
    assert "by ops@example.com" in Alert.objects.get(table=table, rule="vacuum_unreadable").explanation


def test_a_sync_while_a_vacuum_runs(roots, django_capture_on_commit_callbacks) -> None:
    """A sync between VACUUM START and END records what was gone then (attributed to the
    START); the next one, after the END, what went after, and both events name the END."""
    path = roots / "t"
    table = register_and_sync("t", churned(path))
    gone = tombstones(path)
    write_commit(path, 7, spark_vacuum("VACUUM START", {"numFilesToDelete": str(len(gone))}))
    (path / gone[0]).unlink()
    table = synced(table, django_capture_on_commit_callbacks)
    first = FileRemovalEvent.objects.get(table=table)
    assert (first.files, first.vacuum_start_version, first.vacuum_end_version) == (1, 7, None)
    for p in gone[1:]:
        (path / p).unlink()
    write_commit(path, 8, spark_vacuum("VACUUM END", {"numDeletedFiles": str(len(gone))}))
    table = synced(table, django_capture_on_commit_callbacks)
    second = FileRemovalEvent.objects.exclude(pk=first.pk).get(table=table)
    first.refresh_from_db()
    assert second.files == len(gone) - 1 and (second.vacuum_start_version, second.vacuum_end_version) == (7, 8)
    assert first.vacuum_end_version == 8 and second.previous_version == 7
    # the versions the first removal broke are not counted again
    assert in_ranges(first.unreadable) | in_ranges(second.unreadable) == unloadable(str(path), 8)
    assert not in_ranges(first.unreadable) & in_ranges(second.unreadable)


def test_files_deleted_with_no_commit_at_all(roots, settings, django_capture_on_commit_callbacks) -> None:
    """Someone deletes a tombstone by hand: with no VACUUM commit to prompt a look, the sync that
    is due (every DELTAWEB_VACUUM_CHECK_EVERY_SYNCS, here 3; on local disk too) records it,
    attributed to no VACUUM; the alert says so."""
    settings.DELTAWEB_VACUUM_CHECK_EVERY_SYNCS = 3
    path = roots / "t"
    table = register_and_sync("t", churned(path))
    victim = tombstones(path)[-1]
    size = (path / victim).stat().st_size
    (path / victim).unlink()
    for _ in range(2):
        table = synced(table, django_capture_on_commit_callbacks)
        assert not FileRemovalEvent.objects.filter(table=table).exists()
    table = synced(table, django_capture_on_commit_callbacks)
    event = FileRemovalEvent.objects.get(table=table)
    assert (event.files, event.bytes, event.paths) == (1, size, [victim])
    assert (event.vacuum_start_version, event.vacuum_end_version, event.vacuum_user) == (None, None, "")
    assert in_ranges(event.unreadable) == unloadable(str(path), 6)
    text = Alert.objects.get(table=table, rule="vacuum_unreadable").explanation
    assert text.startswith("Files removed outside the log made versions")


def test_a_long_logs_first_look_is_a_workers_own(roots, settings, monkeypatch) -> None:
    """The first look replays the whole retained log: for a log of DELTAWEB_REACHABILITY_INLINE_
    VERSIONS versions or more (here 3) the first sync sends it to a worker instead of making its
    job wait; the worker's look then lists the table once, as a baseline, with no event."""
    from tables import tasks
    from tables.services.jobs import lifecycle as jobs
    from tables.services.sync import vanished

    settings.DELTAWEB_REACHABILITY_INLINE_VERSIONS = 3
    sent = []
    monkeypatch.setattr(jobs, "send", lambda name, *args, **_kw: sent.append((name, *args)))
    path = roots / "t"
    table = register_and_sync("t", churned(path))
    assert not FileLook.objects.filter(table=table).exists()
    # the look, and the reachability and row count every long log's sync asks a worker for
    from tables.services.versions import reachability, row_count

    assert sent == [
        (vanished.LOOK_TASK, table.pk, 6),
        (reachability.COMPUTE_TASK, table.pk, None),
        (row_count.COUNT_TASK, table.pk),
    ]
    assert tasks.look_at_files(table.pk, 6) is True
    look = FileLook.objects.get(table=table)
    assert (look.version, look.missing, look.complete) == (6, 0, True)
    assert not FileRemovalEvent.objects.filter(table=table).exists()
    assert tasks.look_at_files(table.pk, 6) is False  # a look came first: nothing done twice


def test_the_alert_obeys_the_tables_rule_setting(roots, django_capture_on_commit_callbacks) -> None:
    from alerts.models import RuleSetting

    path = roots / "t"
    table = register_and_sync("t", churned(path))
    RuleSetting.objects.create(table=table, rule="vacuum_unreadable", enabled=False)
    vacuum(path)
    synced(table, django_capture_on_commit_callbacks)
    assert FileRemovalEvent.objects.filter(table=table).exists()
    assert not Alert.objects.filter(table=table, rule="vacuum_unreadable").exists()


def test_the_event_on_the_api_the_export_the_history_and_the_timeline(
    roots, client, django_capture_on_commit_callbacks
) -> None:
    path = roots / "t"
    table = register_and_sync("t", churned(path))
    deleted, size = vacuum(path)
    table = synced(table, django_capture_on_commit_callbacks)
    event = FileRemovalEvent.objects.get(table=table)
    reader = token_client(make_user("reader"))

    body = reader.get(f"/api/tables/{table.pk}/vacuums/").json()
    assert body["count"] == 1
    got = body["results"][0]
    assert (got["files"], got["bytes"], got["unreadable"], got["version"]) == (len(deleted), size, [[0, 3]], 8)
    assert (got["vacuumStartVersion"], got["vacuumEndVersion"], got["complete"]) == (7, 8, True)
    assert reader.get(f"/api/tables/{table.slug}/vacuums/?limit=0").status_code == 400
    assert token_client(make_user("nobody-else")).get("/api/tables/999/vacuums/").status_code == 404

    rows = list(csv.DictReader(io.StringIO(b"".join(reader.get(f"/api/tables/{table.pk}/vacuums/csv/")).decode())))
    assert len(rows) == 1 and rows[0]["unreadableVersions"] == "0..3" and rows[0]["files"] == str(len(deleted))
    assert rows[0]["vacuumEndVersion"] == "8" and rows[0]["complete"] == "true"
    assert rows[0]["noticedAt"].endswith("Z") or "T" in rows[0]["noticedAt"]
    data = b"".join(reader.get(f"/api/tables/{table.pk}/vacuums/parquet/").streaming_content)
    parquet = pq.read_table(pa.BufferReader(data)).to_pylist()
    assert parquet[0]["bytes"] == size and parquet[0]["unreadableFrom"] == 0 and parquet[0]["unreadableTo"] == 3
    assert json.loads(parquet[0]["paths"]) == sorted(deleted)

    client.force_login(make_user("viewer"))
    assert client.get(f"/t/{table.slug}/file-removals.csv").status_code == 200
    page = client.get(f"/t/{table.slug}/history/").content.decode()
    assert 'id="file-removals"' in page  # the banner
    marked = page.index(f'id="removal-{event.pk}"')
    # newest first: between the commit after it (none here: it is the latest) and version 8
    assert page.index('id="v8"') > marked and "0..3" in page[marked : page.index('id="v8"')]
    oldest_first = client.get(f"/t/{table.slug}/history/?sort=version").content.decode()
    assert oldest_first.index('id="v8"') < oldest_first.index(f'id="removal-{event.pk}"')
    figure = client.get(f"/t/{table.slug}/charts.json").json()["timeline"]
    trace = next(t for t in figure["data"] if t["name"] == "files removed (VACUUM)")
    assert trace["x"] == [8.5] and "0..3" in trace["hovertext"][0]


def test_the_look_can_be_switched_off(roots, settings) -> None:
    settings.DELTAWEB_VACUUM_CHECK = False
    path = roots / "t"
    table = register_and_sync("t", churned(path))
    vacuum(path)
    sync.sync_table(table.pk)
    assert not FileLook.objects.exists() and not FileRemovalEvent.objects.exists()


# --- an object store: a sample, never a listing of the table at every sync ----------------------

BUCKET = "vacuum-record"


@pytest.fixture
def s3(s3_server, monkeypatch, settings):
    s3_buckets(s3_server, monkeypatch, settings, BUCKET)
    return s3_server


@pytest.fixture
def requests(monkeypatch):
    """Calls of the object-store storage: whole-table listings and HEADs."""
    from tables.delta.storage.objectstore import ObjectStoreStorage

    calls: list[tuple[str, str]] = []
    real_tree, real_head = ObjectStoreStorage.list_tree, ObjectStoreStorage.head

    def list_tree(self, prefix="", exclude=()):
        calls.append(("list_tree", prefix))
        return real_tree(self, prefix, exclude)

    def head(self, path):
        calls.append(("head", path))
        return real_head(self, path)

    monkeypatch.setattr(ObjectStoreStorage, "list_tree", list_tree)
    monkeypatch.setattr(ObjectStoreStorage, "head", head)
    return calls


def table_listings(calls: list[tuple[str, str]]) -> int:
    return sum(1 for kind, prefix in calls if kind == "list_tree" and prefix == "")


def data_heads(calls: list[tuple[str, str]]) -> int:
    return sum(1 for kind, path in calls if kind == "head" and "_delta_log" not in path)


def test_an_object_store_is_sampled_not_listed(s3, settings, requests, django_capture_on_commit_callbacks) -> None:
    settings.DELTAWEB_VACUUM_CHECK_EVERY_SYNCS = 3
    settings.DELTAWEB_VACUUM_CHECK_SAMPLE = 4
    options = {"storage_options": s3.storage_options()}
    uri = churned(f"s3://{BUCKET}/allowed/events-{time.time_ns()}", **options)
    table = register_and_sync("events", uri)
    assert table_listings(requests) == 1  # the first look lists the table once
    look = FileLook.objects.get(table=table)
    assert (look.missing, look.complete) == (0, True)

    per_sync = []
    for i in range(3):
        requests.clear()
        write_deltalake(uri, pa.table({"id": pa.array([50 + i, 60 + i], pa.int64())}), mode="append", **options)
        synced(table, django_capture_on_commit_callbacks)
        per_sync.append((table_listings(requests), data_heads(requests)))
    # two syncs without a look, then a sampled look: HEADs of a few files, no listing
    assert per_sync[0] == per_sync[1] == (0, 0)
    assert per_sync[2][0] == 0 and 0 < per_sync[2][1] <= 4 + 1
    assert FileLook.objects.get(table=table).syncs_since == 0

    # delta-rs's VACUUM logs its START and END: the next sync looks at once, its sample finds
    # the tombstones gone, and only then is the table listed, for exact counts
    requests.clear()
    before = {
        o["Key"]: o["Size"]
        for o in s3.boto3().list_objects_v2(Bucket=BUCKET, Prefix=uri[6 + len(BUCKET) :].lstrip("/"))["Contents"]
    }
    deleted = DeltaTable(uri, **options).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    prefix = uri.split(f"{BUCKET}/", 1)[1]
    size = sum(before[f"{prefix}/{p}"] for p in deleted)
    table = synced(table, django_capture_on_commit_callbacks)
    assert table_listings(requests) == 1 and data_heads(requests) <= 5
    event = FileRemovalEvent.objects.get(table=table)
    assert (event.files, event.bytes, event.complete) == (len(deleted), size, True)
    assert event.vacuum_end_version == table.last_synced_version
    assert in_ranges(event.unreadable) == unloadable(uri, table.last_synced_version, **options)
    assert Alert.objects.filter(table=table, rule="vacuum_unreadable").exists()
