"""catalogManaged as the accepted protocol writes it (tables.delta.write.catalog), no Django.

Creation-only enablement (reader 3 / writer 7, the feature in both lists, ICT on), staged
commits with unique txnIds and increasing ICTs, publishing in order (idempotent, never over a
different file), the maintenance rules, the refusal of a filesystem writer, and the reader
rules the writer relies on: the catalog's copy of a version wins over a published file, and
nothing above the catalog's latest version is read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tables.delta.errors import CommitConflictError, ManagedTableError
from tables.delta.log.checkpoint import write_checkpoint
from tables.delta.managed.owner import Commit, CommitResponse
from tables.delta.snapshot.state import load_snapshot
from tables.delta.storage.local import LocalStorage
from tables.delta.write import catalog as cm
from tables.delta.write import commit as fs_commit
from tables.delta.write.commit import commit_bytes
from tables.delta.write.managed import commit_via_owner, writer_state
from tests.core.fs_owner import StaticOwner

SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
TABLE_ID = "550e8400-e29b-41d4-a716-446655440000"


def add(name: str) -> dict:
    return {"add": {"path": name, "partitionValues": {}, "size": 1, "modificationTime": 0, "dataChange": True}}


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def staged_owner(table: Path, staged: list[cm.StagedCommit], latest: int) -> StaticOwner:
    """The catalog's answer: the staged commits it ratified and its latest version."""
    commits = [Commit(s.version, s.path, s.size, s.modification_time, s.in_commit_timestamp) for s in staged]
    return StaticOwner(commits, latest, name="unity")


def test_initial_commit_enables_the_feature_at_creation_only(tmp_path: Path) -> None:
    out = cm.initial_commit(str(tmp_path), TABLE_ID, SCHEMA, clock=lambda: 1_700_000_000_000)
    first = lines(tmp_path / "_delta_log" / f"{0:020d}.json")
    info, protocol, metadata = first[0]["commitInfo"], first[1]["protocol"], first[2]["metaData"]
    assert info["inCommitTimestamp"] == out["inCommitTimestamp"] == 1_700_000_000_000 and info["txnId"]
    assert protocol["minReaderVersion"] == 3 and protocol["minWriterVersion"] == 7
    assert "catalogManaged" in protocol["readerFeatures"] and "catalogManaged" in protocol["writerFeatures"]
    assert "inCommitTimestamp" in protocol["writerFeatures"]
    assert metadata["configuration"][cm.TABLE_ID_KEY] == TABLE_ID
    assert metadata["configuration"]["delta.enableInCommitTimestamps"] == "true"
    snap = load_snapshot(tmp_path, owner=StaticOwner([], 0, name="unity"))
    assert snap.managed is not None and snap.managed.flavor.name == "catalogManaged" and snap.managed.ict_enabled
    # a second creator loses; a protocol without the feature or without ICT is refused
    with pytest.raises(CommitConflictError):
        cm.initial_commit(str(tmp_path), TABLE_ID, SCHEMA)
    for proto in (
        {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [], "writerFeatures": ["inCommitTimestamp"]},
        {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["catalogManaged"],
            "writerFeatures": ["catalogManaged"],
        },
    ):
        with pytest.raises(ManagedTableError):
            cm.initial_commit(str(tmp_path / "other"), TABLE_ID, SCHEMA, protocol=proto)
    assert not (tmp_path / "other" / "_delta_log").exists()


def test_a_filesystem_writer_is_refused(tmp_path: Path) -> None:
    cm.initial_commit(str(tmp_path), TABLE_ID, SCHEMA)
    with pytest.raises(ManagedTableError, match="catalogManaged"):
        fs_commit.commit(str(tmp_path), [add("x.parquet")], "WRITE")
    assert not (tmp_path / "_delta_log" / f"{1:020d}.json").exists()


def test_staged_commits_carry_unique_txn_ids_and_increasing_icts(tmp_path: Path) -> None:
    first = cm.initial_commit(str(tmp_path), TABLE_ID, SCHEMA, clock=lambda: 5_000)
    # a clock behind the previous commit: the ICT still moves forward
    a = cm.stage_commit(
        str(tmp_path), 1, [add("a.parquet")], "WRITE", previous_ict=first["inCommitTimestamp"], clock=lambda: 10
    )
    b = cm.stage_commit(
        str(tmp_path), 1, [add("b.parquet")], "WRITE", previous_ict=first["inCommitTimestamp"], clock=lambda: 10
    )
    assert a.in_commit_timestamp == b.in_commit_timestamp == 5_001
    assert a.txn_id != b.txn_id and a.file_name != b.file_name
    for s in (a, b):
        assert s.file_name.startswith(f"{1:020d}.") and (tmp_path / s.path).stat().st_size == s.size
        info = lines(tmp_path / s.path)[0]["commitInfo"]
        assert next(iter(info)) == "inCommitTimestamp" and info["txnId"] == s.txn_id
    # staged files are not versions: without the catalog's word the table is at 0
    assert load_snapshot(tmp_path).version == 0
    assert cm.staged_name_ok(a.file_name, 1) and not cm.staged_name_ok(a.file_name, 2)
    assert not cm.staged_name_ok("../" + a.file_name, 1) and not cm.staged_name_ok(f"{1:020d}.json", 1)


