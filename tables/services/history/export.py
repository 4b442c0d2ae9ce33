"""The history's order, its columns and its export: a filtered history streamed as CSV or
Parquet, row by row from the database (a 100,000-commit table never sits in memory).

The history tab and the API's export both call these, on the one query of tables.services.history.query.
The CSV and Parquet files carry DESCRIBE HISTORY's column names; timestamps are ISO-8601 UTC
text in CSV and timestamp[ms, UTC] in Parquet, JSON columns (operationParameters,
operationMetrics, job, notebook) JSON text in both. A CSV text cell that a spreadsheet would
read as a formula (starting with = + - @, a tab or a carriage return) gets a leading single
quote, as OWASP recommends for CSV injection: a log's strings are anyone's to write.

Files removed outside the log (the sync's FileRemovalEvent rows) are exported as a file of
their own beside the history, one row per event (`removals_response`, docs/api.md).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast
from django.http import StreamingHttpResponse

from tables.delta.history.columns import COLUMNS as HISTORY_COLUMNS
from tables.delta.history.columns import SHOWN_COLUMNS
from tables.delta.history.timestamps import format_ms
from tables.models import Commit, FileRemovalEvent, Table

# sort key in the URL -> the ORDER BY; the version breaks ties so paging is stable. The
# version, the time, then each declared column with a sort key.
SORTS: dict[str, tuple[str, ...]] = {
    "-version": ("-version",),
    "version": ("version",),
    "-timestamp": ("-timestamp", "-version"),
    "timestamp": ("timestamp", "version"),
}
SORT_LABELS = {
    "-version": "version, newest first",
    "version": "version, oldest first",
    "-timestamp": "time, newest first",
    "timestamp": "time, oldest first",
}
for _c in HISTORY_COLUMNS:
    if _c.sort:
        _up, _down = ("A to Z", "Z to A") if _c.kind == "text" else ("lowest first", "highest first")
        SORTS[_c.sort], SORTS["-" + _c.sort] = (_c.field, "-version"), ("-" + _c.field, "-version")
        SORT_LABELS[_c.sort], SORT_LABELS["-" + _c.sort] = f"{_c.sort}, {_up}", f"{_c.sort}, {_down}"
DEFAULT_SORT = "-version"

# the history tab's columns a reader may hide (version is always shown): readable and timestamp,
# then the declared columns the tab shows
COLUMNS: dict[str, str] = {n: n for n in ("readable", "timestamp", *(c.name for c in SHOWN_COLUMNS))}

CHUNK_ROWS = 2000  # rows per database fetch and per Parquet row group


def sort_of(raw: str | None) -> str:
    """The sort named in the URL, or the default (newest version first) for anything else."""
    return raw if raw in SORTS else DEFAULT_SORT


def sorted_history(qs: QuerySet[Commit], sort: str) -> QuerySet[Commit]:
    return qs.order_by(*SORTS[sort_of(sort)])


FIRST_COLUMNS = ["readable", "timestamp", *(c.name for c in SHOWN_COLUMNS if c.at_first)]


def columns_of(raw: list[str]) -> list[str]:
    """The chosen columns in the table's order; the most read (`Column.at_first`) when none (or
    none known) is chosen."""
    chosen = [c for c in COLUMNS if c in set(raw)]
    return chosen or list(FIRST_COLUMNS)


# --- export ---------------------------------------------------------------------------------

# the export's columns: the version and its times, then DESCRIBE HISTORY's declared columns
_TIME_COLUMNS = (
    ("version", "version", pa.int64()),
    ("timestamp", "timestamp", pa.timestamp("ms", tz="UTC")),
    ("timestampSource", "timestamp_source", pa.string()),
    ("inCommitTimestamp", "in_commit_timestamp", pa.timestamp("ms", tz="UTC")),
    ("fileModificationTime", "file_modification_time", pa.timestamp("ms", tz="UTC")),
)
_ARROW = {"text": pa.string(), "json": pa.string(), "int": pa.int64(), "bool": pa.bool_()}  # JSON as its text
FIELDS = (*(f for _, f, _ in _TIME_COLUMNS), *(c.field for c in HISTORY_COLUMNS))
NAMES = (*(n for n, _, _ in _TIME_COLUMNS), *(c.name for c in HISTORY_COLUMNS))
_TIMES = {"timestamp", "in_commit_timestamp", "file_modification_time"}
_JSON = {c.field for c in HISTORY_COLUMNS if c.kind == "json"}
SCHEMA = pa.schema([(n, t) for n, _, t in _TIME_COLUMNS] + [(c.name, _ARROW[c.kind]) for c in HISTORY_COLUMNS])


def _rows(qs: QuerySet[Commit]) -> Iterator[tuple[Any, ...]]:
    """The rows as tuples of FIELDS, fetched CHUNK_ROWS at a time (a server-side cursor where
    the database has one). JSON columns come as the database's JSON text: decoding and
    encoding them again was half the time of an export."""
    columns = [Cast(f, TextField()) if f in _JSON else f for f in FIELDS]
    yield from qs.values_list(*columns).iterator(chunk_size=CHUNK_ROWS)


class _Echo:
    """csv.writer's file: hands back each line instead of keeping it."""

    def write(self, value: str) -> str:
        return value


