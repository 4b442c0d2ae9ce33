"""deltaweb as a commit-owner (DatabaseOwner) end to end: RestOwnerClient against the live
server, the database as the owner's state, delta-rs as the filesystem-only reader."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rest_framework.authtoken.models import Token

from tables.delta.errors import CommitRefusedError
from tables.delta.managed.owner import CommitConflict, CommitResponse, encode_actions
from tables.delta.managed.owner_client import RestOwnerClient
from tables.delta.snapshot.state import load_snapshot
from tables.delta.write.managed import commit_via_owner
from tables.models import Commit, ManagedTable, OwnerRefusal, OwnerState, RatifiedCommit, RestoreRequest
from tables.services import errors
from tables.services.access.roles import APPROVER, WRITER
from tables.services.catalog import registration
from tables.services.managed import use_cases as owner_services
from tables.services.owner.db import DatabaseOwner, table_conf
from tables.services.sync import store as sync
from tests.web.pages.test_api import make_user, write_table

deltalake = pytest.importorskip("deltalake")

pytestmark = pytest.mark.django_db(transaction=True)


class Crash(Exception):
    pass


@pytest.fixture
def roots(settings, tmp_path):
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    settings.DELTAWEB_OWNER_AUTO_BACKFILL = False  # the tests backfill when they mean to
    return tmp_path


@pytest.fixture
def managed(roots):
    """A delta-rs table of versions 0..3 registered and taken over (ownership commit = version 4)."""
    path = write_table(roots / "events")
    table = registration.register_table("events", str(path))
    out = owner_services.take_over(table)
    assert out["changed"] and out["version"] == 4 and out["ictEnabled"] and out["ownerNotified"]
    return table, path


@pytest.fixture
def client(live_server):
    user = make_user("svc", group=WRITER)
    return RestOwnerClient(live_server.url, Token.objects.create(user=user).key, name="deltaweb")


def log_versions(path: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in (path / "_delta_log").glob("*.json") if p.name[:20].isdigit())


def add_file(path: Path, name: str, ids: list[int]) -> dict:
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), path / name)
    size = (path / name).stat().st_size
    return {"add": {"path": name, "partitionValues": {}, "size": size, "modificationTime": 0, "dataChange": True}}


def test_take_over_records_an_active_owner_with_ict(managed) -> None:
    table, path = managed
    mt = ManagedTable.objects.get(table=table)
    assert mt.state == OwnerState.ACTIVE and mt.latest_version == mt.backfilled_version == 4
    assert log_versions(path) == [0, 1, 2, 3, 4]  # the ownership commit is backfilled
    snap = load_snapshot(path)
    assert snap.managed is not None and snap.managed.owner_name == "deltaweb" and snap.managed.ict_enabled
    assert snap.managed.owner_conf["tableId"] == mt.owner_table_id


def test_commit_through_the_api_and_history_shows_the_unbackfilled_version(managed, client) -> None:
    table, path = managed
    result = commit_via_owner(path, client, [add_file(path, "m0.parquet", [7, 8])], "WRITE", is_blind_append=True)
    assert result.version == 5 and result.path.startswith("_delta_log/_commits/00000000000000000005.")
    assert log_versions(path) == [0, 1, 2, 3, 4]  # ratified, not backfilled
    # deltaweb's reader sees it; the history after a sync shows it
    assert load_snapshot(path, owner=client).version == 5
    sync.sync_table(table.pk)
    table.refresh_from_db()
    assert table.last_synced_version == 5
    assert Commit.objects.get(table=table, version=5).operation == "WRITE"
    # a reader without the owner: only the backfilled commits, and a warning saying so
    snap = load_snapshot(path)
    assert snap.version == 4 and snap.staleness_warning and "stale" in snap.staleness_warning
    assert deltalake.DeltaTable(str(path)).version() == 4
    # the owner API answers in the shape the client parses
    answer = client.get_commits(table_conf(ManagedTable.objects.get(table=table)), 0)
    assert [c.version for c in answer.commits] == [5] and answer.latest_table_version == 5


def test_two_writers_race_for_one_version_exactly_one_wins(managed, client) -> None:
    _table, path = managed
    tc = table_conf(ManagedTable.objects.get(table=_table))
    outcomes: list = []

    def attempt(i: int) -> None:
        data = encode_actions([{"commitInfo": {"inCommitTimestamp": 2_000_000_000_000 + i, "operation": "WRITE"}}])
        outcomes.append(client.commit(tc, 5, data))

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wins = [o for o in outcomes if isinstance(o, CommitResponse)]
    losses = [o for o in outcomes if isinstance(o, CommitConflict)]
    assert len(wins) == 1 and len(losses) == 3, outcomes
    assert all(o.winning_version == 5 for o in losses)
    assert RatifiedCommit.objects.filter(table=_table, version=5).count() == 1
    assert load_snapshot(path, owner=client).version == 5


def test_restore_commit_without_an_approved_request_is_refused_and_recorded(managed, client) -> None:
    table, path = managed
    with pytest.raises(CommitRefusedError, match="approved restore request") as err:
        commit_via_owner(path, client, [], "RESTORE", txn_id="deltaweb-restore-999")
    assert err.value.refusal == "policy"
    refusal = OwnerRefusal.objects.get(table=table)
    assert refusal.operation == "RESTORE" and refusal.version == 5 and refusal.code == "policy"
    req = RestoreRequest.objects.create(table=table, reason="test", status="approved", resolved_version=2)
    assert commit_via_owner(path, client, [], "RESTORE", txn_id=req.txn).version == 5


def test_frozen_table_refuses_every_commit(managed, client, live_server) -> None:
    table, path = managed
    approver = make_user("appr", group=APPROVER)
    with pytest.raises(errors.ServiceError):
        owner_services.freeze(table, make_user("nobody"), "no role")
    owner_services.freeze(table, approver, "quarterly audit")
    with pytest.raises(CommitRefusedError, match="frozen by appr: quarterly audit"):
        commit_via_owner(path, client, [], "WRITE")
    assert OwnerRefusal.objects.filter(table=table, code="policy").count() == 1
    owner_services.unfreeze(table, approver)
    assert commit_via_owner(path, client, [], "WRITE").version == 5
    # a user without the writer role cannot reach the owner API
    reader = RestOwnerClient(live_server.url, Token.objects.create(user=make_user("reader")).key, name="deltaweb")
    with pytest.raises(Exception, match="403"):
        commit_via_owner(path, reader, [], "WRITE")


def test_backfill_in_order_idempotent_and_crash_safe(managed, client) -> None:
    table, path = managed
    for i in range(3):
        commit_via_owner(path, client, [add_file(path, f"b{i}.parquet", [i])], "WRITE")
    mt = ManagedTable.objects.get(table=table)
    tc = table_conf(mt)
    seen: list[int] = []

    def fault(step: str) -> None:
        if step == "backfill:written":
            seen.append(max(log_versions(path)))
            if len(seen) == 2:
                raise Crash(step)  # after writing 6.json, before marking it

    with pytest.raises(Crash):
        DatabaseOwner(fault=fault).backfill_to_version(tc, 7)
    assert seen == [5, 6] and log_versions(path) == list(range(7))
    mt.refresh_from_db()
    assert mt.backfilled_version == 5  # 6 written, not marked
    # a restarted owner (a new instance) sees the same state and completes the backfill
    assert client.get_commits(tc, 0).latest_table_version == 7
    assert client.backfill_to_version(tc, 7) == 7
    assert client.backfill_to_version(tc, 7) == 7  # idempotent
    assert log_versions(path) == list(range(8))
    assert list(RatifiedCommit.objects.filter(table=table).values_list("version", "backfilled")) == [
        (5, True),
        (6, True),
        (7, True),
    ]
    assert client.get_commits(tc, 0).commits == []
    assert deltalake.DeltaTable(str(path)).version() == 7


def test_hand_back_then_delta_rs_reads_every_version(managed, client) -> None:
    table, path = managed
    rows = [2, 3, 2, 1, 1]  # versions 0..4 as write_table left them (4: the ownership commit)
    for i, n in enumerate([4, 2]):
        commit_via_owner(path, client, [add_file(path, f"h{i}.parquet", list(range(n)))], "WRITE")
        rows.append(rows[-1] + n)
    out = owner_services.hand_back(table)
    assert out["changed"] and out["version"] == 7
    rows.append(rows[-1])
    assert log_versions(path) == list(range(8))
    mt = ManagedTable.objects.get(table=table)
    assert mt.state == OwnerState.RELEASED and mt.backfilled_version == 7
    snap = load_snapshot(path)
    assert snap.managed is None and snap.staleness_warning is None and snap.version == 7
    for v in range(8):
        assert deltalake.DeltaTable(str(path), version=v).to_pyarrow_table().num_rows == rows[v], v
    # no commits accepted any more
    with pytest.raises(Exception, match=r"filesystem table|not own"):
        commit_via_owner(path, client, [], "WRITE")


def test_table_page_shows_the_owner_card_and_approvers_freeze(managed, client) -> None:
    from django.test import Client

    table, path = managed
    commit_via_owner(path, client, [], "WRITE")
    sync.sync_table(table.pk)
    web = Client()
    web.force_login(make_user("appr", group=APPROVER))
    page = web.get(f"/t/{table.slug}/").content.decode()
    assert "Commit-owner: deltaweb" in page and 'id="owner-staged">1 version (5)' in page and "Freeze" in page
    assert "the oldest unpublished commit waits for" in page
    resp = web.post(f"/t/{table.slug}/freeze/", {"action": "freeze", "reason": "incident 42"})
    assert resp.status_code == 302
    assert ManagedTable.objects.get(table=table).frozen
    with pytest.raises(CommitRefusedError):
        commit_via_owner(path, client, [], "WRITE")
    page = web.get(f"/t/{table.slug}/").content.decode()
    assert "incident 42" in page and "Unfreeze" in page


def test_management_command_creates_a_managed_table_and_a_restarted_owner_sees_it(roots, client) -> None:
    import json as _json
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("managed_table", "create", "fresh", str(roots / "fresh"), stdout=out)
    info = _json.loads(out.getvalue())
    assert info["state"] == "active" and info["latestRatifiedVersion"] == 0
    path = roots / "fresh"
    assert commit_via_owner(path, client, [], "WRITE").version == 1
    tc = table_conf(ManagedTable.objects.get(owner_table_id=info["tableId"]))
    # a new owner instance (a restarted process) answers from the database alone
    assert DatabaseOwner().get_commits(tc, 0) == client.get_commits(tc, 0)
    assert [c.version for c in DatabaseOwner().get_commits(tc, 0).commits] == [1]
    out = StringIO()
    call_command("managed_table", "freeze", "fresh", "--reason", "maintenance", stdout=out)
    assert _json.loads(out.getvalue())["frozen"] is True
    with pytest.raises(CommitRefusedError, match="maintenance"):
        commit_via_owner(path, client, [], "WRITE")


def test_publishing_writes_a_checkpoint_every_n_versions(managed, settings) -> None:
    """Backfilling past each multiple of DELTAWEB_OWNER_CHECKPOINT_INTERVAL writes a checkpoint
    there (the later ones built from the previous checkpoint and the commits after it); each holds
    the files delta-rs sees at its version."""
    settings.DELTAWEB_OWNER_CHECKPOINT_INTERVAL = 3
    table, path = managed
    owner = DatabaseOwner()
    tc = table_conf(ManagedTable.objects.get(table=table))
    for i in range(8):  # versions 5..12
        commit_via_owner(path, owner, [add_file(path, f"c{i}.parquet", [i])], "WRITE")
        owner.backfill_to_version(tc, 100)
    checkpoints = sorted(int(p.name[:20]) for p in (path / "_delta_log").glob("*.checkpoint.parquet"))
    assert checkpoints == [6, 9, 12]

    def names(version: int | None = None) -> list[str]:
        return sorted(u.rsplit("/", 1)[1] for u in deltalake.DeltaTable(str(path), version=version).file_uris())

    for v in checkpoints:
        rows = pq.read_table(path / "_delta_log" / f"{v:020d}.checkpoint.parquet").column("add").to_pylist()
        assert sorted(r["path"] for r in rows if r) == names(v)
    assert names() == sorted(load_snapshot(path).file_paths())
