"""Commit-owners (managed commits): the interface, its policy checks, and the table features.

The REST client lives in owner_client.py.

Contract (seed managed-commits.md; protocol "Catalog-managed tables"):
- A managed table names its owner in its metadata; only the owner decides which proposed
  commit is version v. `commit` returns a value: `CommitResponse`, `CommitConflict` (the
  version is taken; names the owner's latest ratified version, the winner to re-read
  through) or `CommitRefused` (policy, a version gap, a table being handed back). Only
  transport failures raise (`OwnerUnavailableError`, `CommitOwnerError`).
- `get_commits(start, end)` returns the ratified commits the owner still tracks (not yet
  backfilled), ascending and contiguous, and `latest_table_version`, the newest version it
  ratified (-1: never any). The first commit returned may be after `start`: earlier ones were
  backfilled and forgotten, and a reader finds them in `_delta_log/` (see log.merge_ratified).
- `backfill_to_version(v)` copies ratified commits to `_delta_log/<v>.json` in order (v-1
  before v), put-if-absent; idempotent. For a table being taken over it also completes the
  ownership change once the ownership commit is in `_delta_log/` (the two-phase change).
- `register_table(current_version)` is phase one of a take-over: the owner records that it
  will own the table from `current_version + 1` and returns the conf to store in the table's
  metadata; the put-if-absent of that commit is the commit point (managed.take_over).

Three generations of the feature are recognised (`FLAVORS`): the seed's `managedCommit`,
Delta 4.0's `coordinatedCommits-preview`, and the protocol's `catalogManaged` (reader-writer,
staged commits in `_delta_log/_staged_commits/`, the catalog's latest version authoritative).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import orjson

from tables.delta.errors import CommitOwnerError, CorruptLogError, InvalidManagedTableError
from tables.delta.log.ict import ENABLE_KEYS, ICT_FEATURES
from tables.delta.log.jsonline import loads_line
from tables.delta.log.listing import COMMITS_DIR, STAGED_COMMITS_DIR
from tables.delta.log.model import Metadata
from tables.delta.log.model import Protocol as DeltaProtocol

# --- table features -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Flavor:
    """One generation of the managed-commit table feature and the names it uses."""

    name: str
    features: tuple[str, ...]  # table feature names (the first is the one this project writes)
    owner_key: str | None  # metadata property naming the owner (None: catalogManaged has none)
    conf_key: str | None  # metadata property holding the owner's JSON string-to-string map
    staged_dir: str  # where proposed commits are written
    reader_writer: bool  # a reader-writer feature (in readerFeatures too)
    catalog: bool  # the owner's latest version is authoritative over published files
    extra_keys: tuple[str, ...] = ()  # other properties that belong to the feature

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(k for k in (self.owner_key, self.conf_key, *self.extra_keys) if k)


MANAGED_COMMIT = Flavor(
    "managedCommit",
    ("managedCommit",),
    "delta.managedCommit.commitOwner",
    "delta.managedCommit.commitOwnerConf",
    COMMITS_DIR,
    reader_writer=False,
    catalog=False,
)
COORDINATED_COMMITS = Flavor(
    "coordinatedCommits",
    ("coordinatedCommits-preview",),
    "delta.coordinatedCommits.commitCoordinator-preview",
    "delta.coordinatedCommits.commitCoordinatorConf-preview",
    COMMITS_DIR,
    reader_writer=False,
    catalog=False,
    extra_keys=("delta.coordinatedCommits.tableConf-preview",),
)
CATALOG_MANAGED = Flavor(
    "catalogManaged",
    ("catalogManaged", "catalogOwned-preview"),
    None,
    None,
    STAGED_COMMITS_DIR,
    reader_writer=True,
    catalog=True,
)
FLAVORS = (MANAGED_COMMIT, COORDINATED_COMMITS, CATALOG_MANAGED)
MANAGED_FEATURES = frozenset(f for fl in FLAVORS for f in fl.features)


def flavor_named(name: str) -> Flavor:
    """The flavor of a flavor or feature name (TableConf.feature)."""
    for fl in FLAVORS:
        if name == fl.name or name in fl.features:
            return fl
    raise ValueError(f"unknown managed-commit feature {name!r}")


@dataclass(frozen=True, slots=True)
class TableConf:
    """What an owner is told about the table it is asked about: where it is, the owner name
    the table records, and the owner's own conf from the table's metadata (opaque to Delta
    clients; deltaweb keeps its `tableId` there)."""

    location: str
    owner_name: str | None
    conf: dict[str, str] = field(default_factory=dict)
    feature: str = MANAGED_COMMIT.features[0]

    @property
    def table_id(self) -> str | None:
        return self.conf.get("tableId")

    @property
    def flavor(self) -> Flavor:
        return flavor_named(self.feature)

    @property
    def staged_dir(self) -> str:
        return self.flavor.staged_dir


@dataclass(frozen=True, slots=True)
class ManagedConfig:
    """A table's managed-commit state as its protocol and metadata declare it."""

    flavor: Flavor
    feature: str
    owner_name: str | None
    owner_conf: dict[str, str]
    ict_enabled: bool
    problems: tuple[str, ...] = ()

    def table_conf(self, location: str) -> TableConf:
        return TableConf(location, self.owner_name, dict(self.owner_conf), self.feature)

    def describe(self) -> str:
        who = f"commit-owner '{self.owner_name}'" if self.owner_name else "its catalog"
        return f"{self.feature} table managed by {who}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "feature": self.feature,
            "flavor": self.flavor.name,
            "owner": self.owner_name,
            "ownerConf": self.owner_conf,
            "stagedDir": self.flavor.staged_dir,
            "inCommitTimestamps": self.ict_enabled,
            "problems": list(self.problems),
        }