def csv_stream(qs: QuerySet[Commit]) -> Iterator[str]:
    """The history as CSV text: the header, then CHUNK_ROWS lines at a time (one write per
    line would make a 100,000-commit download 100,000 tiny writes)."""
    lines: list[str] = []
    for line in _csv_lines(qs):
        lines.append(line)
        if len(lines) >= CHUNK_ROWS:
            yield "".join(lines)
            lines = []
    if lines:
        yield "".join(lines)


_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: str) -> str:
    """A text cell as no spreadsheet will evaluate it."""
    return "'" + value if value.startswith(_FORMULA_STARTS) else value


def _csv_lines(qs: QuerySet[Commit]) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow(NAMES)
    for row in _rows(qs):
        out = []
        for name, value in zip(FIELDS, row, strict=True):
            if name in _TIMES:
                out.append(format_ms(value) if value is not None else "")
            elif value is None:
                out.append("")
            elif isinstance(value, str):
                out.append(csv_cell(value))
            else:
                out.append(value)
        yield writer.writerow(out)


class _Chunks:
    """Parquet's output file: keeps what was written until the generator takes it."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        data, self.parts = b"".join(self.parts), []
        return data


def _batch(rows: list[tuple[Any, ...]]) -> pa.RecordBatch:
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(FIELDS)
    arrays = [pa.array(list(values), type=field.type) for field, values in zip(SCHEMA, columns, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


def parquet_stream(qs: QuerySet[Commit]) -> Iterator[bytes]:
    """The history as a Parquet file, one row group per CHUNK_ROWS commits, each sent as soon
    as it is written."""
    sink = _Chunks()
    writer = pq.ParquetWriter(pa.PythonFile(sink, mode="w"), SCHEMA, compression="zstd")
    rows: list[tuple[Any, ...]] = []
    for row in _rows(qs):
        rows.append(row)
        if len(rows) >= CHUNK_ROWS:
            writer.write_batch(_batch(rows))
            rows = []
            yield sink.take()
    if rows:
        writer.write_batch(_batch(rows))
    writer.close()
    yield sink.take()


FORMATS = {
    "csv": ("text/csv; charset=utf-8", csv_stream),
    "parquet": ("application/vnd.apache.parquet", parquet_stream),
}


# --- files removed outside the log: a file of their own ---------------------------------------
# One row per FileRemovalEvent, newest first, beside the history (its own schema: a history
# row is a commit, an event is not). Versions that became unreadable are `unreadableFrom`,
# `unreadableTo`, `unreadableCount` and `unreadableVersions` ("0..4,7"); `paths` is the JSON
# text of the first vanished paths.

REMOVAL_COLUMNS: tuple[tuple[str, str, pa.DataType], ...] = (
    ("noticedAt", "noticed_at", pa.timestamp("ms", tz="UTC")),
    ("version", "version", pa.int64()),
    ("previousVersion", "previous_version", pa.int64()),
    ("files", "files", pa.int64()),
    ("bytes", "bytes", pa.int64()),
    ("unreadableFrom", "unreadable_from", pa.int64()),
    ("unreadableTo", "unreadable_to", pa.int64()),
    ("unreadableCount", "unreadable_count", pa.int64()),
    ("unreadableVersions", "unreadable", pa.string()),
    ("vacuumStartVersion", "vacuum_start_version", pa.int64()),
    ("vacuumEndVersion", "vacuum_end_version", pa.int64()),
    ("vacuumUser", "vacuum_user", pa.string()),
    ("vacuumTimestamp", "vacuum_timestamp", pa.timestamp("ms", tz="UTC")),
    ("vacuumDeletedFiles", "vacuum_deleted_files", pa.int64()),
    ("complete", "complete", pa.bool_()),
    ("exact", "exact", pa.bool_()),
    ("paths", "paths", pa.string()),
)
REMOVAL_SCHEMA = pa.schema([(n, t) for n, _f, t in REMOVAL_COLUMNS])


def ranges_text(ranges: list[list[int]] | None) -> str:
    """[[0, 4], [7, 7]] -> "0..4,7"."""
    return ",".join(f"{a}..{b}" if a != b else f"{a}" for a, b in ranges or [])


def _removal_rows(qs: QuerySet[FileRemovalEvent]) -> Iterator[dict[str, Any]]:
    for e in qs.order_by("-version", "-id").iterator(chunk_size=CHUNK_ROWS):
        row = {name: getattr(e, f) for name, f, _t in REMOVAL_COLUMNS}
        row["noticedAt"] = int(e.noticed_at.timestamp() * 1000)
        row["unreadableVersions"] = ranges_text(e.unreadable)
        row["paths"] = json.dumps(e.paths or [])
        yield row


def removals_csv(qs: QuerySet[FileRemovalEvent]) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow([n for n, _f, _t in REMOVAL_COLUMNS])
    for row in _removal_rows(qs):
        out: list[Any] = []
        for name, _f, kind in REMOVAL_COLUMNS:
            value = row[name]
            if value is None:
                out.append("")
            elif pa.types.is_timestamp(kind):
                out.append(format_ms(value))
            elif isinstance(value, str):
                out.append(csv_cell(value))
            else:
                out.append(str(value).lower() if isinstance(value, bool) else value)
        yield writer.writerow(out)


def removals_parquet(qs: QuerySet[FileRemovalEvent]) -> Iterator[bytes]:
    rows = list(_removal_rows(qs))  # one per event noticed: few
    sink = _Chunks()
    writer = pq.ParquetWriter(pa.PythonFile(sink, mode="w"), REMOVAL_SCHEMA, compression="zstd")
    writer.write_table(pa.Table.from_pylist(rows, schema=REMOVAL_SCHEMA))
    writer.close()
    yield sink.take()


REMOVAL_FORMATS = {
    "csv": ("text/csv; charset=utf-8", removals_csv),
    "parquet": ("application/vnd.apache.parquet", removals_parquet),
}


def removals_response(table: Table, qs: QuerySet[FileRemovalEvent], fmt: str) -> StreamingHttpResponse:
    """The table's file-removal events as a download (csv or parquet), newest first."""
    content_type, stream = REMOVAL_FORMATS[fmt]
    resp = StreamingHttpResponse(stream(qs), content_type=content_type)
    resp["Content-Disposition"] = f'attachment; filename="{table.slug}-file-removals.{fmt}"'
    resp["Cache-Control"] = "private, no-store"
    return resp


def export_response(table: Table, qs: QuerySet[Commit], fmt: str) -> StreamingHttpResponse:
    """The filtered, sorted history as a download, streamed; fmt is csv or parquet."""
    content_type, stream = FORMATS[fmt]
    resp = StreamingHttpResponse(stream(qs), content_type=content_type)
    resp["Content-Disposition"] = f'attachment; filename="{table.slug}-history.{fmt}"'
    resp["Cache-Control"] = "private, no-store"
    return resp
