"""sync_table run in-process: growth numbers, incremental runs, ICT changes, errors."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tables.delta.snapshot.state import load_snapshot
from tables.delta.write.commit import enable_ict
from tables.models import Anomaly, Commit, SyncState
from tables.services import errors
from tables.services.catalog import registration
from tables.services.sync import store as sync
from tables.services.sync import stored_text
from tests.conftest import golden_path

deltalake = pytest.importorskip("deltalake")


@pytest.fixture
def roots(settings, tmp_path):
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path), str(golden_path("dv-partitioned-with-checkpoint").parent)]
    return tmp_path


@pytest.mark.django_db
def test_growth_per_version_equals_snapshots(roots) -> None:
    path = golden_path("dv-partitioned-with-checkpoint")
    table = registration.register_table("dv", str(path))
    sync.sync_table(table.pk)
    rows = list(Commit.objects.filter(table=table).order_by("version"))
    assert len(rows) == 16
    for row in rows:
        snap = load_snapshot(path, row.version)
        assert (row.num_files, row.size_bytes) == (snap.num_files, snap.size_bytes), row.version


@pytest.mark.django_db
def test_ict_enabled_later_retimes_and_keeps_rows(roots) -> None:
    p = roots / "t"
    for i in range(3):
        deltalake.write_deltalake(str(p), pa.table({"x": [i]}), mode="append")
    table = registration.register_table("t", str(p))
    sync.sync_table(table.pk)
    assert set(Commit.objects.filter(table=table).values_list("timestamp_source", flat=True)) == {"file"}
    enable_ict(str(p))
    out = sync.sync_table(table.pk)
    assert out["newCommits"] == 1
    table.refresh_from_db()
    assert table.ict_enabled and table.ict_enablement_version == 3
    sources = dict(Commit.objects.filter(table=table).values_list("version", "timestamp_source"))
    assert sources == {0: "file", 1: "file", 2: "file", 3: "ict"}
    assert not Anomaly.objects.filter(table=table).exclude(kind="file_time_not_increasing").exists()


@pytest.mark.django_db
def test_registration_rejects_bad_locations(roots, tmp_path_factory) -> None:
    outside = tmp_path_factory.mktemp("outside")
    deltalake.write_deltalake(str(outside / "t"), pa.table({"x": [1]}))
    with pytest.raises(errors.ServiceError, match="outside the allowed roots"):
        registration.register_table("o", str(outside / "t"))
    with pytest.raises(errors.ServiceError, match="outside the allowed roots"):
        registration.register_table("o", str(roots / ".." / outside.name / "t"))
    (roots / "link").symlink_to(outside / "t")
    with pytest.raises(errors.ServiceError, match="outside the allowed roots"):
        registration.register_table("o", str(roots / "link"))
    (roots / "plain").mkdir()
    with pytest.raises(errors.ServiceError, match="not a Delta table"):
        registration.register_table("o", str(roots / "plain"))
    with pytest.raises(errors.ServiceError, match="absolute"):
        registration.register_table("o", "relative/path")
    from tables.models import Table

    assert Table.objects.count() == 0


@pytest.mark.django_db
def test_unreadable_log_keeps_cached_history(roots) -> None:
    p = roots / "t"
    deltalake.write_deltalake(str(p), pa.table({"x": [1]}))
    deltalake.write_deltalake(str(p), pa.table({"x": [2]}), mode="append")
    table = registration.register_table("t", str(p))
    sync.sync_table(table.pk)
    (p / "_delta_log" / f"{0:020d}.json").unlink()  # now nothing can be rebuilt
    out = sync.sync_table(table.pk)
    assert "error" in out
    table.refresh_from_db()
    assert table.sync_state == SyncState.ERROR and table.last_error
    assert Commit.objects.filter(table=table).count() == 2


def _write_commits(root, versions: range) -> None:
    """Small commits written directly: commitInfo first (with nested, unicode and null values),
    then one add; version 0 also holds the protocol and metadata."""
    import json

    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    for v in versions:
        info = {
            "timestamp": 1_700_000_000_000 + v * 1000,
            "operation": "WRITE" if v % 3 else "MERGE",
            "operationParameters": {"mode": "Append", "predicate": f"id = {v} ∧ ünïcode", "nested": {"k": [v, None]}},
            "operationMetrics": {"numFiles": "1"},
            "engineInfo": "test-engine",
            "userMetadata": None,
            "isBlindAppend": v % 2 == 0,
        }
        if v:
            info["readVersion"] = v - 1
        lines = [{"commitInfo": info}]
        if v == 0:
            lines.append({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}})
            lines.append({"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}},
                                       "schemaString": json.dumps(schema), "partitionColumns": [],
                                       "configuration": {}, "createdTime": 0}})  # fmt: skip
        lines.append({"add": {"path": f"part-{v:05d}.parquet", "partitionValues": {}, "size": 100 + v,
                              "modificationTime": 0, "dataChange": True}})  # fmt: skip
        (log / f"{v:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")


@pytest.mark.django_db
def test_batched_sync_stores_what_delta_rs_reads(roots) -> None:
    """More commits than one threaded read batch, stored by the bulk INSERT: every row's
    commitInfo fields, read back through the ORM, equal delta-rs's history(); a second sync
    adds the new commits once and leaves the stored ones alone."""
    path = roots / "many"
    _write_commits(path, range(150))
    table = registration.register_table("many", str(path))
    assert sync.sync_table(table.pk)["newCommits"] == 150
    _write_commits(path, range(150, 230))
    assert sync.sync_table(table.pk)["newCommits"] == 80
    assert sync.sync_table(table.pk)["newCommits"] == 0
    rows = {c.version: c for c in Commit.objects.filter(table=table)}
    assert sorted(rows) == list(range(230))
    theirs = {h["version"]: h for h in deltalake.DeltaTable(str(path)).history()}
    assert sorted(theirs) == list(range(230))
    for v, row in rows.items():
        h = theirs[v]
        assert row.operation == h["operation"]
        assert row.operation_parameters == h["operationParameters"]
        assert row.operation_metrics == h["operationMetrics"]
        assert row.commit_info_timestamp == h["timestamp"]
        assert row.is_blind_append is h["isBlindAppend"]
        assert row.read_version == h.get("readVersion")
        assert row.commit_info["operationParameters"]["predicate"].endswith("ünïcode")
        assert row.commit_info["userMetadata"] is None and row.user_metadata == ""
        assert (row.num_files, row.size_bytes) == (v + 1, sum(100 + i for i in range(v + 1)))
    assert Commit.objects.filter(table=table, job__isnull=True).count() == 230  # None stays SQL NULL


@pytest.mark.parametrize(
    "value",
    [
        {},
        {"a": "x" * 1999},
        {"a": "x" * 2001},
        {"k" * 201: 1},
        {"k" * 199: 1},
        {"a": [0] * 1001},
        {"a": [0] * 999},
        {"a": {"b": "é" * 1990}},
        {"a": '"' * 900},
        {"x": {"k" * 250: "v"}},
        {"a": '"' + "k" * 300 + '": 1'},
        [{"b": i} for i in range(400)],
    ],
)
def test_fits_serialized_never_lets_a_value_skip_cutting(value) -> None:
    """The fast check may send a fitting value to cut_json (which leaves it equal), never the
    other way round."""
    for limit in (stored_text.MAX_JSON_TEXT, stored_text.MAX_TEXT):
        if stored_text.fits_serialized(value, limit):
            assert stored_text.fits(value, limit)
        if stored_text.fits(value, limit):
            assert stored_text.cut_json(value, limit) == value
