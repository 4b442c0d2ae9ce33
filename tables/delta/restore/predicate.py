"""Predicates on partition columns (a partial RESTORE's `where`): tokenizer, recursive-descent
parser and three-valued evaluation against files' partition values. Pure core.

Grammar (keywords case-insensitive; precedence NOT > AND > OR):

    expr       := and_expr (OR and_expr)*
    and_expr   := not_expr (AND not_expr)*
    not_expr   := NOT not_expr | primary
    primary    := '(' expr ')'
                | operand (= | == | != | <> | < | <= | > | >=) operand
                | column [NOT] IN '(' literal (',' literal)* ')'
                | column IS [NOT] NULL
                | column                      (a boolean column: column = TRUE)
    operand    := column | literal            (one side of a comparison is a column)
    column     := identifier | `back quoted` (`` escapes a back quote)
    literal    := 'string' ('' escapes a quote) | [+|-] number | TRUE | FALSE | NULL
                | DATE 'yyyy-mm-dd' | TIMESTAMP 'yyyy-mm-dd hh:mm:ss[.ffffff][zone]'

Only partition columns may be named: the predicate selects whole partitions, never rows.
Literals are typed by their column's Delta type (partitions.parse_partition_value), so
`date = '2024-01-01'` compares dates and `n < 10` integers, never strings; a timestamp without
a zone is UTC, as the log's own partition values are. `DATE` and `TIMESTAMP` are keywords only
before a string, so a column named `date` needs no quotes.

Evaluation (tables/delta/predicates.py, the one evaluator restore and sharing share) follows
SQL: a comparison with a null (a null partition value or a NULL literal) is
unknown, NOT unknown is unknown, and only partitions where the predicate is true are selected;
`IS NULL` selects null partition values. Errors are InvalidPredicateError (code
`invalid_predicate`) naming the 1-based position of the offending token.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa

from tables.delta.errors import CorruptLogError, DeltaError
from tables.delta.log.actions import Metadata, Protocol
from tables.delta.predicates import And, Compare, InList, IsNull, Node, Not, Or, evaluate
from tables.delta.snapshot.partitions import (
    PartitionColumn,
    distinct_partitions,
    parse_partition_value,
    partition_columns,
)
from tables.delta.snapshot.schema.columnmapping import mapping_mode


class InvalidPredicateError(DeltaError):
    """A partition predicate that does not parse, names a column that is not a partition
    column, or compares a column with a value of another type."""

    code = "invalid_predicate"


# --- tokens ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # ident | qident | string | number | op | end
    text: str  # the identifier, the unquoted string, the number text or the operator
    pos: int  # 0-based offset in the predicate text


_SPACE = re.compile(r"\s+")
_NUMBER = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPERATORS = ("<=", ">=", "<>", "!=", "==", "=", "<", ">", "(", ")", ",", "-", "+")
KEYWORDS = frozenset({"AND", "OR", "NOT", "IN", "IS", "NULL", "TRUE", "FALSE"})
MAX_PREDICATE_CHARS = 10_000
# Nesting (parentheses and NOTs) and the AND/OR terms are bounded: the parser and the
# evaluator recurse once per level, and a few hundred levels would otherwise reach Python's
# recursion limit from a request of a few kilobytes.
MAX_PREDICATE_DEPTH = 32
MAX_PREDICATE_TERMS = 256
# An integer literal past int64 stays a Decimal: converting 1e600000 to an int takes seconds
# (and holds the interpreter), and no partition value of an integer column reaches it anyway.
_INT64_DIGITS = 19


def _error(text: str, pos: int, message: str) -> InvalidPredicateError:
    near = text[pos : pos + 20].split("\n")[0]
    where = f"at position {pos + 1}" + (f" (near {near!r})" if near else " (at the end)")
    return InvalidPredicateError(f"invalid predicate {where}: {message}", position=pos + 1)


def tokenize(text: str) -> list[Token]:
    """The predicate's tokens, ending with an `end` token."""
    out: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        if m := _SPACE.match(text, i):
            i = m.end()
            continue
        ch = text[i]
        if ch == "'" or ch == "`":
            j, buf = i + 1, []
            while True:
                k = text.find(ch, j)
                if k < 0:
                    what = "string" if ch == "'" else "quoted identifier"
                    raise _error(text, i, f"unterminated {what}")
                buf.append(text[j:k])
                if k + 1 < n and text[k + 1] == ch:  # a doubled quote is one quote
                    buf.append(ch)
                    j = k + 2
                    continue
                break
            value = "".join(buf)
            if ch == "`" and not value:
                raise _error(text, i, "empty quoted identifier")
            out.append(Token("string" if ch == "'" else "qident", value, i))
            i = k + 1
            continue
        if m := _NUMBER.match(text, i):
            out.append(Token("number", m.group(), i))
            i = m.end()
            continue
        if m := _IDENT.match(text, i):
            out.append(Token("ident", m.group(), i))
            i = m.end()
            continue
        op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
        if op is None:
            raise _error(text, i, f"unexpected character {ch!r}")
        out.append(Token("op", op, i))
        i += len(op)
    out.append(Token("end", "", n))
    return out


_FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_COMPARISONS = {"=": "=", "==": "=", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


# --- literals typed by their column ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Literal:
    kind: str  # string | number | date | timestamp | bool | null
    text: str
    pos: int
    value: Any = None  # bool for kind bool


_INTEGERS = frozenset({"byte", "short", "integer", "long"})


def _typed(text: str, lit: _Literal, col: PartitionColumn) -> Any:
    """`lit` as a value of `col`'s type (what the column's partition values parse to)."""
    t = col.type.strip().lower()
    kind = lit.kind

    def refuse(what: str) -> InvalidPredicateError:
        return _error(text, lit.pos, f"column '{col.name}' is a {col.type}; {what}")

    def parse(value_text: str, as_type: str | None = None) -> Any:
        try:
            return parse_partition_value(value_text, as_type or col.type, col.name)
        except CorruptLogError:
            raise _error(text, lit.pos, f"{value_text!r} is not a valid {col.type} for column '{col.name}'") from None

    if kind == "null":
        return None
    if kind == "string":
        if lit.text == "" and t != "string":
            raise refuse("the empty string is not a value of it")
        return parse(lit.text)
    if kind == "bool":
        if t != "boolean":
            raise refuse(f"{lit.text.upper()} is a boolean")
        return lit.value
    if kind == "number":
        if t in _INTEGERS:
            d = Decimal(lit.text)
            if d.adjusted() >= _INT64_DIGITS or d != d.to_integral_value():
                return d
            return int(d)
        if t in ("float", "double"):
            return float(lit.text)
        if t.startswith("decimal"):
            return Decimal(lit.text)
        raise refuse(f"compare it with a {'quoted ' if t in ('string', 'binary') else ''}string, not a number")
    if kind == "date":
        value = parse(lit.text, "date")
        if t == "date":
            return value
        if t == "timestamp":
            return datetime(value.year, value.month, value.day, tzinfo=UTC)
        if t == "timestamp_ntz":
            return datetime(value.year, value.month, value.day)
        raise refuse("a DATE literal does not compare with it")
    if kind == "timestamp":
        if t in ("timestamp", "timestamp_ntz"):
            return parse(lit.text)
        raise refuse("a TIMESTAMP literal does not compare with it")
    raise refuse(f"unexpected literal {lit.text!r}")  # pragma: no cover - every kind is above


# --- the parser -------------------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str, columns: list[PartitionColumn]) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0
        self.columns = columns
        self.used: dict[str, PartitionColumn] = {}
        self.depth = 0
        self.terms = 0

    # token helpers
    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def peek(self, ahead: int = 1) -> Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def is_kw(self, word: str, tok: Token | None = None) -> bool:
        tok = tok or self.tok
        return tok.kind == "ident" and tok.text.upper() == word

    def accept_kw(self, word: str) -> bool:
        if self.is_kw(word):
            self.i += 1
            return True
        return False

    def accept_op(self, op: str) -> bool:
        if self.tok.kind == "op" and self.tok.text == op:
            self.i += 1
            return True
        return False

    def expect_op(self, op: str, what: str) -> None:
        if not self.accept_op(op):
            raise self.fail(f"expected {what}")

    def fail(self, message: str, tok: Token | None = None) -> InvalidPredicateError:
        return _error(self.text, (tok or self.tok).pos, message)

    # grammar
    def parse(self) -> Node:
        if self.tok.kind == "end":
            raise self.fail("the predicate is empty")
        node = self.or_expr()
        if self.tok.kind != "end":
            raise self.fail("expected AND, OR or the end of the predicate")
        return node

    def nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_PREDICATE_DEPTH:
            raise self.fail(f"nested more than {MAX_PREDICATE_DEPTH} levels deep (parentheses and NOTs)")

    def term(self) -> None:
        self.terms += 1
        if self.terms > MAX_PREDICATE_TERMS:
            raise self.fail(f"more than {MAX_PREDICATE_TERMS} AND/OR terms; list values with IN (...)")

    def or_expr(self) -> Node:
        node = self.and_expr()
        while self.accept_kw("OR"):
            self.term()
            node = Or(node, self.and_expr())
        return node

    def and_expr(self) -> Node:
        node = self.not_expr()
        while self.accept_kw("AND"):
            self.term()
            node = And(node, self.not_expr())
        return node

    def not_expr(self) -> Node:
        if self.accept_kw("NOT"):
            self.nest()
            node = Not(self.not_expr())
            self.depth -= 1
            return node
        return self.primary()

    def primary(self) -> Node:
        if self.accept_op("("):
            self.nest()
            node = self.or_expr()
            self.expect_op(")", "')'")
            self.depth -= 1
            return node
        start = self.tok
        left = self.operand()
        if isinstance(left, PartitionColumn):
            if self.accept_kw("IS"):
                negated = self.accept_kw("NOT")
                if not self.accept_kw("NULL"):
                    raise self.fail("expected NULL or NOT NULL after IS")
                return IsNull(left, negated)
            if self.is_kw("NOT") and self.is_kw("IN", self.peek()):
                self.i += 2
                return self.in_list(left, negated=True)
            if self.accept_kw("IN"):
                return self.in_list(left, negated=False)
        if self.tok.kind == "op" and self.tok.text in _COMPARISONS:
            op = _COMPARISONS[self.tok.text]
            self.i += 1
            right_tok = self.tok
            right = self.operand()
            if isinstance(left, PartitionColumn) and isinstance(right, _Literal):
                return Compare(left, op, _typed(self.text, right, left))
            if isinstance(left, _Literal) and isinstance(right, PartitionColumn):
                return Compare(right, _FLIP[op], _typed(self.text, left, right))
            if isinstance(left, PartitionColumn):
                raise self.fail("compare a partition column with a value, not with another column", right_tok)
            raise self.fail("a comparison needs a partition column on one side", start)
        if isinstance(left, PartitionColumn):
            if left.type.strip().lower() == "boolean":
                return Compare(left, "=", True)
            raise self.fail("expected a comparison, IN, NOT IN or IS [NOT] NULL")
        raise self.fail("expected a comparison operator")

    def in_list(self, column: PartitionColumn, negated: bool) -> Node:
        self.expect_op("(", "'(' after IN")
        values = []
        while True:
            tok = self.tok
            item = self.operand()
            if not isinstance(item, _Literal):
                raise self.fail("IN lists values, not columns", tok)
            values.append(_typed(self.text, item, column))
            if self.accept_op(","):
                continue
            self.expect_op(")", "',' or ')' in the IN list")
            return InList(column, tuple(values), negated)

    def operand(self) -> PartitionColumn | _Literal:
        tok = self.tok
        if tok.kind == "string":
            self.i += 1
            return _Literal("string", tok.text, tok.pos)
        if tok.kind == "op" and tok.text in ("-", "+") and self.peek().kind == "number":
            self.i += 2
            sign = "-" if tok.text == "-" else ""
            return _Literal("number", sign + self.tokens[self.i - 1].text, tok.pos)
        if tok.kind == "number":
            self.i += 1
            return _Literal("number", tok.text, tok.pos)
        if tok.kind == "qident":
            self.i += 1
            return self.column(tok.text, tok)
        if tok.kind == "ident":
            word = tok.text.upper()
            if word in ("DATE", "TIMESTAMP") and self.peek().kind == "string":
                self.i += 2
                return _Literal(word.lower(), self.tokens[self.i - 1].text, tok.pos)
            if word in ("TRUE", "FALSE"):
                self.i += 1
                return _Literal("bool", tok.text, tok.pos, word == "TRUE")
            if word == "NULL":
                self.i += 1
                return _Literal("null", tok.text, tok.pos)
            if word in KEYWORDS:
                raise self.fail(f"expected a column or a value, not {tok.text}")
            self.i += 1
            return self.column(tok.text, tok)
        if tok.kind == "end":
            raise self.fail("expected a column or a value, the predicate ends here")
        raise self.fail("expected a column or a value")

    def column(self, name: str, tok: Token) -> PartitionColumn:
        col = next((c for c in self.columns if c.name == name), None)
        if col is None:  # unquoted names match case-insensitively, as in Spark SQL
            folded = [c for c in self.columns if c.name.lower() == name.lower()]
            col = folded[0] if len(folded) == 1 else None
        if col is None:
            names = ", ".join(c.name for c in self.columns) or "(none)"
            raise self.fail(f"column '{name}' is not a partition column; partition columns: {names}", tok)
        self.used[col.name] = col
        return col


@dataclass(frozen=True)
class PartitionPredicate:
    """A parsed predicate: its text, its tree, the table's partition columns and those it
    names. `mask(files)` selects the files of a snapshot file batch."""

    text: str
    node: Node
    columns: tuple[PartitionColumn, ...]
    used: tuple[PartitionColumn, ...]

    def matches(self, partition_values: dict[str, str | None] | None) -> bool:
        """Whether one file's `partitionValues` (the log's strings, by physical key) is selected."""
        pv = partition_values or {}
        typed = {c.name: parse_partition_value(pv.get(c.key), c.type, c.name) for c in self.used}
        return evaluate(self.node, typed) is True

    def mask(self, files: pa.Table) -> pa.Array:
        """A boolean per row of `files` (a snapshot's file batch): evaluated once per distinct
        partition of the columns the predicate names, mapped back to the files with numpy."""
        inverse, parts = distinct_partitions(files, list(self.used))
        if not parts:
            return pa.array([], pa.bool_())
        selected = np.array([self.matches(p) for p in parts], dtype=bool)
        return pa.array(selected[inverse])


def parse_predicate(text: str, columns: list[PartitionColumn]) -> PartitionPredicate:
    """Parse `text` against the partition `columns` (raises InvalidPredicateError)."""
    if not isinstance(text, str):
        raise InvalidPredicateError(f"a predicate is text, not {type(text).__name__}")
    if len(text) > MAX_PREDICATE_CHARS:
        raise InvalidPredicateError(f"the predicate is longer than {MAX_PREDICATE_CHARS} characters")
    parser = _Parser(text, columns)
    node = parser.parse()
    return PartitionPredicate(text.strip(), node, tuple(columns), tuple(parser.used.values()))


def table_partition_columns(metadata: Metadata, protocol: Protocol) -> list[PartitionColumn]:
    """The partition columns of a table version, with their partitionValues keys and types."""
    return partition_columns(metadata, mapping_mode(metadata, protocol))


def partition_predicate(text: str, metadata: Metadata, protocol: Protocol) -> PartitionPredicate:
    """Parse `text` against a table version's partition columns; a table without partition
    columns has nothing a predicate could select."""
    columns = table_partition_columns(metadata, protocol)
    if not columns:
        raise InvalidPredicateError("the table has no partition columns: a predicate cannot select partitions")
    return parse_predicate(text, columns)
