"""The schema's timeline of a registered table, for its page and its API: every column's
history, the schema as of a version with its CREATE TABLE, two versions' schemas compared.

Read from the log (the truth) by the core's walk (tables.delta.history.schema_timeline),
kept per table in this process and continued with the commits written since (a listing of
the log's tail, not of the whole log): a table's schema history is walked once. A table
deltaweb owns is walked with its ratified, un-backfilled commits, from the start each time
(those are few). The commits' effective timestamps (ICT or file time) come from the cached
history when it has them, so they read as they do on the History tab.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from threading import Lock
from typing import Any

from tables.delta.history import schema_timeline as core
from tables.delta.text_bounds import MAX_ECHOED_VALUE, cut
from tables.models import Commit, Pin, Table
from tables.services.errors import ServiceError
from tables.services.owner.access import owner_of
from tables.services.pins.queries import holding_pin
from tables.services.versions.source import Source, source_of

_KEPT = 8  # tables whose timeline this process keeps
_timelines: OrderedDict[tuple[int, str], core.SchemaTimeline] = OrderedDict()
_lock = Lock()


def _timeline(table: Table) -> core.SchemaTimeline:
    """The table's timeline up to its latest commit: the kept one continued, else walked."""
    owner = owner_of(table)
    if owner is not None:
        return core.schema_timeline(table.location, owner=owner)
    key = (table.pk, table.location)
    with _lock:
        kept = _timelines.get(key)
    tl = core.extend(kept, table.location) if kept is not None else core.schema_timeline(table.location)
    with _lock:
        _timelines[key] = tl
        _timelines.move_to_end(key)
        while len(_timelines) > _KEPT:
            _timelines.popitem(last=False)
    return tl


def forget(table: Table | None = None) -> None:
    """Drop the kept timelines (of one table, or all): tests, a table registered anew."""
    with _lock:
        for key in [k for k in _timelines if table is None or k[0] == table.pk]:
            del _timelines[key]


@dataclass(frozen=True)
class SchemaCommit:
    """A commit the answers show: the core's (`info`: its commitInfo's timestamps, operation
    and user) with its effective timestamp and that timestamp's source, the cached history's
    when the sync has stored them (else the commitInfo's, source `commitInfo`)."""

    info: dict[str, Any]
    timestamp: int | None
    timestamp_source: str | None


@dataclass(frozen=True)
class Timeline:
    """Every column's history: the core's answer (`answer`, tables.delta.history.schema_timeline
    .timeline_answer) and the commits it happened in, with their effective timestamps."""

    answer: dict[str, Any]
    commits: list[SchemaCommit]


@dataclass(frozen=True)
class SchemaAsOf:
    """The schema as of a version: the core's (`schema`, `schema_at`: columns, partitioning,
    properties, the CREATE TABLE), the commit that set it, the log's earliest and latest
    versions, and the pin a version the table lost is read from (None: the table)."""

    schema: dict[str, Any]
    commit: SchemaCommit | None
    earliest: int
    latest: int
    pin: Pin | None = None


@dataclass(frozen=True)
class SchemaDiff:
    """Two versions' schemas compared: the core's comparison (`diff`) and the pin each side
    was read from (None: the table)."""

    diff: dict[str, Any]
    from_pin: Pin | None = None
    to_pin: Pin | None = None


def _with_cached_times(table: Table, commits: list[dict[str, Any]]) -> list[SchemaCommit]:
    """The commits with the cached history's effective timestamp and its source, when the
    sync has stored them (else the commitInfo's, source `commitInfo`)."""
    rows = {
        v: (ts, source)
        for v, ts, source in Commit.objects.filter(
            table=table, version__in=[c["version"] for c in commits]
        ).values_list("version", "timestamp", "timestamp_source")
    }
    out = []
    for c in commits:
        ts, source = rows.get(c["version"], (None, None))
        if ts is None:
            ts, source = c["timestamp"], "commitInfo" if c["timestamp"] is not None else None
        out.append(SchemaCommit(c, ts, source))
    return out


def _commit(table: Table, commit: dict[str, Any] | None) -> SchemaCommit | None:
    return None if commit is None else _with_cached_times(table, [commit])[0]


