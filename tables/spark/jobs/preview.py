"""The cached preview of a version on Spark: its first rows written as Parquet, and its row count.

Public API (plain arguments, plain results; no Django):
- `write_preview(spark, location, version, out_dir, limit=100)` -> {"path", "version",
  "total", "rows", "limit", "columns": [{name, type}]}. The first `limit` rows of the version
  in (file, row index) order (the order `read.preview_rows` pages in) are written under
  `<out_dir>/preview/` (replaced if present); `total` is the version's row count and `rows`
  how many were written. The web process pages the file with `results.read_page`.

Only the files the first rows come from are read. For a table on local storage the row count
of every file is in its Parquet footer (less the rows its deletion vector drops): the files,
in Spark's file order, are taken until they hold `limit` rows, and Spark reads just those in
one job; the total is the sum of the footers' counts, not a second job over every file. An
object-store table's files are fetched to the driver anyway, and read as a whole.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tables.delta.errors import at_version
from tables.delta.snapshot.state import load_snapshot
from tables.delta.storage.boundary import Storage, as_storage
from tables.spark.jobs.changes import write_on_driver
from tables.spark.reading.read import (
    FILE_COL,
    ROW_COL,
    Layout,
    ScanEntry,
    _read_files,
    check_readable,
    local_file,
    scan,
    version_entries,
)
from tables.spark.results import columns_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PREVIEW_ROWS = 100
FOOTER_THREADS = 8


def _footer_rows(files: list[Path]) -> list[int]:
    """Rows of each Parquet file, from its footer (files in parallel: each is an open and a
    small read)."""
    import pyarrow.parquet as pq

    with ThreadPoolExecutor(max_workers=min(FOOTER_THREADS, max(1, len(files)))) as pool:
        return list(pool.map(lambda f: pq.read_metadata(f).num_rows, files))


def first_files(
    spark: SparkSession, storage: Storage, entries: list[ScanEntry], limit: int
) -> tuple[list[ScanEntry], int]:
    """The entries, in Spark's file order, whose rows hold the first `limit` rows of the
    version, and the version's row count (footers less deletion vectors)."""
    files = [local_file(storage, e.path) for e in entries]
    if not files:
        return [], 0
    # Spark's names of the files (its order), listed on the driver without reading them
    _df, uris = _read_files(spark, sorted(set(files)), {"type": "struct", "fields": []}, storage.display())
    live = [n - (len(e.rows) if e.rows is not None else 0) for n, e in zip(_footer_rows(files), entries, strict=True)]
    order = sorted(range(len(entries)), key=lambda i: uris[files[i]])
    picked, held = [], 0
    for i in order:
        if held >= limit:
            break
        picked.append(entries[i])
        held += live[i]
    return picked, sum(live)


def write_preview(
    spark: SparkSession, location: str | Storage, version: int, out_dir: str | Path, limit: int = PREVIEW_ROWS
) -> dict[str, Any]:
    """Write the first `limit` rows of `version` under out_dir (module contract)."""
    storage = as_storage(location)
    limit = max(0, int(limit))
    snap = load_snapshot(storage, version)
    check_readable(snap.protocol, f"{storage.display()} at version {snap.version}")
    layout = Layout.of(snap.metadata, snap.protocol)
    total: int | None = None
    with at_version(f"version {snap.version}"):
        entries = version_entries(storage, snap)
        if not getattr(storage, "remote", False):
            entries, total = first_files(spark, storage, entries, limit)
        df: DataFrame = scan(spark, storage, layout, entries, with_position=True)
    path = Path(out_dir) / "preview"
    first = write_on_driver(df.orderBy(FILE_COL, ROW_COL).limit(limit), path, [FILE_COL, ROW_COL], (FILE_COL, ROW_COL))
    written = first.num_rows
    columns = columns_of(first.schema)
    return {
        "path": str(path),
        "version": version,
        "total": df.count() if total is None else total,
        "rows": written,
        "limit": limit,
        "columns": columns,
    }
