"""Change data between versions on Spark: rows with _change_type, _commit_version, _commit_timestamp.

The core (`tables.delta.history.changes.plan_changes`) decides per version which files and rows
changed (cdc files where a commit has them, else add/remove with dataChange=true, deletion
vector differences for a path removed and re-added) and each version's commit timestamp
(In-Commit Timestamp from the enablement version on, file time before). Spark reads the
rows (`tables.spark.reading.read.scan`) and writes them, sorted, to Parquet.

Public API (plain arguments, plain results; no Django):
- `change_data(spark, location, start, end, out_dir, kept=())` -> {"path", "start", "end", "total",
  "counts": [{"version", "changeType", "rows"}] (every version of the range and change type
  present, ascending), "versions": [{"version", "timestamp", "timestampMs",
  "timestampSource", "operation", "source"}], "columns": [{name, type}]}. The rows are
  written under `<out_dir>/changes/` (replaced if present), ordered by version, then file and
  row position within the version; columns are the table's (end version's schema) followed by
  `_change_type` (string), `_commit_version` (long) and `_commit_timestamp` (timestamp, UTC).
  `kept`: the kept tables of pins (a pinned start or end of the range): a data, change data
  or deletion vector file VACUUM took from the table is read from the kept table that has it
  (`tables.spark.reading.kept`); the log is always the table's. "filesFromPin" counts them.
- `change_data_frame(spark, location, start, end=None)` -> (DataFrame, ChangePlan), unsorted,
  with the position columns `_dw_file` / `_dw_row_index` (for callers that aggregate).
- `read_page(path, offset, limit)`: a page of the written result, with pyarrow only (also
  `tables.spark.results.read_page`, which the web process should import: no pyspark there).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tables.delta.errors import at_version
from tables.delta.history.changes import ChangePlan, plan_changes
from tables.delta.storage.api import Storage
from tables.spark.reading.kept import WithKept, with_kept
from tables.spark.reading.read import FILE_COL, ROW_COL, Layout, ScanEntry, check_readable, input_bytes, scan
from tables.spark.results import columns_of, read_page, written_columns

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["CHANGE_COLUMNS", "change_data", "change_data_frame", "read_page", "write_on_driver", "write_sorted"]

CHANGE_COLUMNS = (("_change_type", "string"), ("_commit_version", "long"), ("_commit_timestamp", "timestamp"))
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ENTRY_KIND = "__dw_entry_change_type"


def ms_to_datetime(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)


def change_data_frame(
    spark: SparkSession,
    location: str | Storage,
    start: int,
    end: int | None = None,
    inputs: list[str] | None = None,
    kept: list[str] | tuple[str, ...] = (),
) -> tuple[DataFrame, ChangePlan]:
    storage = with_kept(location, kept)
    plan = plan_changes(storage, start, end)
    with at_version(f"versions {plan.start} to {plan.end}"):
        return _change_frame(spark, storage, plan, inputs)


def _change_frame(
    spark: SparkSession, storage: Storage, plan: ChangePlan, inputs: list[str] | None = None
) -> tuple[DataFrame, ChangePlan]:
    from pyspark.sql import functions as F

    for protocol in [*plan.protocols, plan.protocol]:
        check_readable(protocol, f"{storage.display()} between versions {plan.start} and {plan.end}")
    layout = Layout.of(plan.metadata, plan.protocol)
    entries, any_cdc = [], False
    for e in plan.entries:
        when = ms_to_datetime(plan.timestamp(e.version))
        # a cdc file's rows carry their own _change_type; other files' rows get the entry's
        kind = None if e.cdc else e.change_type
        entries.append(ScanEntry(e.path, e.partition_values, (kind, e.version, when), e.rows, e.only))
        any_cdc = any_cdc or e.cdc
    # every file of the range in one scan (one listing, one entries table, one job): data
    # files have no _change_type column (a reserved name in tables with change data), so
    # Spark reads it as null there and the entry's change type fills it in
    extra = [(_ENTRY_KIND, "string"), *CHANGE_COLUMNS[1:]]
    df = scan(
        spark,
        storage,
        layout,
        entries,
        extra=extra,
        file_columns=[CHANGE_COLUMNS[0]] if any_cdc else [],
        with_position=True,
        inputs=inputs,
    )
    kind = F.coalesce(F.col("_change_type"), F.col(_ENTRY_KIND)) if any_cdc else F.col(_ENTRY_KIND)
    names = [f["name"] for f in plan.metadata.schema.get("fields", [])]
    # one select (each DataFrame step is analysed by the JVM as it is made)
    return df.select(*names, kind.alias("_change_type"), *(n for n, _t in CHANGE_COLUMNS[1:]), FILE_COL, ROW_COL), plan


def write_sorted(df: DataFrame, path: Path, order: list[Any], drop: tuple[str, ...] = (), single: bool = False) -> None:
    """Sort, drop the sort-only columns, and write a result as Parquet: part files in
    partition order hold the rows in sort order. Timestamps are written as TIMESTAMP_MICROS
    (pyarrow reads them back as UTC instants, timestamp_ntz as local times).

    `single` (for small results) sorts and writes in one task, one part file: a global sort
    first runs the whole query to sample its range boundaries, then again to shuffle, three
    jobs where one is enough."""
    spark = df.sparkSession
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    ordered = df.coalesce(1).sortWithinPartitions(*order) if single else df.orderBy(*order)
    ordered.drop(*drop).write.mode("overwrite").parquet(str(path))


def write_on_driver(df: DataFrame, path: Path, order: list[str], drop: tuple[str, ...] = ()) -> pa.Table:
    """Bring a small result to the driver as Arrow, sort it there and write it with pyarrow as
    one part file (replacing `path`); returns the written table. One Spark job whose scan runs
    on every core, without the single task and the output commit protocol of a Spark write:
    half the time of a 100-commit change-data job. `order` names columns that are never null
    or NaN (versions, positions, change types), where Arrow's order and Spark's agree.
    Timestamps are written as microseconds (UTC instants; timestamp_ntz as local times), as
    `write_sorted` writes them."""
    table = df.toArrow()
    table = table.sort_by([(c, "ascending") for c in order]).drop_columns(list(drop))
    write_part(table, path)
    return table


def write_part(table: pa.Table, path: Path) -> None:
    """A result brought to the driver written as `path`'s one part file (replacing `path`)."""
    import shutil

    import pyarrow.parquet as pq

    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    pq.write_table(table, path / "part-00000.parquet")


