"""Partition pruning for a query's hints: `jsonPredicateHints` (the protocol's JSON tree) and
the older `predicateHints` (simple SQL comparisons). Best effort, as the protocol says: a hint
that cannot be parsed, names a column that is not a partition column, or cannot be evaluated
on a file keeps the file (the recipient filters its rows anyway); a file is left out only when
its partition values prove the predicate false. Bounded: depth 32, 256 nodes.

A hint is turned once into the core's predicate tree (tables/delta/predicates.py, the evaluator
a partial RESTORE's predicate uses too), each part this server cannot judge an unknown, and
judged for each file against its partition values."""

from __future__ import annotations

import re
from typing import Any

import orjson

from tables.delta.errors import DeltaError
from tables.delta.log.actions import Metadata
from tables.delta.predicates import UNREADABLE, And, Compare, IsNull, Known, Node, Not, Or, all_of, any_of, evaluate
from tables.delta.snapshot.partitions import PartitionColumn, parse_partition_value, partition_columns

MAX_DEPTH = 32
MAX_NODES = 256
UNKNOWN = Known(None)  # a part this server does not judge: unknown, whatever the file (keep it)

_COMPARE = {"equal": "=", "lessThan": "<", "lessThanOrEqual": "<=", "greaterThan": ">", "greaterThanOrEqual": ">="}
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
        trees: list[dict[str, Any]] = []
        if json_hint:
            tree = _parsed_json(json_hint)
            if tree is not None:
                trees.append(tree)
        for hint in sql_hints or []:
            tree = _parsed_sql(hint) if isinstance(hint, str) else None
            if tree is not None:
                trees.append(tree)
        self.trees = trees
        self.nodes: list[Node] = [_maybe(tree, self.columns, 0) for tree in trees]
        used = {id(c): c for node in self.nodes for c in _columns_of(node)}
        self._used: list[PartitionColumn] = list(used.values())

    @property
    def active(self) -> bool:
        return bool(self.trees and self.columns)

    def keeps(self, partition_values: dict[str, str | None] | None) -> bool:
        values = partition_values or {}
        typed = {c.name: _typed_value(values.get(c.key), c) for c in self._used}
        return not any(evaluate(node, typed) is False for node in self.nodes)


def _typed_value(raw: str | None, col: PartitionColumn) -> Any:
    """A file's partition value as its column's type; UNREADABLE when it does not parse, so
    that every test on it is unknown (the file is kept)."""
    try:
        return parse_partition_value(raw, col.type, col.name)
    except (DeltaError, TypeError, ValueError, ArithmeticError):
        return UNREADABLE


def _columns_of(node: Node) -> list[PartitionColumn]:
    if isinstance(node, Not):
        return _columns_of(node.child)
    if isinstance(node, And | Or):
        return _columns_of(node.left) + _columns_of(node.right)
    return [node.column] if node.column is not None else []


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


def _leaf(node: Any, columns: dict[str, PartitionColumn]) -> tuple[str, Any]:
    """('column', its partition column) or ('literal', raw value) of a leaf."""
    if not isinstance(node, dict):
        raise _Skip
    op = node.get("op")
    if op == "column":
        col = columns.get(str(node.get("name", "")).lower())
        if col is None:
            raise _Skip  # not a partition column: the files' rows decide, not this server
        return "column", col
    if op == "literal":
        return "literal", node.get("value")
    raise _Skip


def _compare(op: str, kids: list[Any], columns: dict[str, PartitionColumn]) -> Node:
    if len(kids) != 2:
        raise _Skip
    a, b = (_leaf(k, columns) for k in kids)
    (kind_c, col), (kind_l, literal) = (b, a) if a[0] == "literal" else (a, b)
    if kind_c != "column" or kind_l != "literal":
        raise _Skip
    if literal is None:
        # no row equals or orders against a null: false for the file, once its value is read
        return Known(False, col)
    # the literal as the column's type; `literal < column` is `column > literal`
    flipped = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(_COMPARE[op], _COMPARE[op])
    typed = parse_partition_value(str(literal), col.type, col.name)
    if typed is None:  # a literal that reads as null ('' for a string): equal to no value, ordered against none
        return And(UNKNOWN, IsNull(col, negated=False)) if op == "equal" else UNKNOWN
    return Compare(col, flipped if a[0] == "literal" else _COMPARE[op], typed)


def _maybe(node: Any, columns: dict[str, PartitionColumn], depth: int) -> Node:
    """A hint's node in the core's tree: one this server cannot judge is unknown, not the
    whole hint."""
    try:
        return _node(node, columns, depth)
    except (_Skip, DeltaError, TypeError, ValueError, ArithmeticError):
        return UNKNOWN


def _node(node: Any, columns: dict[str, PartitionColumn], depth: int) -> Node:
    if depth > MAX_DEPTH or not isinstance(node, dict):
        raise _Skip
    op, kids = node.get("op"), node.get("children") or []
    if not isinstance(kids, list):
        raise _Skip
    if op in _COMPARE:
        return _compare(op, kids, columns)
    if op == "isNull":
        if len(kids) != 1:
            raise _Skip
        kind, col = _leaf(kids[0], columns)
        if kind != "column":
            raise _Skip
        return IsNull(col, negated=False)
    parts = [_maybe(k, columns, depth + 1) for k in kids]
    if op == "not" and len(parts) == 1:
        return Not(parts[0])
    if op == "and" and parts:
        return all_of(parts)
    if op == "or" and parts:
        return any_of(parts)
    raise _Skip
