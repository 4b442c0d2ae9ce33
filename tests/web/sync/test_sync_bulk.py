"""The sync's writing goes through each database's bulk path: multi-row INSERTs on SQLite,
COPY on PostgreSQL (run this module with DATABASE_URL=postgres://..., as `make test-postgres`
does). Checked against delta-rs's history and the commit files' own SHA-256: what the bulk
path stores is what the log holds, and rows stored already are left as they are. The
first-seen digests go in packed, a row per block of commits (tables.services.chain.look)."""

from __future__ import annotations

import hashlib

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tables.delta.history.chain import chain_entries
from tables.models import Commit, SeenBlock
from tables.services.catalog import registration
from tables.services.chain import seen as seen_store
from tables.services.sync import store as sync

from .test_sync import _write_commits

deltalake = pytest.importorskip("deltalake")
COMMITS = sync.BATCH + 300  # two batches


@pytest.fixture
def roots(settings, tmp_path):
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    return tmp_path


def _row_inserts(queries: list[dict]) -> list[str]:
    """The captured INSERTs of history rows (an executemany is captured as "2000 times: INSERT ...")."""
    heads = [f'INSERT INTO "{Commit._meta.db_table}" ']
    return [q["sql"][:120] for q in queries if any(h in q["sql"][:200] for h in heads)]


@pytest.mark.django_db(transaction=True)
def test_a_cold_sync_stores_the_logs_history_and_digests_in_bulk(roots) -> None:
    path = roots / "t"
    _write_commits(path, range(COMMITS))
    table = registration.register_table("t", str(path))
    with CaptureQueriesContext(connection) as captured:
        assert sync.sync_table(table.pk)["newCommits"] == COMMITS
    if connection.vendor == "postgresql":
        assert _row_inserts(captured.captured_queries) == []  # COPY, not a statement per row

    theirs = {h["version"]: h for h in deltalake.DeltaTable(str(path)).history()}
    rows = {c.version: c for c in Commit.objects.filter(table=table)}
    assert sorted(rows) == sorted(theirs) == list(range(COMMITS))
    for v in (0, 1, 2, sync.BATCH - 1, sync.BATCH, COMMITS - 1):
        row, h = rows[v], theirs[v]
        assert (row.operation, row.operation_parameters, row.commit_info_timestamp) == (
            h["operation"],
            h["operationParameters"],
            h["timestamp"],
        )
        assert row.is_blind_append is h["isBlindAppend"] and row.read_version == h.get("readVersion")
        assert row.commit_info["operationParameters"]["predicate"].endswith("ünïcode")
    # packed: a row per block of commits, the last block filled before another is begun
    assert SeenBlock.objects.filter(table=table).count() == -(-COMMITS // seen_store.BLOCK)
    seen = seen_store.seen_commits(table)
    digests = [
        hashlib.sha256((path / "_delta_log" / f"{v:020d}.json").read_bytes()).hexdigest() for v in range(COMMITS)
    ]
    assert [s.sha256 for s in seen] == digests
    assert [s.entry for s in seen] == chain_entries(None, list(enumerate(digests)))


@pytest.mark.django_db(transaction=True)
def test_rows_stored_already_are_left_as_they_are(roots) -> None:
    path = roots / "t"
    _write_commits(path, range(300))
    table = registration.register_table("t", str(path))
    sync.sync_table(table.pk)
    Commit.objects.filter(table=table, version=80).update(operation="KEPT")
    Commit.objects.filter(table=table, version__gte=100).delete()
    _forget_seen_from(table, 100)
    # the next sync starts after version 50: 51..99 are stored already, 100..299 are not
    type(table).objects.filter(pk=table.pk).update(last_synced_version=50)
    sync.sync_table(table.pk)
    assert sorted(Commit.objects.filter(table=table).values_list("version", flat=True)) == list(range(300))
    assert Commit.objects.get(table=table, version=80).operation == "KEPT"
    assert Commit.objects.get(table=table, version=82).operation == "WRITE"
    seen = seen_store.seen_commits(table)
    digests = [hashlib.sha256((path / "_delta_log" / f"{v:020d}.json").read_bytes()).hexdigest() for v in range(300)]
    assert [s.version for s in seen] == list(range(300)) and [s.sha256 for s in seen] == digests
    assert [s.entry for s in seen] == chain_entries(None, list(enumerate(digests)))  # chained across the blocks


def _forget_seen_from(table, version: int) -> None:
    """The first-seen digests of `version` on taken out of the table's one contiguous block."""
    (block,) = SeenBlock.objects.filter(table=table)
    n = version - block.first_version
    kept = seen_store.unpack(block, entries=True)[:n]
    for name, width in (("digests", 32), ("sizes", 8), ("timestamps", 8), ("listed_times", 8)):
        setattr(block, name, bytes(getattr(block, name))[: n * width])
    block.count, block.last_version, block.entry = n, version - 1, kept[-1].entry
    block.save()
