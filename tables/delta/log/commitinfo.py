"""Reading a commit's commitInfo cheaply: the first line when it is there, else a search.

With In-Commit Timestamps on, commitInfo must be the first action, so time travel and
history read one line of each commit they need, never the whole log. On an object store,
sequential reads are batched (CommitInfoReader's read-ahead).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tables.delta.errors import CorruptLogError, DeltaError
from tables.delta.log.jsonline import loads_line
from tables.delta.log.listing import LogFile, backfilled_path
from tables.delta.storage.api import Storage

MAX_STRING = 10_000  # a log is untrusted input: bound what we carry around


def _int_or_none(value: Any) -> int | None:
    return value if type(value) is int else None  # not a bool, not a float


class CommitInfoRead:
    """A commit's commitInfo as read: `first` when it was the commit's first action, and its
    two timestamps taken from it once (a sync asks for them several times per commit). Not
    changed after it is made. A plain class: a dataclass took three times as long to make,
    and a sync makes one per commit."""

    __slots__ = ("first", "in_commit_timestamp", "info", "timestamp", "version")

    def __init__(self, version: int, info: dict[str, Any] | None, first: bool) -> None:
        self.version, self.info, self.first = version, info, first
        get = (info or {}).get
        self.in_commit_timestamp: int | None = _int_or_none(get("inCommitTimestamp"))
        self.timestamp: int | None = _int_or_none(get("timestamp"))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CommitInfoRead):
            return NotImplemented
        return (self.version, self.info, self.first) == (other.version, other.info, other.first)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"CommitInfoRead(version={self.version}, first={self.first}, info={self.info!r:.200})"


def _loads(line: bytes, lf: LogFile, lineno: int) -> Any:
    return loads_line(line, lf.path, lineno)


def read_commit_info(storage: Storage, lf: LogFile) -> CommitInfoRead:
    try:
        data = storage.read(lf.path)
    except FileNotFoundError as exc:
        alt = backfilled_path(lf.path)  # a ratified commit backfilled since, its staged copy gone
        try:
            data = storage.read(alt) if alt is not None else None
        except FileNotFoundError:
            data = None
        if data is None:
            raise CorruptLogError(f"{storage.display(lf.path)}: commit file disappeared", file=lf.path) from exc
    return parse_commit_info(data, lf)


def parse_commit_info(data: bytes, lf: LogFile) -> CommitInfoRead:
    """The commitInfo of a commit's content: its first line when there, else a search."""
    end = data.find(b"\n")
    first_line = data if end == -1 else data[:end]
    lineno = 1
    while not first_line.strip() and end != -1:  # leading blank lines
        start = end + 1
        end = data.find(b"\n", start)
        first_line = data[start:] if end == -1 else data[start:end]
        lineno += 1
    obj = _loads(first_line, lf, lineno) if first_line.strip() else {}
    if isinstance(obj, dict) and isinstance(obj.get("commitInfo"), dict):
        return CommitInfoRead(lf.version, obj["commitInfo"], True)
    pos = data.find(b'"commitInfo"')
    while pos != -1:
        s = data.rfind(b"\n", 0, pos) + 1
        e = data.find(b"\n", pos)
        e = len(data) if e == -1 else e
        obj = _loads(data[s:e], lf, data.count(b"\n", 0, s) + 1)
        if isinstance(obj, dict) and isinstance(obj.get("commitInfo"), dict):
            return CommitInfoRead(lf.version, obj["commitInfo"], False)
        pos = data.find(b'"commitInfo"', e)
    return CommitInfoRead(lf.version, None, False)


READ_AHEAD_MAX = 256


class CommitInfoReader:
    """Reads commitInfo per version and counts the commit files it opened (benchmarks).

    On a remote store, versions asked for one after another (a history page, a timeline scan)
    are read ahead in the direction of travel, in concurrent batches that double up to
    READ_AHEAD_MAX: one round trip per batch instead of one per commit. Scattered reads (a
    timestamp bisection) read only what they ask for. Local storage reads one at a time.
    """

    def __init__(self, storage: Storage, commits: dict[int, LogFile]) -> None:
        self.storage = storage
        self.commits = commits
        self.reads = 0
        self._cache: dict[int, CommitInfoRead] = {}
        self._remote = bool(storage.remote)
        self._last: int | None = None
        self._ahead = 4

    def get(self, version: int) -> CommitInfoRead:
        hit = self._cache.get(version)
        if hit is None:
            last, self._last = self._last, version
            if self._remote and last is not None and abs(version - last) == 1:
                self._ahead = min(self._ahead * 2, READ_AHEAD_MAX)
                step = version - last
                self.prefetch(range(version, version + step * self._ahead, step))
                hit = self._cache.get(version)
            else:
                self._ahead = 4
            if hit is None:
                self.reads += 1
                hit = self._cache[version] = read_commit_info(self.storage, self.commits[version])
        else:
            self._last = version
        return hit

    def remember(self, reads: Iterable[CommitInfoRead]) -> None:
        """Keep commitInfo read elsewhere (a sync reads a batch of commits in threads), counted
        as reads; a version read already keeps its first answer."""
        for read in reads:
            if read.version not in self._cache:
                self._cache[read.version] = read
                self.reads += 1

    def prefetch(self, versions: Iterable[int]) -> None:
        """Read the commitInfo of `versions` not read yet, all at once (`read_many`); a version
        without a commit file is skipped, one that fails is left for `get` to report."""
        todo = [v for v in versions if v not in self._cache and v in self.commits]
        if not todo:
            return
        try:
            blobs = self.storage.read_many([self.commits[v].path for v in todo])
        except (FileNotFoundError, DeltaError):
            return
        self.reads += len(todo)
        for v, data in zip(todo, blobs, strict=True):
            try:
                self._cache[v] = parse_commit_info(data, self.commits[v])
            except CorruptLogError:
                continue


def bounded(value: Any, limit: int = MAX_STRING) -> Any:
    """Truncate long strings anywhere inside a JSON value (log strings are untrusted)."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + "…"
    if isinstance(value, dict):
        return {bounded(k, 200): bounded(v, limit) for k, v in list(value.items())[:1000]}
    if isinstance(value, list):
        return [bounded(v, limit) for v in value[:1000]]
    return value