def test_readers_prefer_the_catalogs_copy_and_ignore_versions_above_its_latest(tmp_path: Path) -> None:
    first = cm.initial_commit(str(tmp_path), TABLE_ID, SCHEMA)
    ict = first["inCommitTimestamp"]
    staged = []
    for v in (1, 2, 3):
        s = cm.stage_commit(str(tmp_path), v, [add(f"catalog-{v}.parquet")], "WRITE", previous_ict=ict)
        staged.append(s)
        ict = s.in_commit_timestamp
    # a published 1.json that differs from the catalog's copy (a writer around the catalog), and a
    # published 4.json above the catalog's latest
    cm.publish(str(tmp_path), [(1, staged[0].file_name)])
    rogue = tmp_path / "_delta_log" / f"{1:020d}.json"
    rogue.write_bytes(rogue.read_bytes().replace(b"catalog-1", b"rogue-11"))
    (tmp_path / "_delta_log" / f"{4:020d}.json").write_bytes(
        (tmp_path / staged[2].path).read_bytes().replace(b"catalog-3", b"rogue-04")
    )
    snap = load_snapshot(tmp_path, owner=staged_owner(tmp_path, staged, 3))
    assert snap.version == 3
    assert set(snap.file_paths()) == {"catalog-1.parquet", "catalog-2.parquet", "catalog-3.parquet"}


def test_publish_in_order_idempotent_and_never_over_another_file(tmp_path: Path) -> None:
    first = cm.initial_commit(str(tmp_path), TABLE_ID, SCHEMA)
    ict, staged = first["inCommitTimestamp"], []
    for v in (1, 2, 3):
        s = cm.stage_commit(str(tmp_path), v, [add(f"f{v}.parquet")], "WRITE", previous_ict=ict)
        staged.append(s)
        ict = s.in_commit_timestamp
    ratified = [(s.version, s.file_name) for s in staged]
    assert cm.publish(str(tmp_path), list(reversed(ratified[:2]))) == 2  # sorted: 1 before 2
    assert cm.publish(str(tmp_path), ratified[:2]) == 2  # again: identical files are success
    assert load_snapshot(tmp_path).version == 2
    (tmp_path / "_delta_log" / f"{3:020d}.json").write_bytes(b'{"commitInfo":{}}\n')
    with pytest.raises(ManagedTableError, match="other content"):
        cm.publish(str(tmp_path), ratified)


def test_maintenance_rules() -> None:
    cm.check_maintenance("CHECKPOINT", 10, published_version=10)
    cm.check_maintenance("CHECKSUM", 12, published_version=10)  # allowed for ratified, unpublished versions
    with pytest.raises(ManagedTableError, match="only published versions"):
        cm.check_maintenance("CHECKPOINT", 11, published_version=10)
    with pytest.raises(ManagedTableError, match="only published versions"):
        cm.check_maintenance("LOG COMPACTION", 11, published_version=10)
    for op in ("VACUUM", "OPTIMIZE", "REORG", "METADATA CLEANUP"):
        with pytest.raises(ManagedTableError, match="unless its catalog permits"):
            cm.check_maintenance(op, 5, published_version=10)
    cm.check_maintenance("METADATA CLEANUP", 5, published_version=10, allowed=frozenset({"METADATA CLEANUP"}))


