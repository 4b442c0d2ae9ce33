"""History rows: a Commit row's column values from a commit's commitInfo and its timeline
row, and the prepared INSERT that stores them in bulk (a sync's writing, apart from its
reading and its bookkeeping)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import orjson
from django.db import connections, router, transaction
from django.db.models.constants import OnConflict

from tables.delta.history.columns import COLUMNS as HISTORY_COLUMNS
from tables.models import Commit
from tables.services.sync.stored_text import MAX_JSON_TEXT, cut_json, fits, fits_text, text_of


class Dumped:
    """A JSON value with its orjson text, written as it is to SQLite (no second serialization)."""

    __slots__ = ("text", "value")

    def __init__(self, value: Any, text: bytes) -> None:
        self.value, self.text = value, text

    def __eq__(self, other: object) -> bool:
        return self.value == (other.value if isinstance(other, Dumped) else other)

    __hash__ = None  # type: ignore[assignment]


# A Commit row's columns: those a sync's timeline and growth give, then those its commitInfo
# gives (built apart: a long log's are built by reader processes, see tables.services.sync.reads)
HEAD = (
    "table_id",
    "version",
    "timestamp",
    "timestamp_source",
    "in_commit_timestamp",
    "commit_info_timestamp",
    "file_modification_time",
    "adjusted",
    "num_files",
    "size_bytes",
)
# the commitInfo's columns, declared once (tables.delta.history.columns), then the whole commitInfo
INFO = (*(c.field for c in HISTORY_COLUMNS), "commit_info")
_READ = tuple((c.name, c.kind, c.limit) for c in HISTORY_COLUMNS)
_JSON_AT = tuple(i for i, n in enumerate(INFO) if Commit._meta.get_field(n).get_internal_type() == "JSONField")


def _text_json(value: Any) -> Any:
    """SQLite's text of a JSON column's value: orjson's, several times faster than the ORM's
    (json.dumps, still used for what orjson cannot write, an integer beyond 64 bits)."""
    if value is None:
        return None  # SQL NULL, as the ORM stores None in a nullable JSONField
    if type(value) is Dumped:
        return value.text.decode()
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value)


def info_values(info: dict[str, Any] | None, json_text: bool) -> list[Any]:
    """The values of the INFO columns a commit's commitInfo gives, bounded; with `json_text`
    (SQLite) its JSON columns already as text. Plain data: reader processes send them back."""
    info = info or {}
    try:
        text: bytes | None = orjson.dumps(info)
    except TypeError:
        text = None
    # a commitInfo within the tightest limit has every part within the looser ones too
    whole = fits_text(info, text, MAX_JSON_TEXT) if text is not None else fits(info, MAX_JSON_TEXT)

    get = info.get
    values: list[Any] = []
    add = values.append
    for name, kind, limit in _READ:  # a plain loop: a long log's sync runs it for every commit
        value = get(name)
        if kind == "text":
            add(value if type(value) is str and len(value) <= limit else text_of(value, limit))
        elif kind == "json":
            add(value if whole or value is None else cut_json(value))
        elif kind == "int":
            add(value if type(value) is int else None)  # not a bool
        else:
            add(value if isinstance(value, bool) else None)
    add((Dumped(info, text) if text is not None else info) if whole else cut_json(info, MAX_JSON_TEXT))
    if json_text:
        for i in _JSON_AT:
            values[i] = _text_json(values[i])
    return values


def head_values(timeline_row: dict[str, Any], table_id: int, sizes: dict[int, tuple[int, int]]) -> list[Any]:
    """The values of the HEAD columns: a timeline row's times and the growth in `sizes`."""
    v = timeline_row["version"]
    num_files, size_bytes = sizes.get(v, (None, None))
    return [
        table_id,
        v,
        timeline_row["timestamp"],
        timeline_row["source"],
        timeline_row["inCommitTimestamp"],
        timeline_row["commitInfoTimestamp"],
        timeline_row["fileModificationTime"],
        timeline_row["adjusted"],
        num_files,
        size_bytes,
    ]


