"""The schema's timeline: for every column, nested fields included, the version and commit
where it appeared, was renamed (column mapping), had its type widened or changed, had its
nullability changed, or was dropped; the schema as of any version (with the CREATE TABLE that
recreates it); and two versions' schemas compared, renames named as renames.

Only metaData actions change a schema (and a protocol action the column mapping mode that
is honoured), so the walk reads each commit once and parses only the commits that hold one:
a search for the action's name decides, and no file action is parsed, no version's state is
rebuilt. Columns are matched from one metaData to the next by snapshot/schema/schema_diff.py's
rules (column-mapping identity, else the path of names).

A log whose oldest commits were cleaned up starts at its earliest checkpoint: the columns it
holds are marked `atLogStart` (they may be older), with the widenings their
`delta.typeChanges` recorded before. A timeline continues from where it stopped (`extend`):
a table's new commits are read, not its whole log again. Timelines are not changed once made
(`extend` returns a new one), so one can be shared between threads.

Pure: no Django, no Spark; a log's strings are bounded before they are shown back.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass, field, replace
from typing import Any

from tables.delta.errors import StateReconstructionError, UnsupportedFeatureError, VersionNotFoundError
from tables.delta.log.actions import Metadata, Protocol, parse_actions
from tables.delta.log.checkpoint import read_checkpoint_others
from tables.delta.log.listing import (
    LogFile,
    LogListing,
    available_versions,
    build_segment,
    complete_checkpoint,
    list_log,
    list_log_from,
)
from tables.delta.managed.owner import CommitOwner
from tables.delta.snapshot.schema.columnmapping import mapping_mode
from tables.delta.snapshot.schema.ddl import create_table_ddl
from tables.delta.snapshot.schema.schema_diff import (
    FieldInfo,
    diff_schemas,
    dropped,
    flatten,
    match_fields,
    pair_changes,
    parse_schema,
    path_text,
    shown_path,
    type_text,
)
from tables.delta.snapshot.state import ratified_listing, read_commits
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import as_storage
from tables.delta.text_bounds import MAX_ECHOED_VALUE, cut

MAX_EVENTS = 50_000  # events kept; a longer history is marked truncated (the state still advances)
MAX_COLUMNS_SHOWN = 10_000  # rows of a schema as of a version
READ_BATCH = 64  # commits read at once (an object store fetches a batch concurrently)
_MARKERS = (b'"metaData"', b'"protocol"')
_COMMIT_FIELDS = ("operation", "userName", "userId", "engineInfo")


@dataclass(frozen=True, slots=True)
class SchemaState:
    """The metaData and protocol in force from `version` on."""

    version: int
    metadata: Metadata
    protocol: Protocol
    mode: str


@dataclass(frozen=True, slots=True)
class SchemaTimeline:
    """What the walk found, and where it stopped (to continue from there)."""

    location: str
    start: int  # the earliest version the log can rebuild: the walk's first
    latest: int  # the last version walked
    states: tuple[SchemaState, ...]  # one per version whose metaData or protocol changed
    events: tuple[dict[str, Any], ...]  # column events, oldest first
    table_events: tuple[dict[str, Any], ...]  # partitioning, column mapping mode, table replaced
    commits: dict[int, dict[str, Any]]  # the commit of each state's version
    column_keys: dict[int, str]  # column number -> its key in the answers
    fields: tuple[FieldInfo, ...]  # the latest schema's fields
    field_columns: tuple[int, ...]  # their column numbers
    truncated: bool = False

    @property
    def current(self) -> SchemaState | None:
        return self.states[-1] if self.states else None


@dataclass(slots=True)
class _Walk:
    """A timeline being extended (mutable while the walk runs)."""

    tl: SchemaTimeline
    states: list[SchemaState]
    events: list[dict[str, Any]]
    table_events: list[dict[str, Any]]
    commits: dict[int, dict[str, Any]]
    column_keys: dict[int, str]
    fields: tuple[FieldInfo, ...]
    field_columns: tuple[int, ...]
    latest: int
    truncated: bool
    pending: dict[str, Any] = field(default_factory=dict)  # a protocol or metaData seen alone at the start
    taken: set[str] = field(default_factory=set)  # the column keys given

    @classmethod
    def of(cls, tl: SchemaTimeline) -> _Walk:
        return cls(
            tl, list(tl.states), list(tl.events), list(tl.table_events), dict(tl.commits), dict(tl.column_keys),
            tl.fields, tl.field_columns, tl.latest, tl.truncated, taken=set(tl.column_keys.values()),
        )  # fmt: skip

    def done(self) -> SchemaTimeline:
        return replace(
            self.tl,
            latest=self.latest,
            states=tuple(self.states),
            events=tuple(self.events),
            table_events=tuple(self.table_events),
            commits=self.commits,
            column_keys=self.column_keys,
            fields=self.fields,
            field_columns=self.field_columns,
            truncated=self.truncated,
        )

    def emit(self, event: dict[str, Any]) -> None:
        if len(self.events) >= MAX_EVENTS:
            self.truncated = True
            return
        self.events.append(event)


def _mode(md: Metadata, protocol: Protocol) -> str:
    """The column mapping mode in force; an unknown mode reads as none (its schema still shows)."""
    try:
        return mapping_mode(md, protocol)
    except UnsupportedFeatureError:
        return "none"


def _commit_summary(version: int, info: dict[str, Any] | None) -> dict[str, Any]:
    """What the answers show of a commit: its commitInfo's timestamps, operation and user."""
    info = info or {}
    ict, ts = info.get("inCommitTimestamp"), info.get("timestamp")
    out: dict[str, Any] = {
        "version": version,
        "timestamp": ict if type(ict) is int else ts if type(ts) is int else None,
        "inCommitTimestamp": ict if type(ict) is int else None,
    }
    for name in _COMMIT_FIELDS:
        value = info.get(name)
        out[name] = cut(value, MAX_ECHOED_VALUE) if isinstance(value, str) else None
    return out


