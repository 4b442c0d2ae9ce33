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
from threading import Lock
from typing import Any

from tables.delta.history import schema_timeline as core
from tables.delta.text_bounds import MAX_ECHOED_VALUE, cut
from tables.models import Commit, Table
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


def _with_cached_times(table: Table, commits: list[dict[str, Any]]) -> list[dict[str, Any]]:
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
        out.append({**c, "timestamp": ts, "timestampSource": source})
    return out


def schema_timeline(table: Table) -> dict[str, Any]:
    """Every column's events (added, renamed, type_widened, type_changed, nullability_changed,
    dropped) with the version they happened at, the table's own (partitioning, column mapping
    mode, replaced), and those versions' commits."""
    out = core.timeline_answer(_timeline(table))
    out["commits"] = _with_cached_times(table, out["commits"])
    return out


def schema_as_of(table: Table, version: int | None = None) -> dict[str, Any]:
    """The schema as of `version` (the latest when None): columns, partitioning, properties,
    the commit that set it, and the CREATE TABLE that recreates it under the table's name. A
    version the table lost and a pin keeps (tables.services.versions.source) is its pin's
    (`pinned`, `readFrom`)."""
    tl = _timeline(table)
    if version is not None:
        source = source_of(table, version)
        if source.pin is None and not tl.start <= version <= tl.latest:
            # the log lost the version since the reachability answer was made (a log cleanup
            # the next sync has not seen): a pin may keep it, as snapshots fall back to it
            pin = holding_pin(table, version)
            source = Source(pin.store_location, None, pin) if pin is not None else source
        if source.pin is not None:
            pinned = _pinned_schema(table, version, source)
            pinned["latestVersion"], pinned["earliestVersion"] = tl.latest, tl.start
            if tl.start <= version <= tl.latest:  # the log still has its commit
                commit = core.schema_at(tl, version, table.name)["commit"]
                pinned["commit"] = _with_cached_times(table, [commit])[0] if commit is not None else None
            return pinned
    out = core.schema_at(tl, tl.latest if version is None else version, table.name)
    if out["commit"] is not None:
        out["commit"] = _with_cached_times(table, [out["commit"]])[0]
    out["latestVersion"], out["earliestVersion"] = tl.latest, tl.start
    out["readFrom"] = None
    return out


def _pinned_schema(table: Table, version: int, source: Source) -> dict[str, Any]:
    """The schema as of a version only a pin still keeps whole: its kept table's latest
    version, named as the table's version (the CREATE TABLE says the table, not the store)."""
    kept = core.schema_timeline(source.location)
    out = core.schema_at(kept, kept.latest, table.name)
    out["ddl"] = out["ddl"].replace(
        f"{kept.location} at version {out['schemaVersion']}", f"{table.location} at version {version}"
    )
    pin = source.pin
    out.update(version=version, schemaVersion=version, commit=None, pinned=pin.name)
    out["readFrom"] = {"pin": pin.pk, "name": pin.name}
    return out


def schema_diff(table: Table, v_from: int, v_to: int) -> dict[str, Any]:
    """Two versions' schemas compared, renames named when column mapping is on at both. A side
    the table lost and a pin keeps is its pin's (`readFrom` says which side)."""
    if v_from > v_to:
        raise ServiceError(f"'from' ({v_from}) must not be after 'to' ({v_to}).", "invalid_range")
    tl = _timeline(table)
    sources = {side: source_of(table, v) for side, v in (("from", v_from), ("to", v_to))}
    if all(s.pin is None for s in sources.values()):
        return {**core.diff_versions(tl, v_from, v_to), "readFrom": {"from": None, "to": None}}
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
    return {
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
        "readFrom": {
            side: {"pin": s.pin.pk, "name": s.pin.name} if s.pin is not None else None for side, s in sources.items()
        },
    }
