"""Commit-owners (managed commits): the interface, its REST client, and the table features.

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

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable
from urllib.parse import quote, urlencode

import orjson

from .actions import Metadata
from .actions import Protocol as DeltaProtocol
from .errors import CommitOwnerError, InvalidManagedTableError, OwnerUnavailableError
from .log import COMMITS_DIR, STAGED_COMMITS_DIR

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

_ICT_FEATURES = ("inCommitTimestamp", "inCommitTimestamp-preview")  # as timestamps.ICT_FEATURES
_ICT_KEYS = ("delta.enableInCommitTimestamps", "delta.enableInCommitTimestamps-preview")


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
    ict = any(protocol.has_writer_feature(f) for f in _ICT_FEATURES) and any(
        (conf.get(k) or "").strip().lower() == "true" for k in _ICT_KEYS
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
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"line {lineno} is not valid JSON ({exc})") from exc
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
        owner_conf = json.loads(conf.get(fl.conf_key) or "{}")
    except ValueError:
        return False
    return isinstance(owner_conf, dict) and owner_conf.get("tableId") == table_id


REFUSED_STATUS = 403
CONFLICT_STATUS = 409


def outcome_to_http(outcome: CommitOutcome) -> tuple[int, dict[str, Any]]:
    """The REST answer to a commit (what RestOwnerClient parses): 201 {commit}, 409
    {error: commit_conflict, winningVersion}, 403 {error: commit_refused, refusal}."""
    if isinstance(outcome, CommitResponse):
        return 201, {"commit": outcome.commit.to_json()}
    if isinstance(outcome, CommitConflict):
        message = outcome.message or (
            f"version {outcome.version} was committed by another writer first; the latest ratified version is "
            f"{outcome.winning_version}"
        )
        return CONFLICT_STATUS, {
            "error": {
                "code": "commit_conflict",
                "message": message,
                "version": outcome.version,
                "winningVersion": outcome.winning_version,
            }
        }
    return REFUSED_STATUS, {
        "error": {
            "code": "commit_refused",
            "message": outcome.reason,
            "version": outcome.version,
            "refusal": outcome.code,
        }
    }


# --- clients ------------------------------------------------------------------------------------


class RestOwnerClient:
    """A commit-owner behind deltaweb's REST API (token authentication), stdlib only.

    POST {base}/api/owner/tables/{id}/commits     {version, actions: [...]} -> 201 {commit}
                                                  | 409 commit_conflict {winningVersion}
                                                  | 403 commit_refused {refusal}
    GET  {base}/api/owner/tables/{id}/commits?start=&end=  -> {commits: [...], latestTableVersion}
    POST {base}/api/owner/tables/{id}/backfill?version=    -> {backfilledVersion}
    The table id is the `tableId` of the table's owner conf (its metadata) unless given here.
    """

    def __init__(
        self, base_url: str, token: str, *, name: str = "deltaweb", table_id: str | None = None, timeout: float = 10.0
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.name = name
        self.table_id = table_id
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"RestOwnerClient({self.base_url!r}, name={self.name!r})"

    def _url(self, table_conf: TableConf, tail: str, query: dict[str, Any] | None = None) -> str:
        table_id = self.table_id or table_conf.table_id
        if not table_id:
            raise CommitOwnerError(
                f"{table_conf.location}: the table's owner conf has no tableId, so {self.base_url} cannot be asked"
            )
        url = f"{self.base_url}/api/owner/tables/{quote(str(table_id), safe='')}/{tail}"
        query = {k: v for k, v in (query or {}).items() if v is not None}
        return f"{url}?{urlencode(query)}" if query else url

    def _request(self, method: str, url: str, body: Any = None) -> tuple[int, Any]:
        data = orjson.dumps(body) if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Authorization", f"Token {self.token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        except OSError as exc:  # URLError, timeouts, refused and reset connections
            reason = getattr(exc, "reason", exc)
            raise OwnerUnavailableError(f"commit-owner '{self.name}' at {url} is unreachable ({reason})") from exc
        try:
            payload = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            payload = None
        if status >= 500:
            raise OwnerUnavailableError(
                f"commit-owner '{self.name}' at {url} failed with HTTP {status}: {_error_message(payload, raw)}"
            )
        return status, payload

    def _fail(self, url: str, status: int, payload: Any) -> CommitOwnerError:
        return CommitOwnerError(
            f"commit-owner '{self.name}' at {url} answered HTTP {status}: {_error_message(payload, b'')}",
            status=status,
        )

    def commit(self, table_conf: TableConf, version: int, actions: bytes) -> CommitOutcome:
        url = self._url(table_conf, "commits")
        try:
            body = {"version": version, "actions": decode_actions(actions)}
        except ValueError as exc:
            return CommitRefused(version, f"the commit is not valid newline-delimited JSON: {exc}", "invalid_commit")
        status, payload = self._request("POST", url, body)
        if status in (200, 201) and isinstance(payload, dict) and "commit" in payload:
            return CommitResponse(Commit.from_json(payload["commit"]))
        err = payload.get("error") if isinstance(payload, dict) else None
        code = err.get("code") if isinstance(err, dict) else None
        if status == CONFLICT_STATUS and code == "commit_conflict":
            winner = err.get("winningVersion")
            if not isinstance(winner, int) or isinstance(winner, bool):
                winner = version
            return CommitConflict(version, winner, str(err.get("message") or ""))
        if code == "commit_refused" and 400 <= status < 500:
            return CommitRefused(version, str(err.get("message") or "refused"), str(err.get("refusal") or "policy"))
        raise self._fail(url, status, payload)

    def get_commits(self, table_conf: TableConf, start: int = 0, end: int | None = None) -> GetCommitsResponse:
        url = self._url(table_conf, "commits", {"start": start, "end": end})
        status, payload = self._request("GET", url)
        if status != 200:
            raise self._fail(url, status, payload)
        return GetCommitsResponse.from_json(payload)

    def backfill_to_version(self, table_conf: TableConf, version: int) -> int | None:
        url = self._url(table_conf, "backfill", {"version": version})
        status, payload = self._request("POST", url)
        if status not in (200, 201, 202, 204):
            raise self._fail(url, status, payload)
        done = payload.get("backfilledVersion") if isinstance(payload, dict) else None
        return done if isinstance(done, int) and not isinstance(done, bool) else None

    def register_table(self, table_conf: TableConf, current_version: int) -> dict[str, str]:
        raise CommitOwnerError(
            f"{table_conf.location}: taking a table over is done in deltaweb itself, not through {self.base_url}"
        )


def _error_message(payload: Any, raw: bytes) -> str:
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        err = payload["error"]
        return f"{err.get('code')}: {str(err.get('message'))[:500]}"
    return (raw or b"").decode("utf-8", "replace")[:200] or "no body"


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