def _column_key(walk: _Walk, f: FieldInfo) -> str:
    """The key a new column goes by: its mapping id, else its physical path, else its path of
    names; `#2`, `#3` for a later column with the same key (a name dropped and added again)."""
    if f.key is not None and f.key[0] == "id":
        base = f"id:{f.key[1]}"
    elif f.key is not None:
        base = "physical:" + path_text(f.key[1])
    else:
        base = "name:" + path_text(f.path)
    base = cut(base, MAX_ECHOED_VALUE)
    key, n = base, 1
    while key in walk.taken:
        n += 1
        key = f"{base}#{n}"
    walk.taken.add(key)
    return key


def _add_column(walk: _Walk, f: FieldInfo, version: int, at_start: bool) -> int:
    number = len(walk.column_keys)
    walk.column_keys[number] = key = _column_key(walk, f)
    walk.emit(
        {
            "version": version,
            "kind": "added",
            "column": key,
            "path": shown_path(f.path),
            "type": type_text(f.dtype),
            "nullable": f.nullable,
            "atLogStart": at_start,
        }
    )
    if at_start:
        # widenings recorded before the log's start: their version when the entry names it
        for at, a, b in f.type_changes:
            walk.emit(
                {
                    "version": version,
                    "kind": "type_widened",
                    "column": key,
                    "path": shown_path(f.path),
                    "fieldPath": at,
                    "fromType": a,
                    "toType": b,
                    "recorded": True,
                    "atLogStart": True,
                }
            )
    return number


def _table_events(walk: _Walk, version: int, before: SchemaState, after: SchemaState) -> None:
    a, b = before.metadata, after.metadata
    if a.id != b.id:
        walk.table_events.append({"version": version, "kind": "table_replaced"})
    if a.partition_columns != b.partition_columns:
        walk.table_events.append(
            {
                "version": version,
                "kind": "partitioning_changed",
                "from": [cut(c, MAX_ECHOED_VALUE) for c in a.partition_columns],
                "to": [cut(c, MAX_ECHOED_VALUE) for c in b.partition_columns],
            }
        )
    if before.mode != after.mode:
        walk.table_events.append(
            {"version": version, "kind": "column_mapping_changed", "from": before.mode, "to": after.mode}
        )