def schema_timeline(table: Table) -> Timeline:
    """Every column's events (added, renamed, type_widened, type_changed, nullability_changed,
    dropped) with the version they happened at, the table's own (partitioning, column mapping
    mode, replaced), and those versions' commits."""
    answer = core.timeline_answer(_timeline(table))
    return Timeline(answer, _with_cached_times(table, answer["commits"]))


def schema_as_of(table: Table, version: int | None = None) -> SchemaAsOf:
    """The schema as of `version` (the latest when None): columns, partitioning, properties,
    the commit that set it, and the CREATE TABLE that recreates it under the table's name. A
    version the table lost and a pin keeps (tables.services.versions.source) is its pin's
    (`pin`)."""
    tl = _timeline(table)
    if version is not None:
        source = source_of(table, version)
        if source.pin is None and not tl.start <= version <= tl.latest:
            # the log lost the version since the reachability answer was made (a log cleanup
            # the next sync has not seen): a pin may keep it, as snapshots fall back to it
            pin = holding_pin(table, version)
            source = Source(pin.store_location, None, pin) if pin is not None else source
        if source.pin is not None:
            commit = None
            if tl.start <= version <= tl.latest:  # the log still has its commit
                commit = _commit(table, core.schema_at(tl, version, table.name)["commit"])
            return SchemaAsOf(_pinned_schema(table, version, source), commit, tl.start, tl.latest, source.pin)
    schema = core.schema_at(tl, tl.latest if version is None else version, table.name)
    return SchemaAsOf(schema, _commit(table, schema["commit"]), tl.start, tl.latest)


def _pinned_schema(table: Table, version: int, source: Source) -> dict[str, Any]:
    """The schema as of a version only a pin still keeps whole: its kept table's latest
    version, named as the table's version (the CREATE TABLE says the table, not the store)."""
    kept = core.schema_timeline(source.location)
    out = core.schema_at(kept, kept.latest, table.name)
    out["ddl"] = out["ddl"].replace(
        f"{kept.location} at version {out['schemaVersion']}", f"{table.location} at version {version}"
    )
    out.update(version=version, schemaVersion=version, commit=None)
    return out


def schema_diff(table: Table, v_from: int, v_to: int) -> SchemaDiff:
    """Two versions' schemas compared, renames named when column mapping is on at both. A side
    the table lost and a pin keeps is its pin's (`from_pin`, `to_pin`)."""
    if v_from > v_to:
        raise ServiceError(f"'from' ({v_from}) must not be after 'to' ({v_to}).", "invalid_range")
    tl = _timeline(table)
    sources = {side: source_of(table, v) for side, v in (("from", v_from), ("to", v_to))}
    if all(s.pin is None for s in sources.values()):
        return SchemaDiff(core.diff_versions(tl, v_from, v_to))
    states = {}
    for side, version in (("from", v_from), ("to", v_to)):
        if sources[side].pin is not None:
            kept = core.schema_timeline(sources[side].location)
            states[side] = (core.state_at(kept, kept.latest), version)  # numbered as the table's version
        else:
            state = core.state_at(tl, version)
            states[side] = (state, state.version)
    (a, a_version), (b, b_version) = states["from"], states["to"]
    where = f"{table.name} at version"  # never the pin store's directory
    out = core.diff_schemas(
        core.parse_schema(a.metadata, f"{where} {a_version}"),
        a.mode,
        core.parse_schema(b.metadata, f"{where} {b_version}"),
        b.mode,
    )
    diff = {
        "from": v_from,
        "to": v_to,
        "fromSchemaVersion": a_version,
        "toSchemaVersion": b_version,
        **out,
        "partitionColumns": {
            "from": [cut(c, MAX_ECHOED_VALUE) for c in a.metadata.partition_columns],
            "to": [cut(c, MAX_ECHOED_VALUE) for c in b.metadata.partition_columns],
        },
        "columnMapping": {"from": a.mode, "to": b.mode},
    }
    return SchemaDiff(diff, sources["from"].pin, sources["to"].pin)
