"""Pruning a row history's files from the log alone: a file whose partition values or
statistics rule the key out is never read (see the package's rules).

Pure: no storage, no Django, no Spark.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any

from tables.delta.errors import DeltaError
from tables.delta.history.row_history.key import KeyColumn
from tables.delta.snapshot.partitions import parse_partition_value
from tables.delta.snapshot.replay import canonical_path


def parse_stats(raw: Any) -> dict[str, Any] | None:
    """An add's `stats` (JSON text, or a checkpoint's parsed struct); None when unusable.
    Decimals are read as Decimal: a float would lose the digits a decimal key compares."""
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        return None
    try:
        stats = json.loads(raw, parse_float=Decimal)
    except (ValueError, RecursionError):
        return None
    return stats if isinstance(stats, dict) else None


def _stat(raw: Any, key: KeyColumn) -> Any:
    """A min or max statistic as a value comparable with the key's, or None."""
    if raw is None or isinstance(raw, (dict, list)):
        return None
    v = key.value
    try:
        if isinstance(v, bool):
            return raw if isinstance(raw, bool) else None
        if isinstance(v, int):
            return int(raw) if isinstance(raw, (int, Decimal)) and not isinstance(raw, bool) else None
        if isinstance(v, Decimal):
            return Decimal(str(raw)) if not isinstance(raw, bool) else None
        if isinstance(v, date):
            return date.fromisoformat(raw[:10]) if isinstance(raw, str) else None
        if isinstance(v, str):
            return raw if isinstance(raw, str) else None
    except (ValueError, InvalidOperation):
        return None
    return None


def stats_may_hold(stats: dict[str, Any] | None, keys: list[KeyColumn]) -> bool:
    """Whether a file with these statistics can hold the key (True when they do not say)."""
    if stats is None:
        return True
    n = stats.get("numRecords")
    n = n if isinstance(n, int) and not isinstance(n, bool) else None
    if n == 0:
        return False
    mins, maxs, nulls = (
        stats.get(k) if isinstance(stats.get(k), dict) else {} for k in ("minValues", "maxValues", "nullCount")
    )
    for k in keys:
        if k.partition is not None:
            continue
        if n is not None and nulls.get(k.physical) == n:
            return False  # every value null: a key is never null
        lo, hi = _stat(mins.get(k.physical), k), _stat(maxs.get(k.physical), k)
        if lo is not None and k.value < lo:
            return False  # a truncated string minimum is a prefix, never above the true one
        if hi is not None and k.value > hi:
            # a truncated string maximum is a prefix of the true one: a key starting with it
            # may still be at or below the true maximum
            if not (isinstance(hi, str) and k.value.startswith(hi)):
                return False
    return True


def partition_may_hold(values: Mapping[str, str | None] | None, keys: list[KeyColumn]) -> bool:
    """Whether a file with these partition values can hold the key (True when unknown)."""
    if values is None:
        return True
    for k in keys:
        if k.partition is None:
            continue
        try:
            typed = parse_partition_value(values.get(k.partition), k.type, k.name)
        except DeltaError:
            return True  # a value this reader cannot type: the rows decide
        if typed != k.value:
            return False
    return True


@dataclass(frozen=True, slots=True)
class FileRead:
    """A data or change data file the history reads (once), as the log first names it."""

    path: str  # as in the log: URL-encoded, relative to the root or absolute
    partition_values: Mapping[str, str | None] | None  # None: unknown (a remove without them)
    cdc: bool = False

    @property
    def ident(self) -> str:
        return canonical_path(self.path)


class Pruner:
    """Decides, file by file, whether a file could hold the key (each file's decision is taken
    the first time it is read; a file read once is never read again)."""

    def __init__(self, keys: list[KeyColumn], reads: dict[str, FileRead], seen: set[str]) -> None:
        self.keys, self.reads, self.seen = keys, reads, seen  # a RowPlan's: the pruner fills them
        self.stats: dict[str, Any] = {}  # canonical path -> the stats its add carried

    def skip(self, path: str) -> None:
        self.seen.add(canonical_path(path))

    def may_hold(self, path: str, values: Mapping[str, str | None] | None) -> bool:
        if not partition_may_hold(values, self.keys):
            return False
        return stats_may_hold(parse_stats(self.stats.get(canonical_path(path))), self.keys)

    def read(self, path: str, values: Mapping[str, str | None] | None, cdc: bool = False) -> FileRead | None:
        """The file to read, None when pruned. Change data files have no statistics: only
        their partition values prune them."""
        ident = canonical_path(path)
        self.seen.add(ident)
        if ident in self.reads:
            return self.reads[ident]
        if not (partition_may_hold(values, self.keys) if cdc else self.may_hold(path, values)):
            return None
        self.reads[ident] = FileRead(path, values, cdc)
        return self.reads[ident]