class _CountingStorage(LocalStorage):
    """The local storage, remembering every file it reads."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.reads: list[str] = []

        self.listed_from: list[str | None] = []
        self.stats = 0

    def read(self, path: str, range: tuple[int, int] | None = None) -> bytes:
        self.reads.append(path)
        return super().read(path, range)

    def list_from(self, prefix: str, start_after: str | None = None):
        self.listed_from.append(start_after)
        return super().list_from(prefix, start_after)

    def head(self, path: str):
        self.stats += 1
        return super().head(path)

    stat = head


class _AcceptingCatalog(StaticOwner):
    """A catalog that ratifies whatever it is sent as the next version (the writer's view only)."""

    def commit(self, table_conf, version: int, actions: bytes):
        assert version == self.latest_table_version + 1
        self.latest_table_version = version
        return CommitResponse(Commit(version, f"_delta_log/{version:020d}.json", len(actions), 0, None))


def test_a_writer_reads_the_latest_checkpoint_and_the_tail_not_the_log(tmp_path: Path) -> None:
    first = cm.initial_commit(str(tmp_path), TABLE_ID, SCHEMA)
    ict = first["inCommitTimestamp"]
    for v in range(1, 251):
        ict += 1
        (tmp_path / "_delta_log" / f"{v:020d}.json").write_bytes(
            commit_bytes([add(f"f{v}.parquet")], {"operation": "WRITE", "txnId": str(v)}, ict)
        )
    write_checkpoint(LocalStorage(str(tmp_path)), load_snapshot(tmp_path, 200))
    storage = _CountingStorage(str(tmp_path))
    result = commit_via_owner(storage, _AcceptingCatalog([], 250, name="unity"), [add("new.parquet")], "WRITE")
    assert result.version == 251 and result.in_commit_timestamp == max(ict + 1, result.in_commit_timestamp)
    commits_read = {int(p.rpartition("/")[2][:20]) for p in storage.reads if p.endswith(".json") and "/_" not in p}
    assert commits_read and min(commits_read) > 200  # nothing before the checkpoint is opened
    # each commit of the tail is read once (the catalog's answer is merged onto the config read
    # before it was asked; the latest once more for its ICT and once for the look that its
    # writer finished it), and only the tail is listed: bounded by the checkpoint interval,
    # not by the log's length
    tail = [p for p in storage.reads if p.endswith(".json") and "/_" not in p]
    assert len(set(tail)) == 50 and len(tail) <= 52 and len(storage.reads) <= 50 + 4
    # the tail listed from the checkpoint, or found by stat'ing its names (a local log)
    assert storage.listed_from in (["_delta_log/00000000000000000200"], []) and storage.stats <= 50 + 4


def _ratified(path: Path, version: int, actions: list, ict: int) -> Commit:
    staged = cm.stage_commit(str(path), version, actions, "WRITE", previous_ict=ict - 1, clock=lambda: ict)
    return Commit(version, staged.path, staged.size, staged.modification_time, staged.in_commit_timestamp)


def test_a_writer_learns_the_config_from_the_catalogs_answer_on_the_published_tail(tmp_path: Path) -> None:
    """Unpublished ratified commits (one changes a property) count for the writer: its commit is
    the next version with an ICT after the last ratified one, and what they say is the table's
    config; each file is read once."""
    first = cm.initial_commit(str(tmp_path), TABLE_ID, SCHEMA)
    ict = first["inCommitTimestamp"] + 10**6  # ahead of the wall clock: the ICT must come from the log
    metadata = load_snapshot(tmp_path).metadata.to_dict()
    metadata["configuration"] = {**metadata["configuration"], "team": "blue"}
    ratified = [
        _ratified(tmp_path, 1, [add("a.parquet")], ict + 1),
        _ratified(tmp_path, 2, [{"metaData": metadata}], ict + 2),
    ]
    catalog = _AcceptingCatalog(ratified, 2, name="unity")
    storage = _CountingStorage(str(tmp_path))
    listing, cfg, previous_ict = writer_state(storage, catalog)
    assert cfg.version == 2 and cfg.metadata.configuration["team"] == "blue" and previous_ict == ict + 2
    assert cfg.managed is not None and cfg.managed.flavor.catalog
    assert [c.version for c in listing.commits] == [0, 1, 2]
    files = [p for p in storage.reads if not p.endswith("_last_checkpoint")]  # the hint: a few bytes
    assert len(files) == len(set(files)) == 3
    result = commit_via_owner(storage, catalog, [add("b.parquet")], "WRITE")
    assert result.version == 3 and result.in_commit_timestamp == ict + 3


def test_enabling_the_feature_on_an_existing_table_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    log.mkdir()
    metadata = {
        "id": "t",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(SCHEMA),
        "partitionColumns": [],
        "configuration": {},
    }
    (log / f"{0:020d}.json").write_bytes(
        commit_bytes(
            [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, {"metaData": metadata}],
            {"operation": "CREATE TABLE"},
            None,
        )
    )
    enable = {"protocol": cm.catalog_protocol()}
    with pytest.raises(ManagedTableError, match="only be enabled when the table is created"):
        fs_commit.commit(str(tmp_path), [enable], "SET TBLPROPERTIES")
    assert load_snapshot(tmp_path).version == 0
