"""Managed commits (SPEC section 5, seed managed-commits.md, protocol "Catalog-managed tables").

Reading: un-backfilled commits are visible through the owner and not without it (the
snapshot then says it may be stale); the list-then-ask race; the trust rules when the owner's
latest is below the log's; invalid feature/property states; the seed's and the protocol's
example layouts (`_commits/`, `_staged_commits/`). Owner: conflicts as values naming the
winner, racing writers, ordered idempotent backfill, crashes at every durable step.
Ownership: take-over (ICT on, owner recorded, a lost put-if-absent race), hand-back (all
backfilled; delta-rs reads every version), creation. The REST client against a stdlib
http.server that fronts the reference owner.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tables.delta.errors import (
    CommitConflictError,
    CommitOwnerError,
    CommitRefusedError,
    InvalidManagedTableError,
    LogGapError,
    ManagedTableError,
    OwnerUnavailableError,
    VersionNotFoundError,
)
from tables.delta.history.timeline import history_rows
from tables.delta.history.timestamps import commit_times
from tables.delta.log.ict import ict_config
from tables.delta.log.listing import COMMITS_DIR, STAGED_COMMITS_DIR, list_log, staged_commit_name
from tables.delta.managed.owner import (
    Commit,
    CommitConflict,
    CommitOwner,
    CommitRefused,
    CommitResponse,
    GetCommitsResponse,
    TableConf,
    encode_actions,
)
from tables.delta.managed.owner_client import RestOwnerClient, outcome_to_http
from tables.delta.snapshot.state import load_snapshot, load_table_config
from tables.delta.storage.local import LocalStorage
from tables.delta.write import commit as fs_commit
from tables.delta.write.managed import commit_via_owner, create_managed_table, hand_back, take_over
from tests.conftest import REPO
from tests.core import builders
from tests.core.fs_owner import FileSystemOwner, StaticOwner

LOG = "_delta_log"
BASE_MS = 1_700_000_000_000


class Crash(Exception):
    """A process dying at a durable step (raised from the owner's fault hook)."""


# --- helpers -----------------------------------------------------------------------------------


def plain_table(root: Path, n: int = 3) -> Path:
    return builders.file_table(root, [BASE_MS + i * 1000 for i in range(n)])


def fs_owner(tmp_path: Path, **kw: Any) -> FileSystemOwner:
    return FileSystemOwner(tmp_path / "owner-state", name="fs", **kw)


def managed_table(tmp_path: Path, unbackfilled: int = 3, **owner_kw: Any) -> tuple[Path, FileSystemOwner]:
    """A filesystem table of versions 0-2, taken over at 3, then `unbackfilled` commits."""
    table = plain_table(tmp_path / "t")
    owner = fs_owner(tmp_path, **owner_kw)
    assert take_over(table, owner)["version"] == 3
    for i in range(unbackfilled):
        commit_via_owner(table, owner, [builders.add(f"m{i}.parquet")], "WRITE")
    return table, owner


def conf_of(table: Path) -> TableConf:
    cfg = load_table_config(LocalStorage(table), list_log(LocalStorage(table)))
    assert cfg.managed is not None
    return cfg.managed.table_conf(str(table))


def log_versions(table: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in (table / LOG).glob("*.json") if p.name[:20].isdigit())


def paths(table: Path, version: int | None = None, owner: CommitOwner | None = None) -> list[str]:
    return sorted(load_snapshot(table, version, owner=owner).file_paths())


def ict_commit(ict: int, actions: list[dict[str, Any]] | None = None, txn: str | None = None) -> bytes:
    info: dict[str, Any] = {"inCommitTimestamp": ict, "timestamp": ict, "operation": "WRITE"}
    if txn:
        info["txnId"] = txn
    return encode_actions([{"commitInfo": info}, *(actions or [])])


def write_file(table: Path, rel: str, data: bytes, mtime: int | None = None) -> Path:
    f = table / rel
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_bytes(data)
    if mtime is not None:
        os.utime(f, ns=(mtime * 1_000_000, mtime * 1_000_000))
    return f


def static_commit(table: Path, rel: str, version: int, ict: int) -> Commit:
    st = (table / rel).stat()
    return Commit(version, rel, st.st_size, st.st_mtime_ns // 1_000_000, ict)


# --- reading ------------------------------------------------------------------------------------


def test_unbackfilled_commits_visible_with_owner_and_not_without(tmp_path: Path) -> None:
    table, owner = managed_table(tmp_path, unbackfilled=3)
    assert log_versions(table) == [0, 1, 2, 3]

    stale = load_snapshot(table)
    assert stale.version == 3
    assert stale.managed is not None and stale.managed.owner_name == "fs"
    assert stale.owner_view is None
    warning = stale.staleness_warning or ""
    assert "may be stale" in warning and "commit-owner 'fs'" in warning
    assert "3 proposed commit file(s) for versions 4-6" in warning
    assert "m0.parquet" not in stale.file_paths()

    fresh = load_snapshot(table, owner=owner)
    assert fresh.version == 6
    assert fresh.staleness_warning is None
    assert {"m0.parquet", "m1.parquet", "m2.parquet"} <= set(fresh.file_paths())
    view = fresh.owner_view
    assert view is not None
    assert (view.latest_ratified, view.backfilled_version, view.unbackfilled, view.relisted) == (6, 3, (4, 5, 6), False)
    assert view.to_dict()["backfillLag"] == 3

    # a version that only the owner knows of: not found without it, exact with it
    with pytest.raises(VersionNotFoundError, match="managed by commit-owner 'fs', which alone knows"):
        load_snapshot(table, 5)
    assert "m1.parquet" in load_snapshot(table, 5, owner=owner).file_paths()
    # an explicit backfilled version is exact either way: no warning
    assert load_snapshot(table, 2).staleness_warning is None


def test_history_and_timestamps_through_the_owner(tmp_path: Path) -> None:
    table, owner = managed_table(tmp_path, unbackfilled=2)
    without = commit_times(table)
    assert without.versions == [0, 1, 2, 3]
    times = commit_times(table, owner=owner)
    assert times.versions == [0, 1, 2, 3, 4, 5] and times.latest == 5
    rows = history_rows(times, limit=3)
    assert [r["version"] for r in rows] == [5, 4, 3]
    assert all(r["timestampSource"] == "ict" and r["inCommitTimestamp"] == r["timestamp"] for r in rows)
    assert rows[0]["timestamp"] > rows[1]["timestamp"] > rows[2]["timestamp"]
    assert [c.backfilled for c in times.listing.commits] == [True] * 4 + [False] * 2


def test_the_seeds_reading_example(tmp_path: Path) -> None:
    """Seed 'Reading managed-commit tables': 0-7 backfilled, _commits/ holds 6, 7, two files for
    8, 9 and two for 10; the owner tracks 6-9. A filesystem reader sees 7, the owner's 9."""
    table = tmp_path / "t"
    icts = [BASE_MS + 1000 * v for v in range(11)]
    for v in range(8):
        extra = []
        if v == 0:
            extra = [
                {
                    "protocol": {
                        "minReaderVersion": 1,
                        "minWriterVersion": 7,
                        "writerFeatures": ["inCommitTimestamp", "managedCommit"],
                    }
                },
                builders.metadata(
                    {
                        "delta.enableInCommitTimestamps": "true",
                        "delta.managedCommit.commitOwner": "commit-owner-1",
                        "delta.managedCommit.commitOwnerConf": '{"endpoint":"http://sample-url.com/commit"}',
                    }
                ),
            ]
        builders.write_commit(table, v, icts[v], ict=icts[v], actions=[*extra, builders.add(f"f{v}.parquet")])
    tracked: dict[int, Commit] = {}
    for v, tag in [(6, "a"), (7, "a"), (8, "a"), (8, "b"), (9, "a"), (10, "a"), (10, "b")]:
        rel = staged_commit_name(v, str(uuid.uuid4()))
        write_file(table, rel, ict_commit(icts[v], [builders.add(f"f{v}{tag}.parquet")]), icts[v])
        if tag == "a" and v <= 9:
            tracked[v] = static_commit(table, rel, v, icts[v])
    owner = StaticOwner(list(tracked.values()), 9, name="commit-owner-1")

    stale = load_snapshot(table)
    assert stale.version == 7
    assert "5 proposed commit file(s) for versions 8-10" in (stale.staleness_warning or "")

    snap = load_snapshot(table, owner=owner)
    assert snap.version == 9
    files = set(snap.file_paths())
    assert {"f8a.parquet", "f9a.parquet", "f7.parquet"} <= files  # 7 from _delta_log/, 8 and 9 from the owner
    assert not files & {"f8b.parquet", "f10a.parquet", "f10b.parquet", "f7a.parquet"}
    assert snap.managed is not None and snap.managed.owner_conf == {"endpoint": "http://sample-url.com/commit"}


def test_listing_classifies_proposed_commits_only_on_request(tmp_path: Path) -> None:
    table, _owner = managed_table(tmp_path, unbackfilled=2)
    write_file(table, f"{COMMITS_DIR}/not-a-commit.json", b"{}")
    write_file(table, f"{COMMITS_DIR}/00000000000000000009.json", b"{}")  # no uuid: not a proposal
    write_file(table, f"{STAGED_COMMITS_DIR}/00000000000000000007.{uuid.uuid4()}.json", b"{}")
    storage = LocalStorage(table)
    assert list_log(storage).staged == []
    staged = list_log(storage, include_staged=True).staged
    assert [(f.kind, f.version, f.backfilled) for f in staged] == [
        ("staged", 4, False),
        ("staged", 5, False),
        ("staged", 7, False),
    ]
    assert [c.version for c in list_log(storage).commits] == [0, 1, 2, 3]


class _Racing:
    """An owner that backfills between the reader's listing and its question (the race)."""

    def __init__(self, inner: FileSystemOwner, upto: int, delete_staged: bool = False, before: bool = True) -> None:
        self.inner, self.upto, self.delete_staged, self.before = inner, upto, delete_staged, before
        self.name = inner.name

    def _race(self, table_conf: TableConf) -> None:
        pending = self.inner.get_commits(table_conf).commits
        self.inner.backfill_to_version(table_conf, self.upto)
        if self.delete_staged:
            for c in pending:
                if c.version <= self.upto:
                    (Path(table_conf.location) / c.path).unlink()

    def get_commits(self, table_conf: TableConf, start: int = 0, end: int | None = None) -> GetCommitsResponse:
        if self.before:
            self._race(table_conf)
        answer = self.inner.get_commits(table_conf, start, end)
        if not self.before:
            self._race(table_conf)  # the answer names staged files that are gone once read
        return answer

    def commit(self, table_conf, version, actions):  # pragma: no cover - not used
        return self.inner.commit(table_conf, version, actions)

    def backfill_to_version(self, table_conf, version):  # pragma: no cover - not used
        return self.inner.backfill_to_version(table_conf, version)

    def register_table(self, table_conf, current_version):  # pragma: no cover - not used
        return self.inner.register_table(table_conf, current_version)


@pytest.mark.parametrize("upto", [4, 5, 6])
def test_race_commits_backfilled_between_list_and_ask(tmp_path: Path, upto: int) -> None:
    table, owner = managed_table(tmp_path, unbackfilled=3)
    expected = paths(table, owner=owner)
    snap = load_snapshot(table, owner=_Racing(owner, upto))
    assert snap.version == 6
    assert sorted(snap.file_paths()) == expected
    view = snap.owner_view
    assert view is not None and view.relisted
    assert view.unbackfilled == tuple(range(upto + 1, 7))
    assert [c.backfilled for c in snap.listing.commits] == [True] * (upto + 1) + [False] * (6 - upto)


def test_race_staged_file_gone_after_the_answer_reads_the_backfilled_copy(tmp_path: Path) -> None:
    table, owner = managed_table(tmp_path, unbackfilled=3)
    expected = paths(table, owner=owner)
    snap = load_snapshot(table, owner=_Racing(owner, 6, delete_staged=True, before=False))
    assert snap.version == 6 and sorted(snap.file_paths()) == expected
    # history reads commitInfo of the same versions through the same fallback
    times = commit_times(table, owner=_Racing(owner, 6, before=False))
    assert times.versions == list(range(7))


def test_owner_behind_the_log_managed_commit_trusts_the_log(tmp_path: Path) -> None:
    table, owner = managed_table(tmp_path, unbackfilled=2)
    owner.backfill_to_version(conf_of(table), 5)
    # an owner that lost its state (or one that only knows older versions)
    forgetful = StaticOwner([], 3, name="fs")
    assert load_snapshot(table, owner=forgetful).version == 5
    never = StaticOwner([], -1, name="fs")
    assert load_snapshot(table, owner=never).version == 5


def test_owner_reporting_a_gap_is_an_error_naming_it(tmp_path: Path) -> None:
    table, owner = managed_table(tmp_path, unbackfilled=3)
    c6 = owner.get_commits(conf_of(table)).commits[-1]
    liar = StaticOwner([c6], 6, name="fs")  # 4 and 5 neither backfilled nor reported
    with pytest.raises(LogGapError, match=r"versions 4-5 are neither in _delta_log/ nor among the commits"):
        load_snapshot(table, owner=liar)


@pytest.mark.parametrize(
    "path",
    [
        "../../etc/passwd",
        "/etc/passwd",
        f"{COMMITS_DIR}/00000000000000000005.3a0d65cd-4056-49b8-937b-95f9e3ee90e5.json",
        "part-0.parquet",
    ],
)
def test_owner_answers_are_checked_before_any_file_is_opened(tmp_path: Path, path: str) -> None:
    table, _owner = managed_table(tmp_path, unbackfilled=0)
    liar = StaticOwner([Commit(4, path, 10, BASE_MS)], 4, name="fs")
    with pytest.raises(CommitOwnerError, match="reported"):
        load_snapshot(table, owner=liar)


def test_reading_through_another_owner_is_refused(tmp_path: Path) -> None:
    table, _owner = managed_table(tmp_path, unbackfilled=1)
    with pytest.raises(ManagedTableError, match="names commit-owner 'fs', not 'other'"):
        load_snapshot(table, owner=StaticOwner([], 10, name="other"))


class _CountingStorage(LocalStorage):
    def __init__(self, location: Any) -> None:
        super().__init__(location)
        self.listed: list[str] = []

    def list_dir(self, rel_dir: str):
        self.listed.append(rel_dir)
        return super().list_dir(rel_dir)

    def list_names(self, rel_dir: str):
        self.listed.append(rel_dir)
        return super().list_names(rel_dir)


class _Untouchable:
    name = "fs"

    def get_commits(self, *a: Any, **k: Any) -> GetCommitsResponse:
        raise AssertionError("a filesystem table's owner must not be asked")


def test_filesystem_tables_pay_nothing(tmp_path: Path) -> None:
    table = plain_table(tmp_path / "t")
    storage = _CountingStorage(table)
    snap = load_snapshot(storage)
    assert storage.listed == [LOG]  # one listing, no staging directories
    assert snap.managed is None and snap.staleness_warning is None and snap.owner_view is None
    assert load_snapshot(table, owner=_Untouchable()).version == 2  # type: ignore[arg-type]


# --- invalid states -----------------------------------------------------------------------------

_W7 = {"minReaderVersion": 1, "minWriterVersion": 7}


@pytest.mark.parametrize(
    ("protocol", "config", "match"),
    [
        (
            {"minReaderVersion": 1, "minWriterVersion": 2},
            {"delta.managedCommit.commitOwner": "x"},
            "lacks the writer feature managedCommit",
        ),
        (
            {**_W7, "writerFeatures": ["inCommitTimestamp"]},
            {"delta.managedCommit.commitOwner": "x"},
            "lacks the writer feature managedCommit",
        ),
        (
            {**_W7, "writerFeatures": ["managedCommit"]},
            {},
            "managedCommit is on but delta.managedCommit.commitOwner is not set",
        ),
        ({**_W7, "writerFeatures": ["managedCommit"]}, {"delta.managedCommit.commitOwner": " "}, "is empty"),
        (
            {**_W7, "writerFeatures": ["managedCommit"]},
            {"delta.managedCommit.commitOwner": "x", "delta.managedCommit.commitOwnerConf": "{not json"},
            "commitOwnerConf is not JSON",
        ),
        (
            {**_W7, "writerFeatures": ["managedCommit"]},
            {"delta.managedCommit.commitOwner": "x", "delta.managedCommit.commitOwnerConf": '{"a": 1}'},
            "JSON object of string values",
        ),
        (
            {**_W7, "writerFeatures": ["inCommitTimestamp"]},
            {"delta.coordinatedCommits.commitCoordinator-preview": "x"},
            "lacks the writer feature coordinatedCommits-preview",
        ),
        ({**_W7, "writerFeatures": ["coordinatedCommits-preview"]}, {}, "commitCoordinator-preview is not set"),
        (
            {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["catalogManaged"]},
            {},
            "missing from readerFeatures",
        ),
        (
            {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["catalogManaged"], "writerFeatures": []},
            {},
            "missing from writerFeatures",
        ),
        (
            {**_W7, "writerFeatures": ["managedCommit", "coordinatedCommits-preview"]},
            {"delta.managedCommit.commitOwner": "x", "delta.coordinatedCommits.commitCoordinator-preview": "y"},
            "more than one commit-owner feature",
        ),
    ],
)
def test_invalid_feature_and_property_combinations_are_errors(
    tmp_path: Path, protocol: dict, config: dict, match: str
) -> None:
    table = tmp_path / "t"
    builders.write_commit(table, 0, BASE_MS, actions=[{"protocol": protocol}, builders.metadata(config)])
    with pytest.raises(InvalidManagedTableError, match=match) as err:
        load_snapshot(table)
    assert err.value.code == "invalid_managed_table" and str(table) in str(err.value)
    with pytest.raises(InvalidManagedTableError):
        load_table_config(LocalStorage(table), list_log(LocalStorage(table)))
    with pytest.raises(InvalidManagedTableError):
        commit_times(table)


def test_invalid_state_at_an_older_version_does_not_block_newer_ones(tmp_path: Path) -> None:
    table = tmp_path / "t"
    bad = {"minReaderVersion": 1, "minWriterVersion": 2}
    builders.write_commit(
        table, 0, BASE_MS, actions=[{"protocol": bad}, builders.metadata({"delta.managedCommit.commitOwner": "x"})]
    )
    builders.write_commit(table, 1, BASE_MS + 1, actions=[builders.metadata({})])
    assert load_snapshot(table).version == 1
    with pytest.raises(InvalidManagedTableError):
        load_snapshot(table, 0)


def test_managed_table_without_ict_is_readable_but_flagged(tmp_path: Path) -> None:
    table = tmp_path / "t"
    proto = {**_W7, "writerFeatures": ["managedCommit"]}
    builders.write_commit(
        table, 0, BASE_MS, actions=[{"protocol": proto}, builders.metadata({"delta.managedCommit.commitOwner": "x"})]
    )
    snap = load_snapshot(table)
    assert snap.managed is not None and not snap.managed.ict_enabled
    assert "requires In-Commit Timestamps" in snap.managed.problems[0]


def test_coordinated_commits_preview_names(tmp_path: Path) -> None:
    table = tmp_path / "t"
    proto = {**_W7, "writerFeatures": ["coordinatedCommits-preview", "inCommitTimestamp"]}
    config = {
        "delta.enableInCommitTimestamps": "true",
        "delta.coordinatedCommits.commitCoordinator-preview": "dynamodb",
        "delta.coordinatedCommits.commitCoordinatorConf-preview": '{"dynamoDBTableName":"t"}',
        "delta.coordinatedCommits.tableConf-preview": "{}",
    }
    builders.write_commit(table, 0, BASE_MS, ict=BASE_MS, actions=[{"protocol": proto}, builders.metadata(config)])
    rel = staged_commit_name(1, str(uuid.uuid4()))
    write_file(table, rel, ict_commit(BASE_MS + 5, [builders.add("x1.parquet")]), BASE_MS + 5)
    owner = StaticOwner([static_commit(table, rel, 1, BASE_MS + 5)], 1, name="dynamodb")
    snap = load_snapshot(table, owner=owner)
    assert snap.version == 1 and "x1.parquet" in snap.file_paths()
    assert snap.managed is not None
    assert (snap.managed.flavor.name, snap.managed.owner_name, snap.managed.owner_conf) == (
        "coordinatedCommits",
        "dynamodb",
        {"dynamoDBTableName": "t"},
    )
    assert "1 proposed commit file(s) for version 1" in (load_snapshot(table).staleness_warning or "")


# --- catalogManaged -----------------------------------------------------------------------------


def _catalog_table(table: Path, published: int) -> list[int]:
    icts = [BASE_MS + 1000 * v for v in range(12)]
    proto = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["catalogManaged"],
        "writerFeatures": ["catalogManaged", "inCommitTimestamp"],
    }
    for v in range(published + 1):
        extra = [{"protocol": proto}, builders.metadata({"delta.enableInCommitTimestamps": "true"})] if v == 0 else []
        builders.write_commit(table, v, icts[v], ict=icts[v], actions=[*extra, builders.add(f"f{v}.parquet")])
    return icts


def test_catalog_managed_staged_commits_read_with_the_catalogs_state(tmp_path: Path) -> None:
    """The protocol's example: published 0-7 (a checkpoint at 2), staged 7 (ratified and
    published), 8 (ratified) and 8' (rejected), 10 and 10' (unratified, one partial); the
    catalog stores 7, 8 and 9 and says 9 is the latest."""
    table = tmp_path / "t"
    icts = _catalog_table(table, 7)
    from tables.delta.log.checkpoint import write_checkpoint

    write_checkpoint(LocalStorage(table), load_snapshot(table, 2))
    catalog: list[Commit] = []
    for v, tag in [(7, "a"), (8, "a"), (8, "b"), (9, "a"), (10, "a")]:
        rel = staged_commit_name(v, str(uuid.uuid4()), STAGED_COMMITS_DIR)
        body = builders.add("f7.parquet") if v == 7 else builders.add(f"f{v}{tag}.parquet")
        write_file(table, rel, ict_commit(icts[v], [body], txn=str(uuid.uuid4())), icts[v])
        if tag == "a" and v <= 9:
            catalog.append(static_commit(table, rel, v, icts[v]))
    write_file(table, staged_commit_name(10, str(uuid.uuid4()), STAGED_COMMITS_DIR), b'{"commitInfo":{"inCommitTi')
    owner = StaticOwner(catalog, 9, name="unity")

    snap = load_snapshot(table, owner=owner)
    assert snap.version == 9 and snap.segment.checkpoint_version == 2
    assert snap.managed is not None and snap.managed.flavor.name == "catalogManaged"
    files = set(snap.file_paths())
    assert {"f8a.parquet", "f9a.parquet"} <= files and not files & {"f8b.parquet", "f10a.parquet"}
    # 7 is published too, but the catalog still reports it: its copy is the one read
    assert snap.owner_view is not None and snap.owner_view.unbackfilled == (7, 8, 9)
    assert [c.path for c in snap.segment.commits if c.version == 7] == [catalog[0].path]

    stale = load_snapshot(table)
    assert stale.version == 7 and "catalogManaged table; without asking its catalog" in (stale.staleness_warning or "")


def test_catalog_managed_catalog_latest_is_authoritative(tmp_path: Path) -> None:
    """'If the catalog said v is the latest version, clients must ignore any later versions
    that may have been published'; a managedCommit owner is trusted less than the log."""
    table = tmp_path / "t"
    _catalog_table(table, 7)
    snap = load_snapshot(table, owner=StaticOwner([], 5, name="unity"))
    assert snap.version == 5 and "f6.parquet" not in snap.file_paths()


# --- the owner: commits, conflicts, backfill ----------------------------------------------------


def test_conflict_is_a_value_naming_the_winner(tmp_path: Path) -> None:
    table, owner = managed_table(tmp_path, unbackfilled=2)  # latest ratified 5
    tc = conf_of(table)
    ict = BASE_MS * 2
    taken = owner.commit(tc, 5, ict_commit(ict, [builders.add("late.parquet")]))
    assert taken == CommitConflict(5, 5)
    stale = owner.commit(tc, 4, ict_commit(ict, [builders.add("late.parquet")]))
    assert isinstance(stale, CommitConflict) and stale.winning_version == 5
    gap = owner.commit(tc, 7, ict_commit(ict, [builders.add("late.parquet")]))
    assert isinstance(gap, CommitRefused) and gap.code == "version_gap" and "version 6 does not exist" in gap.reason
    ok = owner.commit(tc, 6, ict_commit(ict, [builders.add("late.parquet")]))
    assert isinstance(ok, CommitResponse) and ok.commit.version == 6
    assert ok.commit.path.startswith(f"{COMMITS_DIR}/00000000000000000006.")
    # a stale plan is caught before the owner is asked
    with pytest.raises(CommitConflictError, match="the table is at version 6, not 5 as planned"):
        commit_via_owner(table, owner, [builders.add("x.parquet")], "WRITE", read_version=5)

    # a writer overtaken between reading the table and asking: the error names the winner
    class Overtaken:
        name = "fs"

        def get_commits(self, tc: TableConf, start: int = 0, end: int | None = None) -> GetCommitsResponse:
            return owner.get_commits(tc, start, end)

        def commit(self, tc: TableConf, version: int, actions: bytes) -> Any:
            assert isinstance(
                owner.commit(tc, version, ict_commit(BASE_MS * 3, [builders.add("w.parquet")])), CommitResponse
            )
            return owner.commit(tc, version, actions)

    with pytest.raises(
        CommitConflictError, match="version 7 was ratified for another writer first; the owner's latest version is 7"
    ) as err:
        commit_via_owner(table, Overtaken(), [builders.add("x.parquet")], "WRITE")  # type: ignore[arg-type]
    assert err.value.version == 7 and err.value.details["winning_version"] == 7


def test_writer_requirements_are_enforced_by_the_owner(tmp_path: Path) -> None:
    table, owner = managed_table(tmp_path, unbackfilled=1)
    tc = conf_of(table)
    no_ict = encode_actions([{"commitInfo": {"operation": "WRITE"}}, builders.add("a.parquet")])
    assert owner.commit(tc, 5, no_ict) == CommitRefused(
        5, "a managed table's commit must start with commitInfo carrying an inCommitTimestamp", "ict_required"
    )
    backwards = owner.commit(tc, 5, ict_commit(1, [builders.add("a.parquet")]))
    assert isinstance(backwards, CommitRefused) and "is not after the previous commit's" in backwards.reason
    garbage = owner.commit(tc, 5, b"not json\n")
    assert isinstance(garbage, CommitRefused) and garbage.code == "invalid_commit"
    # a filesystem commit on a managed table is refused by the core's own writer
    with pytest.raises(ManagedTableError, match="commits go through the owner"):
        fs_commit.commit(table, [builders.add("fs.parquet")], "WRITE")
    # and the owner may not be swapped by an ordinary commit
    meta = load_snapshot(table, owner=owner).metadata.to_dict()
    meta["configuration"]["delta.managedCommit.commitOwner"] = "someone-else"
    with pytest.raises(ManagedTableError, match="change the table's owner"):
        commit_via_owner(table, owner, [{"metaData": meta}], "SET TBLPROPERTIES")


def test_policy_refusal_reaches_the_writer(tmp_path: Path) -> None:
    approved = {"txn-approved"}

    def policy(tc: TableConf, version: int, parsed: Any) -> str | None:
        if parsed.operation == "RESTORE" and parsed.txn_id not in approved:
            return f"RESTORE {parsed.txn_id} is not an approved restore request"
        return None

    table, owner = managed_table(tmp_path, unbackfilled=1, policy=policy)
    with pytest.raises(CommitRefusedError, match="RESTORE txn-rogue is not an approved restore request") as err:
        commit_via_owner(table, owner, [builders.add("r.parquet")], "RESTORE", txn_id="txn-rogue")
    assert err.value.refusal == "policy" and err.value.version == 5
    ok = commit_via_owner(table, owner, [builders.add("r.parquet")], "RESTORE", txn_id="txn-approved")
    assert ok.version == 5


def test_two_writers_racing_for_one_version_exactly_one_wins(tmp_path: Path) -> None:
    table, owner = managed_table(tmp_path, unbackfilled=0)  # latest 3
    tc = conf_of(table)
    writers = 4
    for version in range(4, 12):
        barrier = threading.Barrier(writers)
        outcomes: list[Any] = [None] * writers

        def attempt(
            i: int, version: int = version, barrier: threading.Barrier = barrier, outcomes: list[Any] = outcomes
        ) -> None:
            data = ict_commit(BASE_MS * 2 + version, [builders.add(f"w{i}-v{version}.parquet")])
            barrier.wait()
            outcomes[i] = owner.commit(tc, version, data)

        threads = [threading.Thread(target=attempt, args=(i,)) for i in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wins = [o for o in outcomes if isinstance(o, CommitResponse)]
        assert len(wins) == 1, outcomes
        assert all(o == CommitConflict(version, version) for o in outcomes if not isinstance(o, CommitResponse))
    assert load_snapshot(table, owner=owner).version == 11
    # losers are refused before anything is written: one proposal file per version
    assert len(list((table / COMMITS_DIR).iterdir())) == 8


def test_concurrent_writers_through_the_helper_lose_nothing(tmp_path: Path) -> None:
    table, owner = managed_table(tmp_path, unbackfilled=0, auto_backfill=True)
    per_writer, writers = 8, 8
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        try:
            for k in range(per_writer):
                while True:
                    try:
                        commit_via_owner(table, owner, [builders.add(f"w{i}-{k}.parquet")], "WRITE", txn_id=f"{i}-{k}")
                        break
                    except CommitConflictError:
                        continue
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    latest = 3 + per_writer * writers
    assert log_versions(table) == list(range(latest + 1))  # contiguous, all backfilled in order
    snap = load_snapshot(table)
    assert snap.version == latest and snap.num_files == 3 + per_writer * writers
    txns = [
        json.loads((table / LOG / f"{v:020d}.json").read_text().splitlines()[0])["commitInfo"]["txnId"]
        for v in range(4, latest + 1)
    ]
    assert sorted(txns) == sorted(f"{i}-{k}" for i in range(writers) for k in range(per_writer))
    icts = [commit_times(table).timestamp(v)[0] for v in range(4, latest + 1)]
    assert icts == sorted(icts) and len(set(icts)) == len(icts)


def test_backfill_is_ordered_and_idempotent(tmp_path: Path) -> None:
    seen: list[list[int]] = []
    holder: dict[str, Path] = {}

    def fault(step: str) -> None:
        if step == "backfill:written":
            seen.append(log_versions(holder["table"]))

    table, owner = managed_table(tmp_path, unbackfilled=5, fault=fault)  # 4..8 un-backfilled
    holder["table"] = table
    tc = conf_of(table)
    staged = {c.version: (table / c.path).read_bytes() for c in owner.get_commits(tc).commits}
    assert owner.backfill_to_version(tc, 6) == 6
    assert log_versions(table) == list(range(7))
    assert owner.backfill_to_version(tc, 6) == 6 and owner.backfill_to_version(tc, 2) == 6
    assert [c.version for c in owner.get_commits(tc).commits] == [7, 8]
    assert owner.backfill_to_version(tc, 100) == 8
    assert seen == [list(range(v + 1)) for v in range(4, 9)]  # each write extends a contiguous prefix
    for v, data in staged.items():
        assert (table / LOG / f"{v:020d}.json").read_bytes() == data
    answer = owner.get_commits(tc)
    assert answer.commits == [] and answer.latest_table_version == 8
    assert load_snapshot(table).version == 8 and load_snapshot(table, owner=owner).owner_view.unbackfilled == ()  # type: ignore[union-attr]


@pytest.mark.parametrize("step", ["backfill:written", "backfill:marked"])
def test_crash_during_backfill_then_rerun_completes(tmp_path: Path, step: str) -> None:
    armed = {"left": 2}  # crash on the second backfilled version

    def fault(s: str) -> None:
        if s == step:
            armed["left"] -= 1
            if armed["left"] == 0:
                raise Crash(s)

    table, owner = managed_table(tmp_path, unbackfilled=4, fault=fault)
    expected = paths(table, owner=owner)
    tc = conf_of(table)
    with pytest.raises(Crash):
        owner.backfill_to_version(tc, 7)
    assert log_versions(table) == list(range(6))  # 4 and 5 are in _delta_log/
    # consistent in between: filesystem readers see a prefix, the owner's readers everything
    assert load_snapshot(table).version == 5
    assert paths(table, owner=owner) == expected
    restarted = fs_owner(tmp_path)  # a new process: state from disk only
    assert restarted.backfill_to_version(tc, 7) == 7
    assert log_versions(table) == list(range(8))
    assert paths(table) == expected and restarted.get_commits(tc).commits == []


def test_crash_between_writing_the_proposal_and_ratifying_it(tmp_path: Path) -> None:
    def fault(s: str) -> None:
        if s == "commit:staged":
            raise Crash(s)

    table, owner = managed_table(tmp_path, unbackfilled=1)
    crashing = fs_owner(tmp_path, fault=fault)
    with pytest.raises(Crash):
        commit_via_owner(table, crashing, [builders.add("lost.parquet")], "WRITE")
    assert len(list((table / COMMITS_DIR).iterdir())) == 2  # the orphan proposal stays, unratified
    snap = load_snapshot(table, owner=owner)
    assert snap.version == 4 and "lost.parquet" not in snap.file_paths()
    assert commit_via_owner(table, owner, [builders.add("retry.parquet")], "WRITE").version == 5


def test_crash_after_ratifying_before_answering(tmp_path: Path) -> None:
    def fault(s: str) -> None:
        if s == "commit:ratified":
            raise Crash(s)

    table, _owner = managed_table(tmp_path, unbackfilled=1)
    crashing = fs_owner(tmp_path, fault=fault)
    with pytest.raises(Crash):
        commit_via_owner(table, crashing, [builders.add("kept.parquet")], "WRITE", txn_id="t-kept")
    owner = fs_owner(tmp_path)
    snap = load_snapshot(table, owner=owner)
    assert snap.version == 5 and "kept.parquet" in snap.file_paths()  # the commit happened


# --- ownership changes --------------------------------------------------------------------------


def test_take_over_turns_ict_on_and_records_the_owner(tmp_path: Path) -> None:
    table = plain_table(tmp_path / "t")
    before = paths(table)
    owner = fs_owner(tmp_path)
    out = take_over(table, owner, owner_conf={"endpoint": "http://deltaweb.example/api"})
    assert out["changed"] and out["version"] == 3 and out["ictEnabled"] and out["ownerNotified"]
    assert out["ownerConf"]["endpoint"] == "http://deltaweb.example/api" and out["ownerConf"]["tableId"]
    assert log_versions(table) == [0, 1, 2, 3]  # the ownership commit is a backfilled commit
    snap = load_snapshot(table)
    assert sorted(snap.file_paths()) == before
    assert snap.protocol.has_writer_feature("managedCommit") and snap.protocol.has_writer_feature("inCommitTimestamp")
    conf = snap.metadata.configuration
    assert conf["delta.managedCommit.commitOwner"] == "fs"
    assert json.loads(conf["delta.managedCommit.commitOwnerConf"]) == out["ownerConf"]
    ict = ict_config(load_table_config(LocalStorage(table), list_log(LocalStorage(table))))
    assert ict.enabled and ict.enablement_version == 3 and ict.enablement_timestamp == out["inCommitTimestamp"]
    first = json.loads((table / LOG / f"{3:020d}.json").read_text().splitlines()[0])
    assert first["commitInfo"]["inCommitTimestamp"] == out["inCommitTimestamp"] > BASE_MS + 2000
    state = owner.state(conf_of(table))
    assert state["active"] and state["latest"] == 3 and state["backfilled"] == 3 and state["proposals"] == []
    assert state["tableId"] == out["ownerConf"]["tableId"]
    # again: a no-op; by another owner: refused
    assert take_over(table, owner)["changed"] is False
    with pytest.raises(ManagedTableError, match="managed by commit-owner 'fs' already"):
        take_over(table, FileSystemOwner(tmp_path / "other", name="other"))


def test_take_over_that_loses_the_put_if_absent_race_does_not_happen(tmp_path: Path) -> None:
    table = plain_table(tmp_path / "t")
    owner = fs_owner(tmp_path)

    class Interloper:
        name = "fs"

        def register_table(self, tc: TableConf, current: int) -> dict[str, str]:
            conf = owner.register_table(tc, current)
            builders.write_commit(table, current + 1, BASE_MS + 9000)  # a filesystem writer wins the version
            return conf

        def backfill_to_version(self, tc: TableConf, v: int) -> int | None:
            return owner.backfill_to_version(tc, v)

    with pytest.raises(CommitConflictError, match="the take-over did not happen"):
        take_over(table, Interloper())  # type: ignore[arg-type]
    assert load_snapshot(table).managed is None
    state = owner.state(TableConf(str(table), "fs"))
    assert not state["active"] and state["proposals"] == []  # the owner forgot the proposal
    assert take_over(table, owner)["version"] == 4  # and can take the table over afterwards


def test_take_over_notification_lost_owner_finds_out_by_itself(tmp_path: Path) -> None:
    table = plain_table(tmp_path / "t")
    owner = fs_owner(tmp_path)

    class Deaf:
        name = "fs"

        def register_table(self, tc: TableConf, current: int) -> dict[str, str]:
            return owner.register_table(tc, current)

        def backfill_to_version(self, tc: TableConf, v: int) -> int | None:
            raise OwnerUnavailableError("connection reset")

    out = take_over(table, Deaf())  # type: ignore[arg-type]
    assert out["changed"] and out["ownerNotified"] is False
    # the commit point was the put-if-absent: the owner honours it on its next call
    assert commit_via_owner(table, owner, [builders.add("after.parquet")], "WRITE").version == 4


def test_hand_back_leaves_a_filesystem_table_delta_rs_reads_at_every_version(tmp_path: Path) -> None:
    deltalake = pytest.importorskip("deltalake")
    table = tmp_path / "t"
    deltalake.write_deltalake(str(table), pa.table({"id": pa.array([1, 2], pa.int64())}))
    deltalake.write_deltalake(str(table), pa.table({"id": pa.array([3], pa.int64())}), mode="append")
    owner = fs_owner(tmp_path)
    take_over(table, owner)  # version 2
    rows = [2, 3, 3]
    for i, n in enumerate([4, 1, 2]):
        name = f"managed-{i}.parquet"
        pq.write_table(pa.table({"id": pa.array(range(100 * i, 100 * i + n), pa.int64())}), table / name)
        size = (table / name).stat().st_size
        add = {
            "add": {"path": name, "partitionValues": {}, "size": size, "modificationTime": BASE_MS, "dataChange": True}
        }
        commit_via_owner(table, owner, [add], "WRITE", is_blind_append=True)
        rows.append(rows[-1] + n)
    tc = conf_of(table)
    owner.backfill_to_version(tc, 3)  # 3 backfilled, 4 and 5 not
    # a filesystem-only reader sees exactly the backfilled prefix
    assert deltalake.DeltaTable(str(table)).version() == 3
    assert load_snapshot(table, owner=owner).version == 5

    out = hand_back(table, owner)
    assert out["changed"] and out["version"] == 6 and out["previousVersion"] == 5
    rows.append(rows[-1])
    assert log_versions(table) == list(range(7))
    snap = load_snapshot(table)
    assert snap.version == 6 and snap.managed is None and snap.staleness_warning is None
    assert "managedCommit" not in (snap.protocol.writer_features or ())
    assert not any(k.startswith("delta.managedCommit.") for k in snap.metadata.configuration)
    assert ict_config(load_table_config(LocalStorage(table), list_log(LocalStorage(table)))).enabled
    state = owner.state(tc)
    assert not state["active"] and state["releasedAt"] == 6 and state["commits"] == {}
    for v in range(7):
        dt = deltalake.DeltaTable(str(table), version=v)
        theirs = pa.table(dt.get_add_actions(flatten=True)).column("path").to_pylist()
        assert sorted(theirs) == sorted(load_snapshot(table, v).files.column("path").to_pylist()), v
        assert dt.to_pyarrow_table().num_rows == rows[v], v
    # a plain table again: filesystem commits work, the owner refuses
    assert fs_commit.commit(table, [], "NOOP").version == 7
    refused = owner.commit(tc, 8, ict_commit(BASE_MS * 3))
    assert isinstance(refused, CommitRefused) and refused.code == "not_owned"
    assert hand_back(table, owner)["changed"] is False


def test_hand_back_interrupted_after_releasing_is_completed_by_the_owner(tmp_path: Path) -> None:
    def fault(s: str) -> None:
        if s == "handback:releasing":
            raise Crash(s)

    table, _owner = managed_table(tmp_path, unbackfilled=2)
    with pytest.raises(Crash):
        hand_back(table, fs_owner(tmp_path, fault=fault))
    assert log_versions(table) == [0, 1, 2, 3]  # nothing written yet
    owner = fs_owner(tmp_path)
    # no new commits while it is being handed back; any call completes the hand-back
    refused = owner.commit(conf_of(table), 6, ict_commit(BASE_MS * 3))
    assert isinstance(refused, CommitRefused) and refused.code == "not_owned"
    assert log_versions(table) == list(range(7))
    snap = load_snapshot(table)
    assert snap.version == 6 and snap.managed is None
    assert hand_back(table, owner)["changed"] is False


def test_hand_back_crash_after_writing_the_removing_commit(tmp_path: Path) -> None:
    def fault(s: str) -> None:
        if s == "handback:written":
            raise Crash(s)

    table, _owner = managed_table(tmp_path, unbackfilled=1)
    with pytest.raises(Crash):
        hand_back(table, fs_owner(tmp_path, fault=fault))
    assert log_versions(table) == list(range(6)) and load_snapshot(table).managed is None
    owner = fs_owner(tmp_path)
    assert owner.get_commits(conf_of_any(table)).latest_table_version == 5
    assert not owner.state(conf_of_any(table))["active"]


def conf_of_any(table: Path) -> TableConf:
    return TableConf(str(table), "fs")


def test_create_managed_table(tmp_path: Path) -> None:
    table = tmp_path / "new"
    owner = fs_owner(tmp_path)
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    out = create_managed_table(table, owner, schema, name="events", description="managed from the start")
    assert out["version"] == 0 and out["ownerNotified"]
    snap = load_snapshot(table)
    assert snap.managed is not None and snap.managed.owner_name == "fs" and snap.managed.ict_enabled
    assert snap.metadata.name == "events" and snap.protocol.has_writer_feature("managedCommit")
    assert owner.state(conf_of(table))["active"]
    assert commit_via_owner(table, owner, [builders.add("a.parquet")], "WRITE").version == 1
    with pytest.raises(CommitConflictError, match="exists here already"):
        create_managed_table(table, owner, schema)
    deltalake = pytest.importorskip("deltalake")
    assert deltalake.DeltaTable(str(table)).version() == 0  # v1 is not backfilled yet


# --- the REST client ----------------------------------------------------------------------------

TOKEN = "s3cret-token"


class _OwnerApi(BaseHTTPRequestHandler):
    """The REST contract of deltaweb's owner API, served from a FileSystemOwner."""

    owner: FileSystemOwner
    tables: dict[str, TableConf]
    fail_with: int | None = None
    requests: list[tuple[str, str]]

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: Any) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _route(self, method: str) -> None:
        self.requests.append((method, self.path))
        if self.fail_with:
            return self._send(self.fail_with, {"error": {"code": "server_error", "message": "boom"}})
        if self.headers.get("Authorization") != f"Token {TOKEN}":
            return self._send(401, {"error": {"code": "not_authenticated", "message": "token required"}})
        url = urlparse(self.path)
        parts = url.path.strip("/").split("/")
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if parts[:3] != ["api", "owner", "tables"] or len(parts) != 5 or parts[3] not in self.tables:
            return self._send(404, {"error": {"code": "not_found", "message": "no such managed table"}})
        tc, action = self.tables[parts[3]], parts[4]
        if method == "GET" and action == "commits":
            end = int(query["end"]) if "end" in query else None
            return self._send(200, self.owner.get_commits(tc, int(query.get("start", 0)), end).to_json())
        if method == "POST" and action == "commits":
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            status, payload = outcome_to_http(self.owner.commit(tc, body["version"], encode_actions(body["actions"])))
            return self._send(status, payload)
        if method == "POST" and action == "backfill":
            return self._send(200, {"backfilledVersion": self.owner.backfill_to_version(tc, int(query["version"]))})
        return self._send(405, {"error": {"code": "method_not_allowed", "message": method}})

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")


@pytest.fixture
def owner_api(tmp_path: Path):
    def refuse_frozen(tc: TableConf, version: int, parsed: Any) -> str | None:
        return "the table is frozen by an approver" if parsed.operation == "FROZEN-TEST" else None

    table, owner = managed_table(tmp_path, unbackfilled=1, policy=refuse_frozen)
    tc = conf_of(table)
    handler = type("Api", (_OwnerApi,), {"owner": owner, "tables": {tc.table_id: tc}, "requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield table, owner, handler, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_rest_client_speaks_the_owner_api(owner_api) -> None:
    table, owner, handler, base = owner_api
    client = RestOwnerClient(base + "/", TOKEN, name="fs")
    assert isinstance(client, CommitOwner)
    tc = conf_of(table)
    answer = client.get_commits(tc, 4)
    assert [c.version for c in answer.commits] == [4] and answer.latest_table_version == 4
    assert answer == owner.get_commits(tc, 4)
    # reading and writing a managed table through the API
    assert load_snapshot(table, owner=client).version == 4
    result = commit_via_owner(table, client, [builders.add("rest.parquet")], "WRITE")
    assert result.version == 5 and result.path.startswith(f"{COMMITS_DIR}/00000000000000000005.")
    assert "rest.parquet" in load_snapshot(table, owner=client).file_paths()
    conflict = client.commit(tc, 5, ict_commit(BASE_MS * 3, [builders.add("late.parquet")]))
    assert conflict == CommitConflict(
        5, 5, "version 5 was committed by another writer first; the latest ratified version is 5"
    )
    with pytest.raises(CommitRefusedError, match="frozen by an approver") as err:
        commit_via_owner(table, client, [builders.add("f.parquet")], "FROZEN-TEST")
    assert err.value.refusal == "policy"
    assert client.backfill_to_version(tc, 5) == 5
    assert log_versions(table) == list(range(6))
    assert client.get_commits(tc, 0).commits == []
    assert ("GET", f"/api/owner/tables/{tc.table_id}/commits?start=4") in handler.requests
    assert ("POST", f"/api/owner/tables/{tc.table_id}/backfill?version=5") in handler.requests


def test_rest_client_keeps_one_connection_alive_per_thread(tmp_path: Path) -> None:
    """Every call of a writer thread goes over that thread's one kept-alive connection (an
    HTTP/1.1 server here): two threads committing and reading open two connections, not one
    per call; a connection the server closes is replaced on the next call."""
    table, owner = managed_table(tmp_path, unbackfilled=0)
    tc = conf_of(table)
    connections: list[int] = []

    class KeepAlive(_OwnerApi):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            connections.append(1)
            super().setup()

    handler = type("Api", (KeepAlive,), {"owner": owner, "tables": {tc.table_id: tc}, "requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = RestOwnerClient(f"http://127.0.0.1:{server.server_address[1]}", TOKEN, name="fs")
        results: list[int] = []

        def writer(i: int) -> None:
            for k in range(3):
                while True:
                    try:
                        results.append(
                            commit_via_owner(table, client, [builders.add(f"t{i}-{k}.parquet")], "WRITE").version
                        )
                        break
                    except CommitConflictError:
                        continue
            client.close()

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results) == list(range(4, 10))
        calls = len(handler.requests)
        assert calls >= 12 and len(connections) == 2  # each commit: a read and a commit, 2 threads
        client.get_commits(tc, 0)  # closed above: a new connection, then kept
        client.get_commits(tc, 0)
        assert len(connections) == 3
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_rest_client_failures_are_errors_not_outcomes(owner_api, tmp_path: Path) -> None:
    table, _owner, handler, base = owner_api
    tc = conf_of(table)
    with pytest.raises(CommitOwnerError, match="HTTP 401: not_authenticated"):
        RestOwnerClient(base, "wrong", name="fs").get_commits(tc)
    with pytest.raises(CommitOwnerError, match="no tableId"):
        RestOwnerClient(base, TOKEN).get_commits(TableConf(str(table), "fs"))
    with pytest.raises(CommitOwnerError, match="HTTP 404"):
        RestOwnerClient(base, TOKEN, table_id="nope").get_commits(tc)
    handler.fail_with = 503
    with pytest.raises(OwnerUnavailableError, match="HTTP 503"):
        RestOwnerClient(base, TOKEN, name="fs").commit(tc, 5, ict_commit(BASE_MS * 3))
    handler.fail_with = None
    with pytest.raises(OwnerUnavailableError, match="unreachable"):
        RestOwnerClient("http://127.0.0.1:9", TOKEN, name="fs", timeout=2).get_commits(tc)
    with pytest.raises(CommitOwnerError, match="taking a table over is done in deltaweb"):
        take_over(plain_table(tmp_path / "other"), RestOwnerClient(base, TOKEN, name="fs"))


# --- a real crash: the owner's process killed at each durable step ------------------------------

_KILLER = """
import os, signal, sys
from tests.core.fs_owner import FileSystemOwner, StaticOwner
from tables.delta.write.managed import commit_via_owner, hand_back
from tables.delta.managed.owner import TableConf

state, location, table_id, step = sys.argv[1:]

def fault(s):
    if s == step:
        os.kill(os.getpid(), signal.SIGKILL)

owner = FileSystemOwner(state, name="fs", fault=fault)
if step.startswith("commit:"):
    add = {"add": {"path": "killed.parquet", "partitionValues": {}, "size": 1, "modificationTime": 0, "dataChange": True}}
    commit_via_owner(location, owner, [add], "WRITE")
elif step.startswith("backfill:"):
    owner.backfill_to_version(TableConf(location, "fs", {"tableId": table_id}), 100)
else:
    hand_back(location, owner)
print("survived")
"""


@pytest.mark.parametrize(
    ("step", "ratified"),
    [
        ("commit:staged", False),
        ("commit:ratified", True),
        ("backfill:written", False),
        ("backfill:marked", False),
        ("handback:releasing", False),
        ("handback:written", False),
    ],
)
def test_owner_process_killed_at_each_step_recovers(tmp_path: Path, step: str, ratified: bool) -> None:
    table, _owner = managed_table(tmp_path, unbackfilled=3)  # 4-6 ratified, not backfilled
    tc = conf_of(table)
    before = paths(table, owner=fs_owner(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-c", _KILLER, str(tmp_path / "owner-state"), str(table), str(tc.table_id), step],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    owner = fs_owner(tmp_path)  # a new process's view: state from disk only
    # in between, every reader sees a consistent table: the filesystem one a prefix
    fs_snap = load_snapshot(table)
    assert log_versions(table) == list(range(fs_snap.version + 1))
    if fs_snap.managed is not None:
        latest = load_snapshot(table, owner=owner)
        assert paths(table, fs_snap.version, owner=owner) == sorted(fs_snap.file_paths())
        assert ("killed.parquet" in latest.file_paths()) is ratified
        if not ratified:
            assert sorted(latest.file_paths()) == before
    # recovery: one call completes whatever was interrupted, then everything backfills
    owner.get_commits(tc)
    owner.backfill_to_version(tc, 100)
    snap = load_snapshot(table)
    assert log_versions(table) == list(range(snap.version + 1))
    if step.startswith("handback:"):
        assert snap.managed is None and snap.version == 7
    else:
        assert snap.version == (7 if ratified else 6)
        assert commit_via_owner(table, owner, [builders.add("after.parquet")], "WRITE").version == snap.version + 1
