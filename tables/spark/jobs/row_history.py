"""The history of one row on Spark: the core's plan, the pruned files read by Spark.

The core (`tables.delta.history.row_history`) reads the log and decides everything that does
not need the data: the range's versions, their users and commit timestamps, the change
entries of each version (`snapshot.changes.plan_changes`) and which files could hold the key
(partition values, statistics), all in `plan_row_history`. Spark reads only those files
(`tables.spark.reading.read.scan`: every path resolved and confined by the storage before Spark sees
it, column mapping by name or field id, partition values from the log), in one job, keeps the
rows whose key columns equal the key, and brings them to the driver with each row's file and
index (`_metadata.row_index`). The core's `replay` then applies the deletion vectors and row
selections and turns the rows into events: the same code as the pyarrow path, so the answer
is the core's (`row_history`) with the same files read and skipped.

Rows with the key are few: with a key that names one row, a data file holds it at most once
and a change data file at most twice (pre- and post-image). More than MATCH_ROWS_PER_FILE per
file read means the key is not unique; the job stops before bringing them all to the driver.

Public API (plain arguments, plain results; no Django):
- `write_row_history(spark, location, key, start, end, out_dir, progress=None, kept=())` -> {"path",
  "key", "from", "to", "total", "counts": {"insert", "update", "delete"}, "files": {"read",
  "skipped"}, "columns": [{name, type}]}. The events are written under
  `<out_dir>/rowhistory/` (replaced if present), newest first, one row each: `version` (long),
  `change` (insert | update | delete), `before` and `after` (the row as JSON text, the
  core's JSON-safe values; null for an insert's before and a delete's after), `changed`
  (array of column names), `timestamp` (ISO-8601 UTC text, as `delta row-history --json`) and
  `user`. `progress(stage)`, when given, is told when the plan is made and the files are read.
  `kept`: the kept tables of pins in the range: the files (data, change data, deletion
  vectors) of versions VACUUM took from the table are read from the kept table that has them
  (`tables.spark.reading.kept`); the plan is the table's log's.
- `row_history_on_spark(spark, location, key, start, end, progress=None, kept=())` -> the core's
  RowHistory.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tables.delta.errors import InvalidColumnsError, at_version
from tables.delta.history.row_history.key import key_holds
from tables.delta.history.row_history.plan import RowPlan, plan_row_history
from tables.delta.history.row_history.pruning import FileRead
from tables.delta.history.row_history.reader import Match, file_partition_values, logical_value
from tables.delta.history.row_history.replay import RowHistory, replay
from tables.delta.json_values import json_value
from tables.delta.storage.api import Storage
from tables.spark.reading.kept import with_kept
from tables.spark.reading.names import quote_column
from tables.spark.reading.read import ROW_COL, Layout, ScanEntry, check_readable, scan
from tables.spark.results import columns_of

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

__all__ = ["EVENT_COLUMNS", "row_history_on_spark", "write_row_history"]

READ_COL = "__dw_row_history_file"  # the index of the row's file in the plan's reads
CHANGE_TYPE = "_change_type"
MATCH_ROWS_PER_FILE = 4
MATCH_ROWS_MIN = 1000
EVENT_COLUMNS = ("version", "change", "before", "after", "changed", "timestamp", "user")


def read_matches(spark: SparkSession, plan: RowPlan) -> dict[str, list[Match]]:
    """The rows with the key of every file the plan reads (canonical path -> rows in file
    order), read by Spark in one job; the exact key check is the core's."""
    from pyspark.sql import functions as F

    files = list(plan.reads.values())
    if not files:
        return {}
    for protocol in [*plan.protocols, plan.protocol]:
        check_readable(protocol, f"{plan.storage.display()} between versions {plan.start} and {plan.end}")
    layout = Layout.of(plan.metadata, plan.protocol)
    any_cdc = any(f.cdc for f in files)
    entries = [
        ScanEntry(f.path, None if f.partition_values is None else dict(f.partition_values), (i,))
        for i, f in enumerate(files)
    ]
    df = scan(
        spark,
        plan.storage,
        layout,
        entries,
        extra=[(READ_COL, "integer")],
        file_columns=[(CHANGE_TYPE, "string")] if any_cdc else [],
        with_position=True,
    )
    # partition key columns were compared with the log's values when the files were pruned;
    # the data columns are compared here, so that only the key's rows leave the executors
    cond = None
    for k in plan.keys:
        if k.partition is None:
            c = F.col(quote_column(k.name)) == F.lit(k.value)
            cond = c if cond is None else cond & c
    if cond is not None:
        df = df.where(cond)
    limit = max(MATCH_ROWS_MIN, MATCH_ROWS_PER_FILE * len(files))
    names = [f["name"] for f in plan.layout.fields]
    wanted = [*names, READ_COL, ROW_COL, *([CHANGE_TYPE] if any_cdc else [])]
    table = df.select(*[quote_column(n) for n in wanted]).limit(limit + 1).toArrow()
    if table.num_rows > limit:
        raise InvalidColumnsError(
            f"{plan.storage.display()}: key {_key_text(plan)} is not unique: more than {limit} rows have it "
            f"in the {len(files)} file(s) read; name more key columns",
            rows=table.num_rows,
        )
    return _matches(plan, files, table)


