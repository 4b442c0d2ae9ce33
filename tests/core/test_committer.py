"""A RESTORE is handed the way its table's commits are made (write/committer.py) instead of an
optional owner it branches on: the filesystem's put-if-absent, or the table's commit-owner."""

from __future__ import annotations

from pathlib import Path

import pytest

from tables.delta.errors import UnsupportedFeatureError
from tables.delta.restore.commit import commit_restore, find_restore_commit
from tables.delta.restore.plan import plan_restore
from tables.delta.snapshot.state import load_snapshot
from tables.delta.write.committer import FILESYSTEM, OwnerCommitter, committer_for
from tests.core.test_managed import log_versions, managed_table, plain_table


def test_a_managed_tables_restore_is_ratified_by_the_owner_it_is_handed(tmp_path: Path) -> None:
    table, owner = managed_table(tmp_path, unbackfilled=3)  # versions 4-6 known to the owner only
    with pytest.raises(UnsupportedFeatureError, match="committed through its owner"):
        plan_restore(str(table), version=2, check_files=False)  # the filesystem's way: refused
    committer = committer_for(owner)
    assert isinstance(committer, OwnerCommitter) and committer.managed
    plan = plan_restore(str(table), version=4, check_files=False, committer=committer)
    assert plan.read_version == 6  # the owner's latest, not the log directory's 3
    out = commit_restore(str(table), plan, txn_id="txn-r", committer=committer)
    assert out["version"] == 7 and out["verified"]
    assert log_versions(table) == [0, 1, 2, 3]  # ratified, not yet backfilled into _delta_log/
    restored = load_snapshot(table, owner=owner)
    assert restored.version == 7
    assert sorted(restored.file_paths()) == sorted(load_snapshot(table, 4, owner=owner).file_paths())
    assert find_restore_commit(str(table), 6, "txn-r", committer) == 7
    assert find_restore_commit(str(table), 6, "txn-r") is None  # the log directory does not hold it yet


def test_a_filesystem_tables_restore_is_put_if_absent(tmp_path: Path) -> None:
    table = plain_table(tmp_path / "t")
    assert committer_for(None) is FILESYSTEM and not FILESYSTEM.managed
    plan = plan_restore(str(table), version=0, check_files=False)
    out = commit_restore(str(table), plan, txn_id="txn-f")
    assert out["version"] == 3 and out["verified"] and log_versions(table) == [0, 1, 2, 3]