# Results read from at most this many bytes of data files are sorted and written on the
# driver (write_on_driver): its Arrow copy of the rows is one to a few times this size (10,000
# commits' small files: 25 MB read, 26 MB of Arrow; 1 s less than a one-task Spark write).
DRIVER_BYTES = 32 << 20
# Inputs up to this many bytes of data files are sorted and written by one task (write_sorted);
# above SINGLE_TASK_FILES files they are still read in parallel and brought to that task by a
# shuffle (one task opening a thousand small files one after the other is the slower way).
SINGLE_TASK_BYTES = 64 << 20
SINGLE_TASK_FILES = 128


def change_data(
    spark: SparkSession,
    location: str | Storage,
    start: int,
    end: int | None,
    out_dir: str | Path,
    kept: list[str] | tuple[str, ...] = (),
) -> dict[str, Any]:
    """Write the changes of versions start..end under out_dir (module contract)."""
    files: list[str] = []
    storage = with_kept(location, kept)
    df, plan = change_data_frame(spark, storage, start, end, inputs=files)
    path = Path(out_dir) / "changes"
    order = ["_commit_version", FILE_COL, ROW_COL, "_change_type"]
    size = input_bytes(files)
    if size is not None and size <= DRIVER_BYTES:
        table = write_on_driver(df, path, order, drop=(FILE_COL, ROW_COL))
        rows = _counts(table)
        columns = columns_of(table.schema)
    else:
        single = size is not None and size <= SINGLE_TASK_BYTES
        if single and len(files) > SINGLE_TASK_FILES:
            df = df.repartition(1)
        write_sorted(df, path, order, drop=(FILE_COL, ROW_COL), single=single)
        rows, columns = _written_counts(path), written_columns(path)
    rows.sort(key=_count_order)
    return {
        "path": str(path),
        "start": plan.start,
        "end": plan.end,
        "total": sum(r["rows"] for r in rows),
        "counts": rows,
        "versions": [v.to_dict() for v in plan.versions],
        "columns": columns,
        **({"filesFromPin": storage.from_kept} if isinstance(storage, WithKept) else {}),
    }


def _written_counts(path: Path) -> list[dict[str, Any]]:
    """Rows per (version, change type) of the written result, counted by pyarrow from its two
    columns: a second Spark job (read back, group, collect) cost more than the whole count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tables.spark.results import part_files

    tables = [pq.read_table(f, columns=["_commit_version", "_change_type"]) for f in part_files(path)]
    return _counts(pa.concat_tables(tables)) if tables else []


def _counts(table: pa.Table) -> list[dict[str, Any]]:
    counted = table.group_by(["_commit_version", "_change_type"]).aggregate([([], "count_all")])
    return [
        {"version": v, "changeType": t, "rows": n}
        for v, t, n in zip(
            counted.column("_commit_version").to_pylist(),
            counted.column("_change_type").to_pylist(),
            counted.column("count_all").to_pylist(),
            strict=True,
        )
    ]


def _count_order(row: dict[str, Any]) -> tuple[int, int]:
    types = ("delete", "update_preimage", "update_postimage", "insert")
    kind = row["changeType"]
    return row["version"], types.index(kind) if kind in types else len(types)
