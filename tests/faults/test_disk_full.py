"""The disk full under a restore's staging (the temporary file a commit is written to beside
the log before it is linked in): the restore fails with a named error that says so, the log
is untouched (no new version, no temporary file left), and the table reads as before. A real
file system that is really full: a tmpfs of a few hundred kilobytes, mounted for the test
(root only; elsewhere the test skips)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tables.models import RestoreStatus
from tables.services.catalog import registration
from tables.services.restores import requests as restore_requests
from tables.services.restores import runs as restore_runs
from tables.services.sync import store as sync
from tests.faults import RUNS
from tests.web.restore_tables import log_versions, people, restore_table, rs_ids

deltalake = pytest.importorskip("deltalake")
pytestmark = pytest.mark.django_db


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=768k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> None:
    """Take every free byte (tmpfs reserves none for root)."""
    with open(disk / "filler", "wb", buffering=0) as fh:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    fh.write(b"\0" * size)
            except OSError:
                pass
    os.sync()


@RUNS
def test_a_restore_on_a_full_disk_fails_by_name_and_leaves_the_table_untouched(settings, small_disk, run) -> None:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(small_disk)]
    path = restore_table(small_disk / "events")
    table = registration.register_table("events", str(path))
    sync.sync_table(table.pk)
    before, rows = log_versions(path), rs_ids(path)
    users = people()
    req = restore_requests.request_restore(table, users["analyst"], version=2, reason="undo the overwrite")
    req = restore_requests.approve_restore(req, users["approver"], "ok")
    fill(small_disk)

    restore_runs.run_restore(req.pk, restore_runs.local_planner)
    req.refresh_from_db()
    assert req.status == RestoreStatus.FAILED
    assert "no space left" in req.error.lower() and "unexpectedly" not in req.error
    assert str(small_disk) not in req.error  # the table by its name, never the server's paths
    assert log_versions(path) == before
    assert not [p.name for p in (path / "_delta_log").iterdir() if p.name.startswith(".")]  # no staging left
    assert rs_ids(path) == rows

    # with room again, the restore asked for again lands once
    (small_disk / "filler").unlink()
    req = restore_requests.request_restore(table, users["analyst"], version=2, reason="again, with room")
    req = restore_requests.approve_restore(req, users["approver2"], "ok")
    restore_runs.run_restore(req.pk, restore_runs.local_planner)
    req.refresh_from_db()
    assert req.status == RestoreStatus.SUCCEEDED, req.error
    assert log_versions(path) == [*before, before[-1] + 1] and rs_ids(path) == rs_ids(path, 2)
