"""The history's order, its columns and its export: a filtered history streamed as CSV or
Parquet, row by row from the database (a 100,000-commit table never sits in memory).

The history tab and the API's export both call these, on the one query of tables.history.
The CSV and Parquet files carry DESCRIBE HISTORY's column names; timestamps are ISO-8601 UTC
text in CSV and timestamp[ms, UTC] in Parquet, JSON columns (operationParameters,
operationMetrics, job, notebook) JSON text in both. A CSV text cell that a spreadsheet would
read as a formula (starting with = + - @, a tab or a carriage return) gets a leading single
quote, as OWASP recommends for CSV injection: a log's strings are anyone's to write.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast
from django.http import StreamingHttpResponse

from tables.delta.history import HISTORY_FIELDS
from tables.delta.timestamps import format_ms
from tables.models import Commit, Table

# sort key in the URL -> the ORDER BY; the version breaks ties so paging is stable
SORTS: dict[str, tuple[str, ...]] = {
    "-version": ("-version",),
    "version": ("version",),
    "-timestamp": ("-timestamp", "-version"),
    "timestamp": ("timestamp", "version"),
    "operation": ("operation", "-version"),
    "-operation": ("-operation", "-version"),
    "user": ("user_name", "-version"),
    "-user": ("-user_name", "-version"),
}
DEFAULT_SORT = "-version"
SORT_LABELS = {
    "-version": "version, newest first",
    "version": "version, oldest first",
    "-timestamp": "time, newest first",
    "timestamp": "time, oldest first",
    "operation": "operation, A to Z",
    "-operation": "operation, Z to A",
    "user": "user, A to Z",
    "-user": "user, Z to A",
}

# the history tab's columns a reader may hide (version is always shown)
COLUMNS: dict[str, str] = {
    "readable": "readable",
    "timestamp": "timestamp",
    "userName": "userName",
    "operation": "operation",
    "operationParameters": "operationParameters",
    "readVersion": "readVersion",
    "isolationLevel": "isolationLevel",
    "isBlindAppend": "isBlindAppend",
    "operationMetrics": "operationMetrics",
    "userMetadata": "userMetadata",
    "engineInfo": "engineInfo",
}

CHUNK_ROWS = 2000  # rows per database fetch and per Parquet row group


def sort_of(raw: str | None) -> str:
    """The sort named in the URL, or the default (newest version first) for anything else."""
    return raw if raw in SORTS else DEFAULT_SORT


def sorted_history(qs: QuerySet[Commit], sort: str) -> QuerySet[Commit]:
    return qs.order_by(*SORTS[sort_of(sort)])


def columns_of(raw: list[str]) -> list[str]:
    """The chosen columns in the table's order; all of them when none (or none known) is chosen."""
    chosen = [c for c in COLUMNS if c in set(raw)]
    return chosen or list(COLUMNS)


# --- export ---------------------------------------------------------------------------------

FIELDS = (
    "version",
    "timestamp",
    "timestamp_source",
    "in_commit_timestamp",
    "file_modification_time",
    "user_id",
    "user_name",
    "operation",
    "operation_parameters",
    "job",
    "notebook",
    "cluster_id",
    "read_version",
    "isolation_level",
    "is_blind_append",
    "operation_metrics",
    "user_metadata",
    "engine_info",
)
NAMES = ("version", "timestamp", "timestampSource", "inCommitTimestamp", "fileModificationTime", *HISTORY_FIELDS)
_TIMES = {"timestamp", "in_commit_timestamp", "file_modification_time"}
_JSON = {"operation_parameters", "operation_metrics", "job", "notebook"}

SCHEMA = pa.schema(
    [
        ("version", pa.int64()),
        ("timestamp", pa.timestamp("ms", tz="UTC")),
        ("timestampSource", pa.string()),
        ("inCommitTimestamp", pa.timestamp("ms", tz="UTC")),
        ("fileModificationTime", pa.timestamp("ms", tz="UTC")),
        ("userId", pa.string()),
        ("userName", pa.string()),
        ("operation", pa.string()),
        ("operationParameters", pa.string()),
        ("job", pa.string()),
        ("notebook", pa.string()),
        ("clusterId", pa.string()),
        ("readVersion", pa.int64()),
        ("isolationLevel", pa.string()),
        ("isBlindAppend", pa.bool_()),
        ("operationMetrics", pa.string()),
        ("userMetadata", pa.string()),
        ("engineInfo", pa.string()),
    ]
)


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


def export_response(table: Table, qs: QuerySet[Commit], fmt: str) -> StreamingHttpResponse:
    """The filtered, sorted history as a download, streamed; fmt is csv or parquet."""
    content_type, stream = FORMATS[fmt]
    resp = StreamingHttpResponse(stream(qs), content_type=content_type)
    resp["Content-Disposition"] = f'attachment; filename="{table.slug}-history.{fmt}"'
    resp["Cache-Control"] = "private, no-store"
    return resp