class CommitInsert:
    """The prepared INSERT of Commit rows (HEAD then INFO values), leaving versions stored
    already as they are: SQLite takes hundreds of rows per statement, PostgreSQL a COPY
    (`copy_rows`), other databases one statement run for every row (executemany), instead
    of the ORM's model instances and statements of a few dozen rows each, which made most of
    a cold sync's time. `params` is plain Python; `run` uses the connection."""

    ROWS_PER_STATEMENT = 500  # SQLite's limit is 32,766 parameters (3.32 on)

    def __init__(self, alias: str | None = None) -> None:
        self.alias = alias or router.db_for_write(Commit)
        conn = connections[self.alias]
        named = [Commit._meta.get_field(n) for n in HEAD + INFO]
        # a column added to the model later, and not given here, gets the field's default
        others = [f for f in Commit._meta.concrete_fields if not f.primary_key and f not in named]
        self.fields = named + others
        self.tail = [f.get_db_prep_save(f.get_default(), conn) for f in others]
        qn = conn.ops.quote_name
        self.sqlite = conn.vendor == "sqlite"
        self.head_sql = (
            f"{conn.ops.insert_statement(on_conflict=OnConflict.IGNORE)} {qn(Commit._meta.db_table)} "
            f"({', '.join(qn(f.column) for f in self.fields)}) VALUES "
        )
        self.suffix = conn.ops.on_conflict_suffix_sql(self.fields, OnConflict.IGNORE, None, None)
        self.sql = self._statement(1)
        self._qmarks: dict[int, str] = {}
        self.ops = conn.ops

    @property
    def json_text(self) -> bool:
        """Whether info_values should give the JSON columns as text: SQLite stores them so."""
        return self.sqlite

    def _statement(self, rows: int) -> str:
        one = f"({', '.join(['%s'] * len(self.fields))})"
        sql = self.head_sql + ", ".join([one] * rows)
        return f"{sql} {self.suffix}" if self.suffix else sql

    def params(self, heads: list[list[Any]], infos: list[list[Any]]) -> list[list[Any]]:
        """Each row's parameters from its HEAD and INFO values (info_values with this insert's
        `json_text`)."""
        tail = self.tail
        if not self.json_text:
            adapt = self.ops.adapt_json_value
            for values in infos:
                for i in _JSON_AT:
                    value = values[i]
                    if value is not None:  # SQL NULL, as the ORM stores None in a nullable JSONField
                        values[i] = adapt(value.value if type(value) is Dumped else value, None)
        return (
            [h + i + tail for h, i in zip(heads, infos, strict=True)]
            if tail
            else [h + i for h, i in zip(heads, infos, strict=True)]
        )

    def run(self, params: list[list[Any]]) -> None:
        if not params:
            return
        conn = connections[self.alias]
        if copy_rows(conn, Commit._meta.db_table, [f.column for f in self.fields], params):
            return
        with conn.cursor() as cursor:
            if not self.sqlite:
                cursor.executemany(self.sql, params)
                return
            # SQLite's own cursor with its own placeholders: Django's wrapper would rewrite a
            # statement of thousands of them on every call
            raw = cursor.cursor
            step = self.ROWS_PER_STATEMENT
            whole = len(params) - len(params) % step
            if whole:
                rows = [[x for row in params[i : i + step] for x in row] for i in range(0, whole, step)]
                sqlite3.Cursor.executemany(raw, self._qmark(step), rows)
            if whole < len(params):
                rest = params[whole:]
                sqlite3.Cursor.execute(raw, self._qmark(len(rest)), [x for row in rest for x in row])

    def _qmark(self, rows: int) -> str:
        sql = self._qmarks.get(rows)
        if sql is None:
            sql = self._qmarks[rows] = self._statement(rows).replace("%s", "?")
        return sql


def copy_rows(conn: Any, table: str, columns: list[str], params: list[list[Any]] | list[tuple]) -> bool:
    """PostgreSQL's bulk path: the rows sent with COPY (psycopg's `cursor.copy`), one stream
    instead of a statement run per row. A row whose key is stored already (a sync rebuilding
    rows, two syncs overlapping) is left as it is, as the INSERT's ON CONFLICT DO NOTHING
    leaves it: the COPY into the table runs in a savepoint, and when it meets a stored key the
    rows are copied into a temporary table and inserted from it, skipping those. False (nothing
    done) on another database or driver."""
    if conn.vendor != "postgresql":
        return False
    qn = conn.ops.quote_name
    cols = ", ".join(qn(c) for c in columns)
    with conn.cursor() as cursor:
        raw = cursor.cursor
        if not hasattr(raw, "copy"):  # psycopg 2: no COPY of Python rows
            return False
        try:
            with transaction.atomic(using=conn.alias):
                _copy(raw, f"COPY {qn(table)} ({cols}) FROM STDIN", params)
            return True
        except conn.Database.IntegrityError:
            pass  # some rows are stored already: the staged path below skips them
        stage = qn(f"{table}_copy")
        with transaction.atomic(using=conn.alias):
            raw.execute(f"CREATE TEMPORARY TABLE IF NOT EXISTS {stage} AS SELECT {cols} FROM {qn(table)} WITH NO DATA")
            raw.execute(f"TRUNCATE {stage}")
            _copy(raw, f"COPY {stage} ({cols}) FROM STDIN", params)
            raw.execute(f"INSERT INTO {qn(table)} ({cols}) SELECT {cols} FROM {stage} ON CONFLICT DO NOTHING")
            raw.execute(f"TRUNCATE {stage}")
    return True


def _copy(raw: Any, sql: str, params: list[list[Any]] | list[tuple]) -> None:
    with raw.copy(sql) as copy:
        write = copy.write_row
        for row in params:
            write(row)
