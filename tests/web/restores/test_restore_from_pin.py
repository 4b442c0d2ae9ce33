"""Restoring to a pinned version after VACUUM: pin version N, let delta-rs VACUUM with zero
retention and clean the log up, sync, then request the restore to N. The plan reads N from the
pin, names the files that come back from the pin store and their bytes (form, request page,
API); another user approves it; the run copies them into the table under their own paths,
checks them, and commits the RESTORE. delta-rs then reads the table's new version with exactly
the rows it read at version N before the VACUUM. A partial restore by partition works the same
way, and a pin store that lost a file fails the run before any commit, saying so."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pytest
from django.test import Client

from tables.models import Pin, RestoreRequest, RestoreStatus, Table
from tables.services.catalog import registration
from tables.services.pins import lifecycle as pins
from tables.services.pins import queries as pin_queries
from tables.services.restores import requests as restore_requests
from tables.services.restores import runs as restore_runs
from tables.services.sync import store as sync
from tests.core.builders import writable
from tests.web.kept_tables import pin_place
from tests.web.restore_tables import log_versions, restore_table
from tests.web.restores.test_restores import api_client

deltalake = pytest.importorskip("deltalake")

pytestmark = pytest.mark.django_db
OLD = 90 * 86_400
S = RestoreStatus


def rows(path: str | Path, version: int | None = None, where: str = "") -> list[tuple]:
    """Every row of a version as delta-rs reads it (deletion vectors applied), sorted."""
    table = deltalake.DeltaTable(str(path), version=version)
    sql = f"select * from t {where}"
    batches = deltalake.QueryBuilder().register("t", table).execute(sql).read_all()
    return sorted((tuple(sorted(r.items())) for r in pa.table(batches).to_pylist()), key=repr)


def _age_log(path: Path) -> None:
    for name in os.listdir(path / "_delta_log"):
        os.utime(path / "_delta_log" / name, (time.time() - OLD,) * 2)


def vacuum_and_clean(path: Path) -> None:
    """delta-rs: VACUUM with zero retention, a checkpoint, and log cleanup of everything older.
    delta-rs 1.6 leaves deletion-vector files behind; Delta Lake's VACUUM deletes those the
    latest version no longer references, as done here after it."""
    _age_log(path)
    dt = deltalake.DeltaTable(str(path))
    assert dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    from tables.delta.snapshot.dv import deletion_vector_file
    from tables.delta.snapshot.state import load_snapshot

    live = {deletion_vector_file(d) for d in load_snapshot(str(path)).files.column("deletionVector").to_pylist()}
    for name in os.listdir(path):
        if name.startswith("deletion_vector_") and name not in live:
            os.unlink(path / name)
    dt = deltalake.DeltaTable(str(path))
    dt.create_checkpoint()
    _age_log(path)
    dt.cleanup_metadata()


@pytest.fixture
def roots(settings, tmp_path) -> Path:
    return pin_place(settings, tmp_path)


def register(path: Path, name: str) -> Table:
    t = registration.register_table(name, str(path))
    sync.sync_table(t.pk)
    t.refresh_from_db()
    return t


def pin_and_vacuum(table: Table, version: int, users: dict) -> Pin:
    pin = pins.create_pin(table, version, f"keep-{version}", "the state before the migration", users["analyst"])
    assert pin.state == "active"
    vacuum_and_clean(Path(table.location))
    sync.sync_table(table.pk)
    from tables.services.versions import read as versions

    versions._SNAPSHOTS.clear()
    return pin


def gone_from_table(table: Table, version: int) -> list[str]:
    """The files of `version` (as its pin keeps them) the table no longer has."""
    from tables.delta.snapshot.dv import deletion_vector_file

    kept = pin_queries.pinned_snapshot(table, version)
    dvs = {deletion_vector_file(d) for d in kept.files.column("deletionVector").to_pylist()} - {None}
    return sorted(p for p in {*kept.file_paths(), *dvs} if not (Path(table.location) / p).exists())


def run(req: RestoreRequest, users: dict) -> RestoreRequest:
    restore_requests.approve_restore(req, users["approver"], "ok")
    restore_runs.run_restore(req.pk, restore_runs.local_planner)
    req.refresh_from_db()
    return req


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize(
    ("golden", "version"),
    [(None, 2), ("dv-partitioned-with-checkpoint", 5)],
    ids=["delta-rs-table", "golden-partitioned-with-deletion-vectors"],
)
def test_restore_to_a_pinned_version_after_vacuum(roots, golden_copy, users, golden, version) -> None:
    if golden is None:
        path = restore_table(roots / "events")
    else:
        path = writable(golden_copy(golden)).rename(roots / "events")
    table = register(path, "events")
    expected = rows(path, version)
    pin = pin_and_vacuum(table, version, users)
    with pytest.raises(deltalake.exceptions.DeltaError):
        rows(path, version)  # the table itself lost the version (log cleanup)
    gone = gone_from_table(table, version)
    assert gone  # VACUUM took some of its files

    # the form says the version comes from the pin
    page = browser(users["analyst"]).get(f"/t/{table.slug}/restore/?version={version}")
    assert page.status_code == 200 and b'id="restore-from-pin"' in page.content
    assert f"keep-{version}".encode() in page.content

    req = restore_requests.request_restore(table, users["analyst"], version=version, reason="undo the migration")
    back = req.plan["fromPin"]
    assert req.plan["pin"] == {"id": pin.pk, "name": pin.name, "version": version}
    assert sorted(f["path"] for f in back["sample"]) == gone and back["count"] == len(gone)
    sizes = {p: (Path(pin.store_location) / p).stat().st_size for p in gone}
    assert back["bytes"] == sum(sizes.values()) and {f["path"]: f["size"] for f in back["sample"]} == sizes
    if golden:
        assert any(f["kind"] == "dv" for f in back["sample"])  # deletion-vector files come back too
    assert not any((path / p).exists() for p in gone)  # planning copies nothing
    assert str(pin.store_location) not in str(req.plan)  # the server's directories are not told

    # the request page an approver reads, and the API
    detail = browser(users["approver"]).get(f"/restores/{req.pk}/")
    html = detail.content.decode()
    assert detail.status_code == 200 and 'id="plan-from-pin"' in html and 'id="decision"' in html
    assert f'id="from-pin-count">{len(gone)} file' in html and gone[0] in html
    api = api_client(users["approver"]).get(f"/api/restores/{req.pk}/")
    assert api.status_code == 200 and api.json()["plan"]["fromPin"]["bytes"] == back["bytes"]

    head = max(log_versions(path))
    req = run(req, users)
    assert req.status == S.SUCCEEDED, req.error
    assert req.result_version == head + 1 and req.result["fromPin"]["copied"] == len(gone)
    assert req.result["fromPin"]["bytes"] == back["bytes"]
    assert req.verification["verified"]
    assert rows(path) == expected  # delta-rs reads the new version with version N's rows
    assert rows(path, req.result_version) == expected
    notes = [e.note for e in req.events.all()]
    assert any(f"brought back {len(gone)} file(s)" in n and pin.name in n for n in notes), notes
    info = deltalake.DeltaTable(str(path)).history(1)[0]
    assert info["operation"] == "RESTORE" and info["operationParameters"]["approvedBy"] == "appro"


def test_partial_restore_from_a_pin(roots, golden_copy, users) -> None:
    path = writable(golden_copy("dv-partitioned-with-checkpoint")).rename(roots / "events")
    table = register(path, "events")
    version = 5
    wanted = rows(path, version, "where part = 2")
    latest_others = rows(path, None, "where part <> 2")
    assert wanted != rows(path, None, "where part = 2")  # the partition changed since
    pin_and_vacuum(table, version, users)
    gone = gone_from_table(table, version)
    in_part = [p for p in gone if p.startswith("part=2/")]
    assert in_part and len(in_part) < len(gone)

    req = restore_requests.request_restore(
        table, users["analyst"], version=version, reason="part 2 only", where="part = 2"
    )
    assert req.plan["predicate"] == "part = 2"
    brought = {f["path"] for f in req.plan["fromPin"]["sample"]}
    # the partition's files come back, and the deletion vectors of its files; no other partition's
    assert set(in_part) <= brought
    assert not {p for p in brought if p.startswith("part=")} - set(in_part)
    req = run(req, users)
    assert req.status == S.SUCCEEDED, req.error
    assert rows(path, None, "where part = 2") == wanted
    assert rows(path, None, "where part <> 2") == latest_others
    assert not any((path / p).exists() for p in gone if p.startswith("part=") and p not in in_part)


def test_a_pin_store_that_lost_a_file_fails_before_the_commit(roots, users) -> None:
    path = restore_table(roots / "events")
    table = register(path, "events")
    pin = pin_and_vacuum(table, 2, users)
    req = restore_requests.request_restore(table, users["analyst"], version=2, reason="undo")
    lost = sorted(f["path"] for f in req.plan["fromPin"]["sample"])[0]
    os.unlink(Path(pin.store_location) / lost)
    head = max(log_versions(path))
    req = run(req, users)
    assert req.status == S.FAILED
    assert "neither in the table nor in the pin" in req.error and lost in req.error
    assert "Traceback" not in req.error and str(pin.store_location) not in req.error
    assert max(log_versions(path)) == head  # nothing committed
    assert not (path / lost).exists()
    # asked again now, the request itself is refused with the same words, nothing saved
    with pytest.raises(restore_requests.ServiceError) as exc:
        restore_requests.request_restore(table, users["analyst"], version=2, reason="undo")
    assert exc.value.code == "restore_missing_files" and "pin" in exc.value.message
    r = browser(users["analyst"]).post(f"/t/{table.slug}/restore/", {"version": "2", "reason": "undo", "where": ""})
    assert r.status_code == 400 and b"neither in the table nor in the pin" in r.content
    assert b"to restore without them" not in r.content  # ignoring them would not help


def test_a_copy_that_fails_midway_leaves_no_commit_and_the_next_restore_copies_the_rest(
    roots, users, monkeypatch
) -> None:
    from tables.delta.restore import from_pin

    path = restore_table(roots / "events")
    table = register(path, "events")
    expected = rows(path, 2)
    pin_and_vacuum(table, 2, users)
    gone = gone_from_table(table, 2)
    assert len(gone) >= 2
    real, calls = from_pin.place_file, []

    def failing(source, key, dest, into):  # an injected failure: the store refuses the second copy
        calls.append(key)
        if len(calls) == 2:
            raise OSError("injected: the store refused the copy")
        return real(source, key, dest, into)

    monkeypatch.setattr(from_pin, "place_file", failing)
    head = max(log_versions(path))
    req = run(restore_requests.request_restore(table, users["analyst"], version=2, reason="undo"), users)
    assert req.status == S.FAILED and "copying it from the pin failed (injected" in req.error
    assert max(log_versions(path)) == head  # no commit
    assert deltalake.DeltaTable(str(path)).version() == head
    copied = [p for p in gone if (path / p).exists()]
    assert 1 <= len(copied) < len(gone)  # harmless: no version references them

    monkeypatch.setattr(from_pin, "place_file", real)
    again = restore_requests.request_restore(table, users["analyst"], version=2, reason="undo, again")
    assert again.plan["fromPin"]["count"] == len(gone) - len(copied)  # copies already there are not made again
    again = run(again, users)
    assert again.status == S.SUCCEEDED, again.error
    assert again.result["fromPin"]["copied"] == len(gone) - len(copied)
    assert rows(path) == expected
