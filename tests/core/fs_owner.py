"""Reference commit-owners for tests: one that keeps its state in a JSON file per table, and a
read-only one answering from supplied state (StaticOwner).

It is the model the database-backed owner follows, step for step:
- commit v, under the table's lock (the database transaction of the real owner): check that
  v-1 is the latest ratified version and v is neither ratified nor in `_delta_log/`, check
  the writer requirements and the policy, write `_delta_log/_commits/<v>.<uuid>.json`
  (put-if-absent), and record v as ratified (one atomic state write). A crash between the
  file and the record leaves an orphan proposal, which readers never see.
- backfill to v: for each ratified u <= v in order, put-if-absent `_delta_log/<u>.json` with
  the staged content (an identical file there already is fine: a crash after the put), then
  record u as backfilled (one state write). Any step may crash; running again completes it.
- take-over: `register_table` records a proposal (a fresh tableId for version K); the
  client's put-if-absent of `_delta_log/<K>.json` is the commit point; the owner activates
  when it sees that file install it (on the next call of any kind), and forgets the
  proposal when `<K>.json` turns out to be someone else's.
- hand-back: a commit that removes the owner makes the owner stop accepting, backfill
  everything, and write that commit directly as `_delta_log/<v>.json`; state "releasing"
  is recorded first, so any later call completes an interrupted hand-back.

`fault(step)` is called after each durable step (tests raise there to simulate a crash).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from tables.delta.errors import CommitConflictError, CommitOwnerError, ManagedTableError
from tables.delta.log.listing import commit_name, staged_commit_name
from tables.delta.managed.owner import (
    Commit,
    CommitConflict,
    CommitOutcome,
    CommitRefused,
    CommitResponse,
    GetCommitsResponse,
    ParsedCommit,
    TableConf,
    check_commit,
    hands_back,
    installs_owner,
    parse_commit,
)
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import open_storage

Policy = Callable[[TableConf, int, ParsedCommit], str | None]  # a refusal reason, or None


def _fresh_state(location: str) -> dict[str, Any]:
    return {
        "location": location,
        "tableId": None,
        "feature": None,
        "active": False,
        "latest": -1,  # newest version ratified (or installed by the ownership commit)
        "backfilled": -1,  # newest version in _delta_log/
        "latestIct": None,
        "commits": {},  # str(version) -> Commit.to_json(), ratified and not yet backfilled
        "proposals": [],  # [{tableId, version, feature}] take-overs waiting for their commit
        "releasing": None,  # {version, path} of an interrupted hand-back
        "releasedAt": None,
    }


class FileSystemOwner:
    """Commit-owner with state in `<state_dir>/<table key>.json`, locked with flock."""

    def __init__(
        self,
        state_dir: str | os.PathLike[str],
        name: str = "deltaweb-fs",
        *,
        auto_backfill: bool = False,
        policy: Policy | None = None,
        fault: Callable[[str], None] | None = None,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.auto_backfill = auto_backfill
        self.policy = policy
        self.fault = fault or (lambda step: None)

    def __repr__(self) -> str:
        return f"FileSystemOwner({str(self.state_dir)!r}, name={self.name!r})"

    # --- state ---------------------------------------------------------------------------------

    def _key(self, storage: Storage) -> str:
        return hashlib.sha256(storage.display().encode()).hexdigest()[:32]

    @contextmanager
    def _locked(self, table_conf: TableConf) -> Iterator[tuple[Storage, dict[str, Any], Callable[[], None]]]:
        storage = open_storage(table_conf.location)
        key = self._key(storage)
        path = self.state_dir / f"{key}.json"
        with open(self.state_dir / f"{key}.lock", "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                state = orjson.loads(path.read_bytes()) if path.exists() else _fresh_state(storage.display())

                def save() -> None:
                    fd, tmp = tempfile.mkstemp(dir=self.state_dir, prefix=f".{key}.", suffix=".tmp")
                    with os.fdopen(fd, "wb") as fh:
                        fh.write(orjson.dumps(state))
                        fh.flush()
                        os.fsync(fh.fileno())
                    os.replace(tmp, path)

                self._resolve(storage, state, save)
                yield storage, state, save
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def state(self, table_conf: TableConf) -> dict[str, Any]:
        """A copy of the owner's state for a table (tests and tools)."""
        with self._locked(table_conf) as (_storage, state, _save):
            return orjson.loads(orjson.dumps(state))

    def _resolve(self, storage: Storage, state: dict[str, Any], save: Callable[[], None]) -> None:
        """Finish what a crash or a lost notification left: take-overs whose commit is (or is
        not) in `_delta_log/`, and an interrupted hand-back."""
        if state["proposals"]:
            keep = []
            for p in state["proposals"]:
                rel = commit_name(p["version"])
                try:
                    data = storage.read(rel)
                except FileNotFoundError:
                    keep.append(p)
                    continue
                conf = TableConf(storage.display(), self.name, {"tableId": p["tableId"]}, p["feature"])
                if installs_owner(data, conf, self.name, p["tableId"]):
                    info = parse_commit(data)
                    state.update(
                        tableId=p["tableId"],
                        feature=p["feature"],
                        active=True,
                        latest=p["version"],
                        backfilled=p["version"],
                        latestIct=info.in_commit_timestamp,
                        commits={},
                        releasing=None,
                        releasedAt=None,
                    )
                    keep = []
                    break
                # somebody else's commit won that version: forget this proposal
            if keep != state["proposals"]:
                state["proposals"] = keep
                save()
        if state["releasing"] is not None:
            self._finish_release(storage, state, save)

    # --- the interface -------------------------------------------------------------------------

    def register_table(self, table_conf: TableConf, current_version: int) -> dict[str, str]:
        with self._locked(table_conf) as (_storage, state, save):
            if state["active"]:
                raise ManagedTableError(
                    f"{table_conf.location}: commit-owner '{self.name}' owns this table already", owner=self.name
                )
            table_id = str(uuid.uuid4())
            state["proposals"].append(
                {"tableId": table_id, "version": current_version + 1, "feature": table_conf.feature}
            )
            save()
        self.fault("register:recorded")
        return {**table_conf.conf, "tableId": table_id}

    def commit(self, table_conf: TableConf, version: int, actions: bytes) -> CommitOutcome:
        try:
            parsed = parse_commit(actions)
        except ValueError as exc:
            return CommitRefused(version, f"the commit is not a valid commit file: {exc}", "invalid_commit")
        with self._locked(table_conf) as (storage, state, save):
            outcome = self._ratify(storage, state, save, table_conf, version, parsed, actions)
        if (
            self.auto_backfill
            and isinstance(outcome, CommitResponse)
            and not outcome.commit.path.endswith(f"{version:020d}.json")
        ):
            self.backfill_to_version(table_conf, version)
        return outcome

    def _ratify(
        self,
        storage: Storage,
        state: dict[str, Any],
        save: Callable[[], None],
        table_conf: TableConf,
        version: int,
        parsed: ParsedCommit,
        actions: bytes,
    ) -> CommitOutcome:
        if not state["active"]:
            return CommitRefused(version, f"commit-owner '{self.name}' does not own {table_conf.location}", "not_owned")
        if table_conf.table_id and table_conf.table_id != state["tableId"]:
            return CommitRefused(
                version, f"table id {table_conf.table_id} is not the one this owner took over", "not_owned"
            )
        latest = state["latest"]
        if version <= latest:
            return CommitConflict(version, latest)
        if version > latest + 1:
            return CommitRefused(
                version, f"version {version - 1} does not exist; the latest ratified version is {latest}", "version_gap"
            )
        if storage.exists(commit_name(version)):  # a filesystem writer broke the protocol
            return CommitConflict(version, version, f"{commit_name(version)} exists already")
        problem = check_commit(table_conf, self.name, parsed, state["latestIct"])
        if problem is not None:
            return CommitRefused(version, problem[1], problem[0])
        reason = self.policy(table_conf, version, parsed) if self.policy else None
        if reason:
            return CommitRefused(version, reason, "policy")
        staged = staged_commit_name(version, str(uuid.uuid4()), table_conf.staged_dir)
        storage.put_if_absent(staged, actions)
        self.fault("commit:staged")
        info = storage.stat(staged)
        commit = Commit(version, staged, info.size, info.modification_time, parsed.in_commit_timestamp)
        if hands_back(table_conf, parsed):
            state["releasing"] = {"version": version, "path": staged}
            save()
            self.fault("handback:releasing")
            return CommitResponse(self._finish_release(storage, state, save))
        state["commits"][str(version)] = commit.to_json()
        state["latest"] = version
        state["latestIct"] = parsed.in_commit_timestamp
        save()
        self.fault("commit:ratified")
        return CommitResponse(commit)

    def get_commits(self, table_conf: TableConf, start: int = 0, end: int | None = None) -> GetCommitsResponse:
        with self._locked(table_conf) as (_storage, state, _save):
            latest = state["latest"] if (state["active"] or state["releasedAt"] is not None) else -1
            hi = latest if end is None or end < 0 else min(end, latest)
            commits = [
                Commit.from_json(state["commits"][k])
                for k in sorted(state["commits"], key=int)
                if start <= int(k) <= hi
            ]
            return GetCommitsResponse(commits, latest)

    def backfill_to_version(self, table_conf: TableConf, version: int) -> int | None:
        with self._locked(table_conf) as (storage, state, save):
            self._backfill(storage, state, save, version)
            return state["backfilled"] if state["active"] or state["releasedAt"] is not None else None

    # --- backfill and hand-back ----------------------------------------------------------------

    def _put_same(self, storage: Storage, rel: str, data: bytes) -> None:
        """put-if-absent; an identical file there already is success (a re-run after a crash)."""
        try:
            storage.put_if_absent(rel, data)
        except CommitConflictError:
            if storage.read(rel) != data:
                raise CommitOwnerError(
                    f"{storage.display(rel)} exists with other content than the ratified commit; the log was "
                    f"written around commit-owner '{self.name}'",
                    file=rel,
                ) from None

    def _backfill(self, storage: Storage, state: dict[str, Any], save: Callable[[], None], upto: int) -> None:
        for u in range(state["backfilled"] + 1, min(upto, state["latest"]) + 1):
            commit = state["commits"].get(str(u))
            if commit is None:  # cannot happen with this state file; never skip a version
                raise CommitOwnerError(f"{storage.display()}: owner state has no ratified commit {u} to backfill")
            self._put_same(storage, commit_name(u), storage.read(commit["path"]))
            self.fault("backfill:written")
            state["backfilled"] = u
            del state["commits"][str(u)]
            save()
            self.fault("backfill:marked")

    def _finish_release(self, storage: Storage, state: dict[str, Any], save: Callable[[], None]) -> Commit:
        rel = state["releasing"]
        version, staged = rel["version"], rel["path"]
        self._backfill(storage, state, save, version - 1)
        data = storage.read(staged)
        self._put_same(storage, commit_name(version), data)
        self.fault("handback:written")
        info = storage.stat(commit_name(version))
        state.update(
            active=False,
            latest=version,
            backfilled=version,
            commits={},
            releasing=None,
            releasedAt=version,
            latestIct=parse_commit(data).in_commit_timestamp,
        )
        save()
        return Commit(version, commit_name(version), info.size, info.modification_time, state["latestIct"])


class StaticOwner:
    """A read-only owner answering from supplied state (a catalog's answer taken elsewhere):
    for reading a table whose owner cannot be reached from here."""

    def __init__(self, commits: list[Commit], latest_table_version: int, name: str | None = None) -> None:
        self.commits = sorted(commits, key=lambda c: c.version)
        self.latest_table_version = latest_table_version
        self.name = name or "static"

    def commit(self, table_conf: TableConf, version: int, actions: bytes) -> CommitOutcome:
        return CommitRefused(version, "this owner only answers reads", "policy")

    def get_commits(self, table_conf: TableConf, start: int = 0, end: int | None = None) -> GetCommitsResponse:
        hi = self.latest_table_version if end is None else end
        return GetCommitsResponse([c for c in self.commits if start <= c.version <= hi], self.latest_table_version)

    def backfill_to_version(self, table_conf: TableConf, version: int) -> int | None:
        return None

    def register_table(self, table_conf: TableConf, current_version: int) -> dict[str, str]:
        raise CommitOwnerError("a static owner takes no tables over")
