"""Partition pruning for a query's hints: `jsonPredicateHints` (the protocol's JSON tree) and
the older `predicateHints` (simple SQL comparisons). Best effort, as the protocol says: a hint
that cannot be parsed, names a column that is not a partition column, or cannot be evaluated
on a file keeps the file (the recipient filters its rows anyway); a file is left out only when
its partition values prove the predicate false. Bounded: depth 32, 256 nodes."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from typing import Any

import orjson

from tables.delta.errors import DeltaError
from tables.delta.log.actions import Metadata
from tables.delta.snapshot.partitions import PartitionColumn, parse_partition_value, partition_columns

MAX_DEPTH = 32
MAX_NODES = 256
UNKNOWN = None  # three-valued logic: True, False or unknown (keep the file)

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "equal": operator.eq,
    "lessThan": operator.lt,
    "lessThanOrEqual": operator.le,
    "greaterThan": operator.gt,
    "greaterThanOrEqual": operator.ge,
}
_SQL_OPS = {"=": "equal", "<": "lessThan", "<=": "lessThanOrEqual", ">": "greaterThan", ">=": "greaterThanOrEqual"}
_SQL = re.compile(
    r"^\s*(?:(?P<col>[A-Za-z_][\w]*)\s*(?P<op><>|<=|>=|=|<|>)\s*(?P<lit>'(?:[^']|'')*'|-?[\d.]+)"
    r"|(?P<lit2>'(?:[^']|'')*'|-?[\d.]+)\s*(?P<op2><>|<=|>=|=|<|>)\s*(?P<col2>[A-Za-z_][\w]*)"
    r"|(?P<col3>[A-Za-z_][\w]*)\s+IS\s+(?P<not>NOT\s+)?NULL)\s*$",
    re.IGNORECASE,
)
_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "=": "=", "<>": "<>"}


class _Skip(Exception):
    """A hint this server does not evaluate: it is ignored (every file kept)."""


class PartitionFilter:
    """Decides, from a file's partition values, whether it may hold rows a query wants."""

    def __init__(self, metadata: Metadata, json_hint: str | None = None, sql_hints: list[str] | None = None) -> None:
        mode = metadata.configuration.get("delta.columnMapping.mode", "none")
        try:
            columns = partition_columns(metadata, mode)
        except DeltaError:
            columns = []
        self.columns: dict[str, PartitionColumn] = {c.name.lower(): c for c in columns}
        self.trees: list[dict[str, Any]] = []
        if json_hint:
            tree = _parsed_json(json_hint)
            if tree is not None:
                self.trees.append(tree)
        for hint in sql_hints or []:
            tree = _parsed_sql(hint) if isinstance(hint, str) else None
            if tree is not None:
                self.trees.append(tree)

    @property
    def active(self) -> bool:
        return bool(self.trees and self.columns)

    def keeps(self, partition_values: dict[str, str | None] | None) -> bool:
        values = partition_values or {}
        for tree in self.trees:
            try:
                if _eval(tree, values, self.columns, 0) is False:
                    return False
            except (_Skip, DeltaError, TypeError, ValueError, ArithmeticError):
                continue
        return True


def _parsed_json(text: str) -> dict[str, Any] | None:
    try:
        tree = orjson.loads(text) if isinstance(text, str | bytes) else text
    except orjson.JSONDecodeError:
        return None
    if not isinstance(tree, dict) or _count(tree, 0) > MAX_NODES:
        return None
    return tree


def _count(node: Any, depth: int) -> int:
    if depth > MAX_DEPTH or not isinstance(node, dict):
        return MAX_NODES + 1
    kids = node.get("children") or []
    if not isinstance(kids, list):
        return MAX_NODES + 1
    return 1 + sum(_count(k, depth + 1) for k in kids)


def _parsed_sql(text: str) -> dict[str, Any] | None:
    m = _SQL.match(text[:1000])
    if m is None:
        return None
    if m["col3"]:
        test = {"op": "isNull", "children": [{"op": "column", "name": m["col3"]}]}
        return {"op": "not", "children": [test]} if m["not"] else test
    col, op, lit = (m["col"], m["op"], m["lit"]) if m["col"] else (m["col2"], _FLIP[m["op2"]], m["lit2"])
    value = lit[1:-1].replace("''", "'") if lit.startswith("'") else lit
    pair = [{"op": "column", "name": col}, {"op": "literal", "value": value}]
    if op == "<>":
        return {"op": "not", "children": [{"op": "equal", "children": pair}]}
    return {"op": _SQL_OPS[op], "children": pair}


def _leaf(node: dict[str, Any], values: dict[str, str | None], columns: dict[str, PartitionColumn]) -> tuple[str, Any]:
    """('column', typed value) or ('literal', raw text) of a leaf."""
    op = node.get("op")
    if op == "column":
        col = columns.get(str(node.get("name", "")).lower())
        if col is None:
            raise _Skip  # not a partition column: the files' rows decide, not this server
        return "column", (col, parse_partition_value(values.get(col.key), col.type, col.name))
    if op == "literal":
        return "literal", node.get("value")
    raise _Skip


def _compare(
    op: str, kids: list[Any], values: dict[str, str | None], columns: dict[str, PartitionColumn]
) -> bool | None:
    if len(kids) != 2 or not all(isinstance(k, dict) for k in kids):
        raise _Skip
    a, b = (_leaf(k, values, columns) for k in kids)
    swapped = a[0] == "literal"
    (kind_c, (col, value)), (_kind_l, literal) = (b, a) if swapped else (a, b)
    if kind_c != "column" or _kind_l != "literal":
        raise _Skip
    if value is None or literal is None:
        return UNKNOWN if value is None and literal is not None else False
    typed = parse_partition_value(str(literal), col.type, col.name)
    left, right = (typed, value) if swapped else (value, typed)
    return _COMPARE[op](left, right)


def _maybe(node: Any, values: dict[str, str | None], columns: dict[str, PartitionColumn], depth: int) -> bool | None:
    """A child of and/or/not: one this server cannot evaluate is unknown, not the whole hint."""
    try:
        return _eval(node, values, columns, depth)
    except (_Skip, DeltaError, TypeError, ValueError, ArithmeticError):
        return UNKNOWN


def _eval(node: Any, values: dict[str, str | None], columns: dict[str, PartitionColumn], depth: int) -> bool | None:
    if depth > MAX_DEPTH or not isinstance(node, dict):
        raise _Skip
    op, kids = node.get("op"), node.get("children") or []
    if op in _COMPARE:
        return _compare(op, kids, values, columns)
    if op == "isNull":
        if len(kids) != 1:
            raise _Skip
        kind, found = _leaf(kids[0], values, columns)
        if kind != "column":
            raise _Skip
        return found[1] is None
    results = [_maybe(k, values, columns, depth + 1) for k in kids]
    if op == "not" and len(results) == 1:
        return None if results[0] is None else not results[0]
    if op == "and" and results:
        return False if False in results else (None if None in results else True)
    if op == "or" and results:
        return True if True in results else (None if None in results else False)
    raise _Skip