def _columns_changed(walk: _Walk, version: int, fields: list[FieldInfo]) -> tuple[int, ...]:
    """Events from the walk's fields to `fields`; the new fields' column numbers."""
    old, old_cols = walk.fields, walk.field_columns
    pairs, gone, added = match_fields(list(old), fields)
    columns = [-1] * len(fields)
    for i, j in pairs:
        columns[j] = old_cols[i]
    for j in added:
        columns[j] = _add_column(walk, fields[j], version, at_start=False)
    for i, j in pairs:
        key = walk.column_keys[old_cols[i]]
        for change in pair_changes(old[i], fields[j]):
            walk.emit({"version": version, **change, "column": key, "path": shown_path(fields[j].path)})
    for i in gone:
        key = walk.column_keys[old_cols[i]]
        walk.emit({"version": version, **dropped(old[i]), "column": key, "path": shown_path(old[i].path)})
    return tuple(columns)


def _apply(walk: _Walk, version: int, md: Metadata, protocol: Protocol, info: dict[str, Any] | None) -> None:
    """The metaData and protocol in force from `version` on: the events since the last ones."""
    before = walk.states[-1] if walk.states else None
    if before is not None and before.metadata == md and before.protocol == protocol:
        return  # a commit that wrote the same metaData again
    if before is not None and md.schema_string == before.metadata.schema_string:
        md = replace(md, schema_string=before.metadata.schema_string)  # one copy of a long schema kept
    state = SchemaState(version, md, protocol, _mode(md, protocol))
    walk.states.append(state)
    walk.commits[version] = _commit_summary(version, info)
    where = f"{walk.tl.location} at version {version}"
    if before is None:
        walk.fields = tuple(flatten(parse_schema(md, where), state.mode))
        at_start = info is None  # a checkpoint's state: the log's oldest commits are gone
        walk.field_columns = tuple(_add_column(walk, f, version, at_start) for f in walk.fields)
        return
    _table_events(walk, version, before, state)
    if md.schema_string == before.metadata.schema_string and state.mode == before.mode:
        return  # properties or protocol only: the columns are as they were
    fields = flatten(parse_schema(md, where), state.mode)
    walk.field_columns = _columns_changed(walk, version, fields)
    walk.fields = tuple(fields)


def _read_commit(walk: _Walk, storage: Storage, lf: LogFile, data: Any) -> None:
    """One commit: parsed only when it names a metaData or protocol action."""
    walk.latest = lf.version
    if all(data.find(m) == -1 for m in _MARKERS):
        return
    actions = parse_actions(bytes(data), storage.display(lf.path))
    found = {name: body for name, body in actions if name in ("metaData", "protocol", "commitInfo")}
    current = walk.states[-1] if walk.states else None
    md = Metadata.from_dict(found["metaData"]) if "metaData" in found else None
    pr = Protocol.from_dict(found["protocol"]) if "protocol" in found else None
    if md is None and pr is None:
        return  # the name was in a string (a column named so in the stats)
    if current is None:
        # the first commits may hold the protocol and the metaData apart (rare): wait for both
        walk.pending.update({k: v for k, v in (("metaData", md), ("protocol", pr)) if v is not None})
        md, pr = walk.pending.get("metaData"), walk.pending.get("protocol")
        if md is None or pr is None:
            return
    _apply(walk, lf.version, md or current.metadata, pr or current.protocol, found.get("commitInfo") or {})


def _walk_commits(walk: _Walk, storage: Storage, commits: list[LogFile]) -> None:
    for start in range(0, len(commits), READ_BATCH):
        batch = commits[start : start + READ_BATCH]
        for lf, data in zip(batch, read_commits(storage, batch), strict=True):
            _read_commit(walk, storage, lf, data)