def _parse_conf(raw: str | None, key: str, where: str) -> dict[str, str]:
    if raw is None or not raw.strip():
        return {}
    try:
        conf = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidManagedTableError(f"{where}: {key} is not JSON ({exc})", property=key) from exc
    if not isinstance(conf, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in conf.items()):
        raise InvalidManagedTableError(
            f"{where}: {key} must be a JSON object of string values, not {raw[:200]}", property=key
        )
    return conf


def managed_config(protocol: DeltaProtocol, metadata: Metadata, where: str) -> ManagedConfig | None:
    """The table's managed-commit state, None for a filesystem table.

    Raises InvalidManagedTableError for the invalid states of the seed and the protocol: the
    owner property without the table feature or the feature without the property, an owner
    conf that is not a JSON string-to-string map, catalogManaged in only one of the reader and
    writer feature lists, or two generations of the feature at once. A table without In-Commit
    Timestamps is readable but recorded in `problems` (its writers break a requirement).
    """
    conf = metadata.configuration
    readers = set(protocol.reader_features or ()) if protocol.min_reader_version >= 3 else set()
    found: list[ManagedConfig] = []
    ict = any(protocol.has_writer_feature(f) for f in ICT_FEATURES) and any(
        (conf.get(k) or "").strip().lower() == "true" for k in ENABLE_KEYS
    )
    for fl in FLAVORS:
        feature = next((f for f in fl.features if protocol.has_writer_feature(f)), None)
        if fl.reader_writer:
            reader = next((f for f in fl.features if f in readers), None)
            if feature is None and reader is None:
                continue
            if feature is None or reader is None:
                missing = "writerFeatures" if feature is None else "readerFeatures"
                raise InvalidManagedTableError(
                    f"{where}: table feature {feature or reader} is in only one of readerFeatures and "
                    f"writerFeatures (missing from {missing}; it must be in both, on reader version 3 and "
                    f"writer version 7)",
                    feature=feature or reader,
                )
            found.append(ManagedConfig(fl, feature, None, {}, ict))
            continue
        assert fl.owner_key is not None and fl.conf_key is not None
        owner = conf.get(fl.owner_key)
        if owner is not None and feature is None:
            raise InvalidManagedTableError(
                f"{where}: {fl.owner_key} names commit-owner '{owner[:200]}' but the protocol lacks the writer "
                f"feature {fl.features[0]} (writer version {protocol.min_writer_version}); the table is in an "
                f"invalid state",
                feature=fl.features[0],
                property=fl.owner_key,
            )
        if feature is None:
            continue
        if owner is None or not owner.strip():
            raise InvalidManagedTableError(
                f"{where}: the writer feature {feature} is on but {fl.owner_key} is "
                f"{'empty' if owner is not None else 'not set'}; the table is in an invalid state",
                feature=feature,
                property=fl.owner_key,
            )
        found.append(ManagedConfig(fl, feature, owner, _parse_conf(conf.get(fl.conf_key), fl.conf_key, where), ict))
    if not found:
        return None
    if len(found) > 1:
        raise InvalidManagedTableError(
            f"{where}: the table has more than one commit-owner feature ({', '.join(m.feature for m in found)})",
            feature=found[1].feature,
        )
    m = found[0]
    if not ict:
        problems = (f"{m.feature} requires In-Commit Timestamps, which are not on",)
        m = ManagedConfig(m.flavor, m.feature, m.owner_name, m.owner_conf, ict, problems)
    return m


