"""Predicates on partition columns, and their one evaluator: the tree a partial RESTORE's
`where` parses to (restore/predicate.py) and a Delta Sharing query's partition hints are
turned into (services/sharing/predicates.py), judged against one partition's typed values.

Evaluation follows SQL's three values: True, False, or None for unknown. A comparison with a
null (a null partition value or a NULL literal) is unknown, NOT unknown is unknown, AND is
False when either side is, OR True when either side is. A partition value that could not be
read (`UNREADABLE`) makes every test on its column unknown. `Known` is a truth fixed when the
tree was built: a hint the builder cannot judge is unknown, whatever the partition."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import InvalidOperation
from typing import Any

from tables.delta.snapshot.partitions import PartitionColumn


class _Unreadable:
    def __repr__(self) -> str:
        return "UNREADABLE"


# a partition value the log holds but that does not parse as its column's type
UNREADABLE: Any = _Unreadable()


@dataclass(frozen=True, slots=True)
class Compare:
    column: PartitionColumn
    op: str  # = != < <= > >=
    value: Any  # typed by the column's type; None for NULL


@dataclass(frozen=True, slots=True)
class InList:
    column: PartitionColumn
    values: tuple[Any, ...]
    negated: bool


@dataclass(frozen=True, slots=True)
class IsNull:
    column: PartitionColumn
    negated: bool


@dataclass(frozen=True, slots=True)
class Not:
    child: Node


@dataclass(frozen=True, slots=True)
class And:
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Or:
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Known:
    """A truth fixed when the tree was built; with `column`, unknown where that column's
    value cannot be read (the test it stands for reads it)."""

    value: bool | None
    column: PartitionColumn | None = None


Node = Compare | InList | IsNull | Not | And | Or | Known


def all_of(nodes: list[Node]) -> Node:
    """The AND of one or more nodes."""
    out = nodes[-1]
    for node in reversed(nodes[:-1]):
        out = And(node, out)
    return out


def any_of(nodes: list[Node]) -> Node:
    """The OR of one or more nodes."""
    out = nodes[-1]
    for node in reversed(nodes[:-1]):
        out = Or(node, out)
    return out


def _compare(op: str, a: Any, b: Any) -> bool | None:
    if a is None or b is None or a is UNREADABLE:
        return None
    try:
        if op == "=":
            return a == b
        if op == "!=":
            return a != b
        if op == "<":
            return a < b
        if op == "<=":
            return a <= b
        if op == ">":
            return a > b
        return a >= b
    except (TypeError, ValueError, ArithmeticError, InvalidOperation):  # NaN against a decimal, and the like
        return None


def evaluate(node: Node, values: dict[str, Any]) -> bool | None:
    """SQL three-valued truth of `node` for one partition: `values` maps each column's logical
    name to its typed value (None for null, UNREADABLE for one that does not parse). None is
    unknown."""
    if isinstance(node, Compare):
        return _compare(node.op, values.get(node.column.name), node.value)
    if isinstance(node, IsNull):
        v = values.get(node.column.name)
        if v is UNREADABLE:
            return None
        return (v is not None) if node.negated else (v is None)
    if isinstance(node, InList):
        v = values.get(node.column.name)
        if v is None or v is UNREADABLE:
            return None
        hits = [_compare("=", v, x) for x in node.values]
        found: bool | None = True if any(h is True for h in hits) else (None if None in hits else False)
        if node.negated:
            return None if found is None else not found
        return found
    if isinstance(node, Not):
        r = evaluate(node.child, values)
        return None if r is None else not r
    if isinstance(node, And):
        a, b = evaluate(node.left, values), evaluate(node.right, values)
        if a is False or b is False:
            return False
        return None if a is None or b is None else True
    if isinstance(node, Or):
        a, b = evaluate(node.left, values), evaluate(node.right, values)
        if a is True or b is True:
            return True
        return None if a is None or b is None else False
    if isinstance(node, Known):
        if node.column is not None and values.get(node.column.name) is UNREADABLE:
            return None
        return node.value
    raise TypeError(f"not a predicate node: {node!r}")  # pragma: no cover