def _key_text(plan: RowPlan) -> str:
    return ", ".join(f"{k.name}={json_value(k.value)}" for k in plan.keys)


def _matches(plan: RowPlan, files: list[FileRead], table: pa.Table) -> dict[str, list[Match]]:
    """Spark's rows as the core's matches: values under logical names, partition columns
    from the log as the core types them, kept only where the core's key check holds."""
    fields = plan.layout.fields
    parts = [file_partition_values(plan.layout, f.partition_values) for f in files]
    out: dict[str, list[Match]] = {}
    for r in table.to_pylist():
        i = r[READ_COL]
        file, own = files[i], parts[i]
        row = {
            f["name"]: own[f["name"]] if f["name"] in own else logical_value(r[f["name"]], f["type"], "none")
            for f in fields
        }
        if key_holds(row, plan.keys):
            kind = r.get(CHANGE_TYPE) if file.cdc else None
            out.setdefault(file.ident, []).append(Match(int(r[ROW_COL]), row, kind))
    for found in out.values():
        found.sort(key=lambda m: m.index)
    return out


def row_history_on_spark(
    spark: SparkSession,
    location: str | Storage,
    key: Mapping[str, Any] | Iterable[tuple[str, Any]],
    start: int | None = None,
    end: int | None = None,
    progress: Callable[[str], None] | None = None,
    kept: list[str] | tuple[str, ...] = (),
) -> RowHistory:
    """The history of the row with `key` in versions start..end, read on Spark (module contract)."""
    plan = plan_row_history(with_kept(location, kept), key, start, end)
    if progress is not None:
        progress(f"reading {plan.files_read} of {len(plan.seen)} file(s) on Spark ({plan.files_skipped} pruned)")
    with at_version(f"versions {plan.start} to {plan.end}"):
        matches = read_matches(spark, plan)
    return replay(plan, lambda f: matches.get(f.ident, []))


def events_table(history: RowHistory) -> pa.Table:
    """The events as the written result's rows, newest first."""
    import pyarrow as pa

    def text(row: Any) -> str | None:
        return None if row is None else json.dumps(row, ensure_ascii=False, separators=(",", ":"))

    events = [e.to_dict() for e in reversed(history.events)]  # JSON-safe values, the core's
    rows = {
        "version": pa.array([e["version"] for e in events], pa.int64()),
        "change": pa.array([e["change"] for e in events], pa.string()),
        "before": pa.array([text(e["before"]) for e in events], pa.string()),
        "after": pa.array([text(e["after"]) for e in events], pa.string()),
        "changed": pa.array([e["changed"] for e in events], pa.list_(pa.string())),
        "timestamp": pa.array([e["timestamp"] for e in events], pa.string()),
        "user": pa.array([e["user"] for e in events], pa.string()),
    }
    return pa.table(rows)


def write_row_history(
    spark: SparkSession,
    location: str | Storage,
    key: Mapping[str, Any] | Iterable[tuple[str, Any]],
    start: int | None,
    end: int | None,
    out_dir: str | Path,
    progress: Callable[[str], None] | None = None,
    kept: list[str] | tuple[str, ...] = (),
) -> dict[str, Any]:
    """Write the row's events under out_dir (module contract)."""
    import pyarrow.parquet as pq

    history = row_history_on_spark(spark, location, key, start, end, progress, kept)
    table = events_table(history)
    path = Path(out_dir) / "rowhistory"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    pq.write_table(table, path / "part-00000.parquet")
    counts = {kind: 0 for kind in ("insert", "update", "delete")}
    for e in history.events:
        counts[e.change] += 1
    return {
        "path": str(path),
        "key": json_value(history.key),
        "from": history.start,
        "to": history.end,
        "total": len(history.events),
        "counts": counts,
        "files": {"read": history.files_read, "skipped": history.files_skipped},
        "columns": columns_of(table.schema),
    }