# --- values exchanged with an owner -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Commit:
    """A ratified commit: its version and file (relative to the table root), as the owner
    reports it."""

    version: int
    path: str
    size: int
    modification_time: int
    in_commit_timestamp: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "path": self.path,
            "size": self.size,
            "modificationTime": self.modification_time,
            "inCommitTimestamp": self.in_commit_timestamp,
        }

    @classmethod
    def from_json(cls, d: Any) -> Commit:
        if not isinstance(d, dict):
            raise CommitOwnerError(f"a commit in the owner's answer is not an object: {str(d)[:200]}")
        try:
            version, path = d["version"], d["path"]
            size, mtime = d.get("size") or 0, d.get("modificationTime") or 0
            ict = d.get("inCommitTimestamp")
        except KeyError as exc:
            raise CommitOwnerError(f"a commit in the owner's answer lacks {exc}: {str(d)[:200]}") from exc
        for name, value in (("version", version), ("size", size), ("modificationTime", mtime)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise CommitOwnerError(f"a commit in the owner's answer has a non-integer {name}: {str(d)[:200]}")
        if not isinstance(path, str):
            raise CommitOwnerError(f"a commit in the owner's answer has a non-string path: {str(d)[:200]}")
        if ict is not None and (not isinstance(ict, int) or isinstance(ict, bool)):
            ict = None
        return cls(version, path, size, mtime, ict)


@dataclass(frozen=True, slots=True)
class CommitResponse:
    commit: Commit


@dataclass(frozen=True, slots=True)
class CommitConflict:
    """Version `version` is taken: another commit won it. `winning_version` is the owner's
    latest ratified version; re-read through it and retry at `winning_version + 1`."""

    version: int
    winning_version: int
    message: str = ""


@dataclass(frozen=True, slots=True)
class CommitRefused:
    """The owner will not ratify this commit. `code`: policy | not_owned | handing_back |
    version_gap | invalid_commit | ict_required | txn_id_required | owner_change."""

    version: int
    reason: str
    code: str = "policy"


CommitOutcome = CommitResponse | CommitConflict | CommitRefused


@dataclass(frozen=True, slots=True)
class GetCommitsResponse:
    commits: list[Commit]
    latest_table_version: int

    def to_json(self) -> dict[str, Any]:
        return {"commits": [c.to_json() for c in self.commits], "latestTableVersion": self.latest_table_version}

    @classmethod
    def from_json(cls, d: Any) -> GetCommitsResponse:
        if not isinstance(d, dict) or not isinstance(d.get("commits"), list):
            raise CommitOwnerError(f"the owner's answer has no commits list: {str(d)[:200]}")
        latest = d.get("latestTableVersion")
        if not isinstance(latest, int) or isinstance(latest, bool) or latest < -1:
            raise CommitOwnerError(f"the owner's answer has no valid latestTableVersion: {str(d)[:200]}")
        return cls([Commit.from_json(c) for c in d["commits"]], latest)


@runtime_checkable
class CommitOwner(Protocol):
    """What a Delta client needs from a commit-owner (client side). `name` is the owner name
    tables record in their metadata."""

    name: str

    def commit(self, table_conf: TableConf, version: int, actions: bytes) -> CommitOutcome: ...

    def get_commits(self, table_conf: TableConf, start: int = 0, end: int | None = None) -> GetCommitsResponse: ...

    def backfill_to_version(self, table_conf: TableConf, version: int) -> int | None: ...

    def register_table(self, table_conf: TableConf, current_version: int) -> dict[str, str]: ...


# --- helpers for owner implementations ----------------------------------------------------------


def encode_actions(actions: list[dict[str, Any]]) -> bytes:
    """Newline-delimited JSON: the content of a commit file."""
    return b"".join(orjson.dumps(a) + b"\n" for a in actions)


def decode_actions(data: bytes) -> list[dict[str, Any]]:
    """The actions of a commit file; ValueError names the first line that is not an object."""
    out = []
    for lineno, line in enumerate(bytes(data).split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = loads_line(line, "the commit", lineno)
        except CorruptLogError as exc:
            # refused as the readers would refuse it once written: not JSON, or nested too deep
            raise ValueError(str(exc)) from exc
        if not isinstance(obj, dict) or len(obj) != 1 or not isinstance(next(iter(obj.values())), dict):
            raise ValueError(f"line {lineno} is not a single action object")
        out.append(obj)
    if not out:
        raise ValueError("the commit holds no actions")
    return out


@dataclass(frozen=True, slots=True)
class ParsedCommit:
    actions: list[dict[str, Any]]
    commit_info: dict[str, Any] | None
    commit_info_first: bool
    protocol: dict[str, Any] | None
    metadata: dict[str, Any] | None

    @property
    def in_commit_timestamp(self) -> int | None:
        ict = (self.commit_info or {}).get("inCommitTimestamp")
        return ict if isinstance(ict, int) and not isinstance(ict, bool) else None

    @property
    def txn_id(self) -> str | None:
        txn = (self.commit_info or {}).get("txnId")
        return txn if isinstance(txn, str) else None

    @property
    def operation(self) -> str | None:
        op = (self.commit_info or {}).get("operation")
        return op if isinstance(op, str) else None


def parse_commit(data: bytes) -> ParsedCommit:
    actions = decode_actions(data)
    info = next((a["commitInfo"] for a in actions if "commitInfo" in a), None)
    protocol = next((a["protocol"] for a in reversed(actions) if "protocol" in a), None)
    metadata = next((a["metaData"] for a in reversed(actions) if "metaData" in a), None)
    return ParsedCommit(actions, info, "commitInfo" in actions[0], protocol, metadata)


def check_commit(
    table_conf: TableConf, owner_name: str, parsed: ParsedCommit, previous_ict: int | None
) -> tuple[str, str] | None:
    """What a commit to an owned table breaks, as (refusal code, reason), or None.

    The writer requirements every owner enforces: commitInfo first with an inCommitTimestamp
    after the previous one, a txnId on catalogManaged tables, and no change of owner other
    than handing the table back (see `hands_back`).
    """
    if parsed.commit_info is None or not parsed.commit_info_first or parsed.in_commit_timestamp is None:
        return "ict_required", "a managed table's commit must start with commitInfo carrying an inCommitTimestamp"
    if previous_ict is not None and parsed.in_commit_timestamp <= previous_ict:
        return (
            "ict_required",
            f"inCommitTimestamp {parsed.in_commit_timestamp} is not after the previous commit's {previous_ict}",
        )
    fl = table_conf.flavor
    if fl.catalog and not parsed.txn_id:
        return "txn_id_required", "a catalogManaged table's commitInfo must carry a txnId"
    if parsed.metadata is not None and fl.owner_key:
        new_owner = (parsed.metadata.get("configuration") or {}).get(fl.owner_key)
        if new_owner is not None and new_owner != owner_name:
            return "owner_change", f"the commit hands the table to '{new_owner}'; hand it back to the filesystem first"
    removes = hands_back(table_conf, parsed)
    if removes is not None and not removes:
        return "invalid_commit", "the commit removes only one of the owner property and the table feature"
    return None


def hands_back(table_conf: TableConf, parsed: ParsedCommit) -> bool | None:
    """True when the commit removes both the owner property and the feature (a hand-back),
    False when it removes only one of them (invalid), None when it removes neither."""
    fl = table_conf.flavor
    drops_feature = parsed.protocol is not None and not (
        set(parsed.protocol.get("writerFeatures") or ()) & set(fl.features)
    )
    drops_owner = (
        parsed.metadata is not None
        and fl.owner_key is not None
        and fl.owner_key not in (parsed.metadata.get("configuration") or {})
    )
    if fl.owner_key is None:  # catalogManaged: the feature alone says it
        return True if drops_feature else None
    if drops_feature and drops_owner:
        return True
    if drops_feature or drops_owner:
        return False
    return None


def installs_owner(data: bytes, table_conf: TableConf, owner_name: str, table_id: str) -> bool:
    """Whether a commit file is the ownership commit that installs `owner_name` with `table_id`
    (phase two of a take-over: the file in `_delta_log/` decides)."""
    try:
        parsed = parse_commit(data)
    except ValueError:
        return False
    fl = table_conf.flavor
    if parsed.metadata is None or parsed.protocol is None or fl.owner_key is None or fl.conf_key is None:
        return False
    conf = parsed.metadata.get("configuration") or {}
    if conf.get(fl.owner_key) != owner_name:
        return False
    try:
        # orjson: a hostile conf nested deep is a ValueError, where json's is a RecursionError
        owner_conf = orjson.loads(conf.get(fl.conf_key) or "{}")
    except ValueError:
        return False
    return isinstance(owner_conf, dict) and owner_conf.get("tableId") == table_id


@dataclass(frozen=True, slots=True)
class OwnerView:
    """What asking the owner added to a listing (Snapshot.owner_view): the versions only
    the owner knew of, and whether the list-then-ask race was met (and listed again)."""

    owner: str
    latest_ratified: int
    backfilled_version: int | None
    unbackfilled: tuple[int, ...]
    relisted: bool

    @property
    def backfill_lag(self) -> int:
        return len(self.unbackfilled)

    def to_dict(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "latestRatifiedVersion": self.latest_ratified,
            "backfilledVersion": self.backfilled_version,
            "unbackfilledVersions": list(self.unbackfilled),
            "backfillLag": self.backfill_lag,
            "relisted": self.relisted,
        }