def _empty(storage: Storage, start: int) -> SchemaTimeline:
    return SchemaTimeline(str(storage.location), start, start - 1, (), (), (), {}, {}, (), ())


def schema_timeline(
    location: str | os.PathLike[str] | Storage, listing: LogListing | None = None, owner: CommitOwner | None = None
) -> SchemaTimeline:
    """The timeline of a table's whole log (from its earliest rebuildable version); with
    `owner`, a managed table's ratified, un-backfilled commits count too."""
    storage = as_storage(location)
    listing = listing or list_log(storage)
    if owner is not None:
        listing = ratified_listing(storage, owner, listing)
    rng = available_versions(listing)
    if rng is None:
        build_segment(storage, listing)  # raises the error that says why no version can be rebuilt
        raise StateReconstructionError(f"{storage.display()}: no version of this table can be rebuilt")
    earliest, latest = rng
    walk = _Walk.of(_empty(storage, earliest))
    if earliest > 0 or not any(c.version == 0 for c in listing.commits[:1]):
        cp = complete_checkpoint(listing.checkpoints.get(earliest, [])) or []
        found = dict(read_checkpoint_others(storage, cp, only=("protocol", "metaData")))
        if "metaData" not in found or "protocol" not in found:
            missing = "metaData" if "metaData" not in found else "protocol"
            raise StateReconstructionError(
                f"{storage.display()}: the checkpoint of version {earliest} holds no {missing}"
            )
        _apply(walk, earliest, Metadata.from_dict(found["metaData"]), Protocol.from_dict(found["protocol"]), None)
        walk.latest = earliest
    _walk_commits(walk, storage, [c for c in listing.commits if walk.latest < c.version <= latest])
    if not walk.states:
        raise StateReconstructionError(f"{storage.display()}: the log holds no metaData and protocol")
    return walk.done()


def extend(
    tl: SchemaTimeline, location: str | os.PathLike[str] | Storage, listing: LogListing | None = None
) -> SchemaTimeline:
    """`tl` continued with the commits after its latest version (the log's tail listed from
    there, or `listing`); the whole log walked again when the tail does not follow on (a gap,
    a table written anew)."""
    storage = as_storage(location)
    tail = listing if listing is not None else list_log_from(storage, tl.latest + 1)
    commits = [c for c in tail.commits if c.version > tl.latest]
    if not commits:
        return tl
    if [c.version for c in commits] != list(range(tl.latest + 1, tl.latest + 1 + len(commits))):
        return schema_timeline(storage)
    walk = _Walk.of(tl)
    _walk_commits(walk, storage, commits)
    return walk.done()


# --- answers ----------------------------------------------------------------------------------


def state_at(tl: SchemaTimeline, version: int) -> SchemaState:
    """The metaData and protocol in force at `version`; VersionNotFoundError outside the log."""
    if not tl.start <= version <= tl.latest or not tl.states:
        raise VersionNotFoundError(
            f"version {version} not found; the log holds versions {tl.start} to {tl.latest}", version=version
        )
    i = bisect.bisect_right([s.version for s in tl.states], version) - 1
    return tl.states[max(i, 0)]


def column_rows(state: SchemaState, limit: int = MAX_COLUMNS_SHOWN) -> list[dict[str, Any]]:
    """A state's columns, nested fields too (depth first), as rows: path, depth, type,
    nullability, the column-mapping identity, the comment, whether it partitions the table."""
    parts = set(state.metadata.partition_columns)
    rows = []
    for f in flatten(parse_schema(state.metadata), state.mode)[:limit]:
        comment = f.metadata.get("comment")
        rows.append(
            {
                "path": shown_path(f.path),
                "name": cut(f.name, MAX_ECHOED_VALUE),
                "depth": len(f.path) - 1,
                "type": type_text(f.dtype),
                "nullable": f.nullable,
                "physicalName": cut(f.physical_name, MAX_ECHOED_VALUE) if f.physical_name else None,
                "fieldId": f.field_id,
                "comment": cut(comment, MAX_ECHOED_VALUE) if isinstance(comment, str) else None,
                "partition": len(f.path) == 1 and f.name in parts,
            }
        )
    return rows


