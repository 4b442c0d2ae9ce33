"""sync_table run in-process: growth numbers, incremental runs, ICT changes, errors."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tables import errors, registration, sync
from tables.delta.commit import enable_ict
from tables.delta.snapshot import load_snapshot
from tables.models import Anomaly, Commit, SyncState
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
