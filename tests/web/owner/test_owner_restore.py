"""RESTORE on a table deltaweb manages: the commit goes through the DatabaseOwner, whose policy
accepts it only with the txnId of an approved restore request (issue 7, item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tables.delta.errors import CommitRefusedError, UnsupportedFeatureError
from tables.delta.restore.commit import commit_restore
from tables.delta.restore.plan import plan_restore
from tables.delta.snapshot.state import load_snapshot
from tables.delta.write.committer import OwnerCommitter
from tables.delta.write.managed import commit_via_owner
from tables.models import Commit, ManagedTable, OwnerRefusal, RatifiedCommit, RestoreRequest, RestoreStatus
from tables.services.catalog import registration
from tables.services.managed import use_cases as owner_services
from tables.services.owner.db import DatabaseOwner
from tables.services.restores import requests as restore_requests
from tables.services.restores import runs as restore_runs
from tables.services.sync import store as sync
from tests.web.pages.test_api import write_table
from tests.web.restore_tables import people

deltalake = pytest.importorskip("deltalake")

pytestmark = pytest.mark.django_db
S = RestoreStatus


def log_versions(path: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in (path / "_delta_log").glob("*.json") if p.name[:20].isdigit())


def add(name: str) -> dict:
    return {"add": {"path": name, "partitionValues": {}, "size": 1, "modificationTime": 0, "dataChange": True}}


@pytest.fixture
def managed(settings, tmp_path):
    """Versions 0..3 by delta-rs, taken over at 4, version 5 ratified and not backfilled."""
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    settings.DELTAWEB_OWNER_AUTO_BACKFILL = False
    path = write_table(tmp_path / "events")
    table = registration.register_table("events", str(path))
    assert owner_services.take_over(table)["version"] == 4
    assert commit_via_owner(path, DatabaseOwner(), [add("late.parquet")], "WRITE").version == 5
    assert log_versions(path) == [0, 1, 2, 3, 4]
    return table, path


def test_a_managed_tables_restore_is_recorded_as_planned_by_the_engine_that_planned_it(managed) -> None:
    """Asked of the Spark engine (the default), a managed table is planned by the local one,
    through its owner: the result says so, not the engine that was asked."""
    from tables.tasks import spark_planner

    table, _path = managed
    users = people()
    req = restore_requests.request_restore(table, users["analyst"], version=2, reason="engine")
    req = restore_requests.approve_restore(req, users["approver"], "ok")
    restore_runs.run_restore(req.pk, spark_planner)
    req.refresh_from_db()
    assert req.status == S.SUCCEEDED, req.error
    assert req.result["engine"] == "local" and spark_planner.name == "spark"


def test_an_approved_restore_lands_as_a_ratified_commit_then_backfilled(managed) -> None:
    table, path = managed
    users = people()
    req = restore_requests.request_restore(table, users["analyst"], version=2, reason="bad overwrite")
    assert req.plan_head_version == 5  # planned on the owner's latest, not the backfilled prefix
    req = restore_requests.approve_restore(req, users["approver"], "ok")
    restore_runs.run_restore(req.pk, restore_runs.local_planner)
    req.refresh_from_db()
    assert req.status == S.SUCCEEDED, req.error
    assert req.result_version == 6 and req.verification["verified"]
    ratified = RatifiedCommit.objects.get(table=table, version=6)
    assert ratified.operation == "RESTORE" and ratified.txn_id == req.txn
    assert not OwnerRefusal.objects.exists()
    # ratified; the owner's readers see the restored files, the table stays managed
    snap = load_snapshot(path, owner=DatabaseOwner())
    assert snap.version == 6 and snap.managed is not None and snap.managed.owner_name == "deltaweb"
    assert sorted(snap.file_paths()) == sorted(load_snapshot(path, 2).file_paths())
    # backfilled: delta-rs reads the restored version
    owner_services.backfill(table.pk)
    assert log_versions(path) == list(range(7)) and not ratified.__class__.objects.filter(backfilled=False).exists()
    assert deltalake.DeltaTable(str(path)).version() == 6
    assert sorted(deltalake.DeltaTable(str(path)).to_pyarrow_table()["id"].to_pylist()) == sorted(
        deltalake.DeltaTable(str(path), version=2).to_pyarrow_table()["id"].to_pylist()
    )
    mt = ManagedTable.objects.get(table=table)
    assert mt.latest_version == mt.backfilled_version == 6
    sync.sync_table(table.pk)
    assert Commit.objects.get(table=table, version=6).commit_info["txnId"] == req.txn


def test_an_unapproved_restore_is_refused_by_the_owner_with_the_reason_recorded(managed) -> None:
    table, path = managed
    users = people()
    owner = DatabaseOwner()
    plan = plan_restore(str(path), version=2, committer=OwnerCommitter(owner))
    assert plan.read_version == 5
    # a pending (not approved) request's txnId, and no request at all: refused, recorded, nothing lands
    pending = restore_requests.request_restore(table, users["analyst"], version=2, reason="not yet approved")
    for txn in (pending.txn, "deltaweb-restore-999999", None):
        with pytest.raises(CommitRefusedError, match="approved restore request") as err:
            commit_restore(str(path), plan, txn_id=txn, committer=OwnerCommitter(owner))
        assert err.value.refusal == "policy"
    refusals = list(OwnerRefusal.objects.filter(table=table).order_by("pk"))
    assert [(r.version, r.code, r.operation) for r in refusals] == [(6, "policy", "RESTORE")] * 3
    assert refusals[0].txn_id == pending.txn and "approved restore request" in refusals[0].reason
    assert not RatifiedCommit.objects.filter(table=table, version=6).exists()
    assert load_snapshot(path, owner=owner).version == 5 and log_versions(path)[-1] == 4
    # without the owner a managed table is not restored at all (no RESTORE around its owner)
    with pytest.raises(UnsupportedFeatureError, match="committed through its owner"):
        plan_restore(str(path), version=2)


def test_a_restore_of_a_frozen_managed_table_fails_with_the_owners_reason(managed) -> None:
    table, path = managed
    users = people()
    req = restore_requests.approve_restore(
        restore_requests.request_restore(table, users["analyst"], version=2, reason="bad overwrite"),
        users["approver"],
        "ok",
    )
    owner_services.freeze(table, users["approver"], "incident 7")
    restore_runs.run_restore(req.pk, restore_runs.local_planner)
    req.refresh_from_db()
    assert req.status == S.FAILED and "frozen" in req.error and "incident 7" in req.error
    refusal = OwnerRefusal.objects.get(table=table)
    assert refusal.operation == "RESTORE" and refusal.txn_id == req.txn and "incident 7" in refusal.reason
    assert load_snapshot(path, owner=DatabaseOwner()).version == 5
    assert RestoreRequest.objects.get(pk=req.pk).result_version is None