def schema_at(tl: SchemaTimeline, version: int, table_name: str | None = None) -> dict[str, Any]:
    """The schema as of `version`: its columns, partitioning, properties, and the CREATE TABLE
    (named `table_name`) that recreates it."""
    state = state_at(tl, version)
    md = state.metadata
    rows = column_rows(state)
    return {
        "version": version,
        "schemaVersion": state.version,
        "commit": tl.commits.get(state.version),
        "columnMapping": state.mode,
        "columns": rows,
        "columnsTruncated": len(rows) >= MAX_COLUMNS_SHOWN,
        "partitionColumns": [cut(c, MAX_ECHOED_VALUE) for c in md.partition_columns],
        "properties": {
            cut(str(k), MAX_ECHOED_VALUE): cut(str(v), MAX_ECHOED_VALUE) for k, v in md.configuration.items()
        },
        "ddl": create_table_ddl(md, state.protocol, table_name, f"{tl.location} at version {state.version}"),
    }


def diff_versions(tl: SchemaTimeline, v_from: int, v_to: int) -> dict[str, Any]:
    """The schemas of two versions compared: renames as renames when column mapping is on at
    both (matched by id or physical name), else by name."""
    a, b = state_at(tl, v_from), state_at(tl, v_to)
    where = f"{tl.location} at version"
    out = diff_schemas(
        parse_schema(a.metadata, f"{where} {a.version}"),
        a.mode,
        parse_schema(b.metadata, f"{where} {b.version}"),
        b.mode,
    )
    return {
        "from": v_from,
        "to": v_to,
        "fromSchemaVersion": a.version,
        "toSchemaVersion": b.version,
        **out,
        "partitionColumns": {
            "from": [cut(c, MAX_ECHOED_VALUE) for c in a.metadata.partition_columns],
            "to": [cut(c, MAX_ECHOED_VALUE) for c in b.metadata.partition_columns],
        },
        "columnMapping": {"from": a.mode, "to": b.mode},
    }


def _column_summaries(tl: SchemaTimeline) -> list[dict[str, Any]]:
    """Every column ever seen, with its events, in order of appearance; the present ones with
    their current path and type."""
    present = {tl.column_keys[c]: f for f, c in zip(tl.fields, tl.field_columns, strict=True)}
    by_key: dict[str, dict[str, Any]] = {}
    for e in tl.events:
        col = by_key.get(e["column"])
        if col is None:
            col = by_key[e["column"]] = {"key": e["column"], "added": e["version"], "atLogStart": e.get("atLogStart")}
            col.update(events=[], dropped=None, path=e["path"], type=e.get("type"), nullable=e.get("nullable"))
        col["events"].append({k: v for k, v in e.items() if k != "column"})
        col["path"] = e["path"]
        if e["kind"] == "dropped":
            col["dropped"] = e["version"]
    for key, col in by_key.items():
        f = present.get(key)
        if f is not None:
            col.update(path=shown_path(f.path), type=type_text(f.dtype), nullable=f.nullable, dropped=None)
        col["name"] = col["path"][-1] if col["path"] else ""
    return list(by_key.values())


def timeline_answer(tl: SchemaTimeline) -> dict[str, Any]:
    """The timeline as the API gives it: columns with their events, the table's own events,
    and the commits they happened in."""
    columns = _column_summaries(tl)
    versions = {e["version"] for e in tl.events} | {e["version"] for e in tl.table_events}
    current = tl.current
    return {
        "earliestVersion": tl.start,
        "latestVersion": tl.latest,
        "columnMapping": current.mode if current else "none",
        "columns": columns,
        "tableEvents": list(tl.table_events),
        "commits": [tl.commits[v] for v in sorted(versions) if v in tl.commits],
        "truncated": tl.truncated,
    }
