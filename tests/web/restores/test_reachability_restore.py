"""A restore request to a version the reachability answer says cannot be restored is refused
before an approver is asked and nothing is saved (the API and the page's form use the same
service), with a message that says why: expired or unrebuildable logs from the answer itself,
missing files from the planner's check (which agrees with the answer and names them);
ignoring missing files still allows a restore without them."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pytest

from tables.models import RestoreRequest, Table

from ..pages.test_api import assert_error, make_user, token_client

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

pytestmark = pytest.mark.django_db


@pytest.fixture
def table(settings, tmp_path) -> Table:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = tmp_path / "events"
    for i in range(4):
        write_deltalake(str(path), pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    write_deltalake(str(path), pa.table({"id": pa.array([9], pa.int64())}), mode="overwrite")
    return Table.objects.create(name="events", slug="events", location=str(path))


def data_files(path: Path, version: int) -> set[str]:
    return {u.rsplit("/", 1)[1] for u in DeltaTable(str(path), version=version).file_uris()}


def test_a_version_with_deleted_files_is_refused_unless_they_are_ignored(table) -> None:
    path = Path(table.location)
    gone = sorted(data_files(path, 1))[0]
    (path / gone).unlink()  # as VACUUM would: the overwrite at version 4 removed it
    api = token_client(make_user("ana", group="analyst"))
    url = f"/api/tables/{table.pk}/restores/"
    body = assert_error(api.post(url, {"version": 1, "reason": "undo"}, format="json"), 400, "restore_missing_files")
    assert "1 missing" in body and gone in body and "ignore missing files" in body
    assert not RestoreRequest.objects.exists()
    # a timestamp that resolves to that version: refused the same way. The commit files' times
    # (what a table without In-Commit Timestamps resolves by) are set a minute apart: as written
    # they may fall in one millisecond, or after the commitInfo time delta-rs reports
    start = int(time.time() * 1000) - 10 * 60_000
    for v in range(5):
        os.utime(path / "_delta_log" / f"{v:020d}.json", ns=((start + v * 60_000) * 1_000_000,) * 2)
    ts = start + 60_000 + 30_000  # between versions 1 and 2
    assert_error(api.post(url, {"timestamp": str(ts), "reason": "undo"}, format="json"), 400, "restore_missing_files")
    assert not RestoreRequest.objects.exists()
    r = api.post(url, {"version": 1, "reason": "undo", "ignoreMissingFiles": True}, format="json")
    assert r.status_code == 201, r.content
    assert RestoreRequest.objects.get().plan["missingFiles"] == [gone]


def test_a_version_whose_log_expired_is_refused_with_the_reason(table) -> None:
    path = Path(table.location)
    DeltaTable(str(path)).create_checkpoint()
    for f in (path / "_delta_log").glob("0000000000000000000[0-2].json"):
        f.unlink()  # log cleanup below the checkpoint at version 4
    shutil.rmtree(path / "_delta_log" / "_commits", ignore_errors=True)
    api = token_client(make_user("ana", group="analyst"))
    body = assert_error(
        api.post(f"/api/tables/{table.pk}/restores/", {"version": 1, "reason": "undo"}, format="json"),
        400,
        "version_not_restorable",
    )
    assert "commits were deleted by log cleanup" in body and str(path) not in body
    # version 3's commit is there, but nothing before it to rebuild it from
    body = assert_error(
        api.post(f"/api/tables/{table.pk}/restores/", {"version": 3, "reason": "undo"}, format="json"),
        400,
        "version_not_restorable",
    )
    assert "cannot be rebuilt from the log" in body
    assert not RestoreRequest.objects.exists()


def test_the_form_refuses_it_with_the_message(table, client) -> None:
    path = Path(table.location)
    (path / sorted(data_files(path, 1))[0]).unlink()
    client.force_login(make_user("ana", group="analyst"))
    r = client.post(f"/t/{table.slug}/restore/", {"version": "1", "reason": "undo"})
    assert r.status_code == 400 and "1 file(s) of the version to restore are missing" in r.content.decode()
    assert not RestoreRequest.objects.exists()


def test_a_file_outside_the_roots_is_refused_and_never_shown_with_its_directory(table, tmp_path) -> None:
    import json

    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    secret = outside / "secret.parquet"
    secret.write_bytes(b"PAR1")
    log = Path(table.location) / "_delta_log"
    add = {"path": str(secret), "partitionValues": {}, "size": 4, "modificationTime": 0, "dataChange": True}
    (log / f"{5:020d}.json").write_text(
        json.dumps({"commitInfo": {"operation": "WRITE"}}) + "\n" + json.dumps({"add": add}) + "\n"
    )
    write_deltalake(table.location, pa.table({"id": pa.array([7], pa.int64())}), mode="overwrite")  # version 6
    api = token_client(make_user("ana", group="analyst"))
    reach = api.get(f"/api/tables/{table.pk}/reachability/").content.decode()
    assert str(outside) not in reach and ".../secret.parquet" in reach
    r = api.post(f"/api/tables/{table.pk}/restores/", {"version": 5, "reason": "undo"}, format="json")
    assert_error(r, 403, "path_outside_roots")
    assert str(outside) not in r.content.decode() and not RestoreRequest.objects.exists()
