"""First-seen digests packed per block of commits: a rewrite of one commit inside a block is
found and reported with its version, both digests and when it was first seen; the signed audit
export's chain across blocks is the one `delta audit-export` makes from the bytes on disk; the
migration packs stored SeenCommit rows into blocks and back without loss. Run on SQLite and on
PostgreSQL (DATABASE_URL=postgres://..., as `make test-postgres` does)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from datetime import timedelta

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.db import connection
from django.utils import timezone

from tables.delta.history.audit import export_table
from tables.delta.history.chain import GENESIS, chain_entries, chain_entry
from tables.models import HistoryRewrite, SeenBlock, SeenChange, Table
from tables.services.catalog import registration
from tables.services.chain import look as chain
from tables.services.chain import seen as seen_store
from tables.services.chain.audit import audit_export
from tables.services.sync import store as sync

from ..sync.test_sync import _write_commits

COMMITS = 2500  # blocks 0..999, 1000..1999, 2000..2499
REWRITTEN = 1700  # inside the middle block, within the sync's look window


@pytest.fixture
def roots(settings, tmp_path):
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    return tmp_path


def _digest(path, v: int) -> str:
    return hashlib.sha256((path / "_delta_log" / f"{v:020d}.json").read_bytes()).hexdigest()


@pytest.mark.django_db(transaction=True)
def test_a_rewrite_inside_a_block_is_found_with_both_digests(roots, settings) -> None:
    k = Ed25519PrivateKey.generate()
    settings.DELTAWEB_AUDIT_KEY = k.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    path = roots / "t"
    _write_commits(path, range(COMMITS))
    table = registration.register_table("t", str(path))
    sync.sync_table(table.pk)
    blocks = list(SeenBlock.objects.filter(table=table).order_by("first_version"))
    assert [(b.first_version, b.last_version) for b in blocks] == [(0, 999), (1000, 1999), (2000, 2499)]
    first = _digest(path, REWRITTEN)
    first_seen = seen_store.seen_commits(table, REWRITTEN, REWRITTEN)[0].first_seen_at
    assert first_seen == blocks[1].first_seen_at

    # the same size, another byte, a later modification time: as a tool "fixing" a log would
    f = path / "_delta_log" / f"{REWRITTEN:020d}.json"
    f.write_bytes(f.read_bytes().replace(b"test-engine", b"test-engin3"))
    later = time.time() + 5
    os.utime(f, (later, later))
    found = _digest(path, REWRITTEN)
    before_look = timezone.now()
    sync.sync_table(table.pk)

    finding = HistoryRewrite.objects.get(table=table)
    assert (finding.version, finding.kind, finding.first_sha256, finding.found_sha256) == (
        REWRITTEN,
        "rewritten",
        first,
        found,
    )
    assert finding.first_seen_at == first_seen and finding.found_at >= before_look
    # sparse: only the rewritten commit has a row of its own, the blocks stay as they were stored
    assert list(SeenChange.objects.filter(table=table).values_list("version", "last_sha256")) == [(REWRITTEN, found)]
    assert SeenBlock.objects.filter(table=table).count() == 3
    state = chain.state_of(table, REWRITTEN)
    assert state["sha256"] == first and not state["matches"] and state["findings"][0]["found"] == found
    assert chain.state_of(table, REWRITTEN - 1)["matches"] and chain.state_of(table, REWRITTEN + 1)["matches"]

    # the export still carries what was first seen, chained as the command line chains the bytes
    body = json.loads(audit_export(table, 900, 2100).split(b"\n")[0])
    rows = {c["version"]: c for c in body["commits"]}
    assert sorted(rows) == list(range(900, 2101))
    assert rows[REWRITTEN]["sha256"] == first and rows[REWRITTEN]["stillMatches"] is False
    assert all(c["stillMatches"] for v, c in rows.items() if v != REWRITTEN)
    f.write_bytes(f.read_bytes().replace(b"test-engin3", b"test-engine"))  # the bytes first seen
    cli = export_table(str(path), 900, 2100)
    assert [c["entry"] for c in cli["commits"]] == [rows[v]["entry"] for v in range(900, 2101)]
    assert cli["chain"]["previous"] == body["chain"]["previous"]

    # put back as first seen: the next look finds it matching, and its own row is gone
    os.utime(f, (later + 5, later + 5))
    sync.sync_table(table.pk)
    assert not SeenChange.objects.filter(table=table).exists() and HistoryRewrite.objects.count() == 1
    assert chain.state_of(table, REWRITTEN)["matches"]


@pytest.mark.django_db(transaction=True)
def test_a_few_new_commits_fill_the_last_block(roots) -> None:
    """An incremental sync's commits go into the last block while it has room, each with
    its own first-seen time, chained on."""
    path = roots / "t"
    _write_commits(path, range(10))
    table = registration.register_table("t", str(path))
    sync.sync_table(table.pk)
    _write_commits(path, range(10, 15))
    sync.sync_table(table.pk)
    (block,) = SeenBlock.objects.filter(table=table)
    assert (block.first_version, block.last_version, block.count) == (0, 14, 15) and block.seen_after
    seen = seen_store.seen_commits(table)
    digests = [_digest(path, v) for v in range(15)]
    assert [s.sha256 for s in seen] == digests
    assert [s.entry for s in seen] == chain_entries(None, list(enumerate(digests)))
    assert len({s.first_seen_at for s in seen[:10]}) == len({s.first_seen_at for s in seen[10:]}) == 1
    assert seen[10].first_seen_at > seen[9].first_seen_at


_OLD = ("version", "sha256", "entry", "size", "first_seen_at", "timestamp", "listed_size", "listed_time",
        "last_sha256", "hashed_ms", "expired", "gone_at")  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_the_migration_packs_seen_commits_and_back() -> None:
    from django.db.migrations.executor import MigrationExecutor

    before = [("tables", "0030_plural_names")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    table = old.get_model("tables", "Table").objects.create(name="m", slug="m", location="/nowhere/m")
    OldSeen = old.get_model("tables", "SeenCommit")
    t1 = timezone.now().replace(microsecond=123456) - timedelta(days=3)
    t2 = t1 + timedelta(hours=5, microseconds=7)
    digests = [hashlib.sha256(str(v).encode()).hexdigest() for v in range(5, 2105)]  # a chain starting past 0
    entries = chain_entries(None, zip(range(5, 2105), digests, strict=True))
    entries[1500] = "ab" * 32  # a stored entry no digest explains: kept as it is, the rest chained on from it
    entries[1501:] = chain_entries("ab" * 32, zip(range(1506, 2105), digests[1501:], strict=True))
    rows = []
    for i, v in enumerate(range(5, 2105)):
        at = t1 if v < 1300 else t2
        rows.append(
            OldSeen(
                table_id=table.pk,
                version=v,
                sha256=digests[i],
                entry=entries[i],
                size=100 + v,
                first_seen_at=at,
                timestamp=1_700_000_000_000 + v,
                listed_size=100 + v,
                listed_time=1_600_000_000_000 + v,
                last_sha256="",
                hashed_ms=int(at.timestamp() * 1000),
                checked_at=at,
                expired=v < 20,
            )
        )
    rows[300].hashed_ms += 86_400_000  # read again a day later, the same bytes
    rows[301].last_sha256, rows[301].hashed_ms = "cd" * 32, rows[301].hashed_ms + 1  # rewritten
    rows[302].gone_at = t2  # vanished
    OldSeen.objects.bulk_create(rows)
    expected = [tuple(getattr(r, f) for f in _OLD) for r in rows]

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    t = Table.objects.get(pk=table.pk)
    seen = seen_store.seen_commits(t)
    assert [tuple(getattr(s, f) for f in _OLD) for s in seen] == expected
    assert sorted(SeenChange.objects.filter(table=t).values_list("version", flat=True)) == [306, 307]
    blocks = SeenBlock.objects.filter(table=t).order_by("first_version")
    # 1,000 commits a block, cut where the stored entry does not follow (kept in a block of its own)
    assert [(b.first_version, b.last_version) for b in blocks] == [
        (5, 1004), (1005, 1504), (1505, 1505), (1506, 2104)]  # fmt: skip
    assert blocks[0].previous == GENESIS and blocks[2].previous == ""
    assert blocks[3].previous == "ab" * 32 and blocks[3].entry == entries[-1]
    assert seen_store.entry_before(t, 1507) == chain_entry("ab" * 32, 1506, digests[1501])

    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = MigrationExecutor(connection).loader.project_state(before).apps
    back = old.get_model("tables", "SeenCommit").objects.filter(table_id=table.pk).order_by("version")
    assert [tuple(getattr(r, f) for f in _OLD) for r in back] == expected
    MigrationExecutor(connection).migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
