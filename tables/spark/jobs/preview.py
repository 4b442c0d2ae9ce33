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

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tables.delta.errors import at_version
from tables.delta.snapshot.state import load_snapshot
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import as_storage
from tables.spark.jobs import file_errors
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
ACTION = "previewed"  # "Version 7 cannot be previewed: ..."
FOOTER_THREADS = 8


def _footer_rows(files: list[Path], named: Callable[[int, Exception], Exception | None] | None = None) -> list[int]:
    """Rows of each Parquet file, from its footer (files in parallel: each is an open and a
    small read). `named(i, exc)`: the error to raise instead when file i's footer fails."""
    import pyarrow.parquet as pq

    def rows(i: int) -> int:
        try:
            return pq.read_metadata(files[i]).num_rows
        except Exception as exc:
            mapped = named(i, exc) if named is not None else None
            if mapped is None:
                raise
            raise mapped from exc

    with ThreadPoolExecutor(max_workers=min(FOOTER_THREADS, max(1, len(files)))) as pool:
        return list(pool.map(rows, range(len(files))))


def first_files(
    spark: SparkSession, storage: Storage, entries: list[ScanEntry], limit: int, version: int = -1
) -> tuple[list[ScanEntry], int]:
    """The entries, in Spark's file order, whose rows hold the first `limit` rows of the
    version, and the version's row count (footers less deletion vectors). A footer that
    cannot be read names its file, relative to the table, and `version`."""
    files = [local_file(storage, e.path) for e in entries]
    if not files:
        return [], 0
    # Spark's names of the files (its order), listed on the driver without reading them
    _df, uris = _read_files(spark, sorted(set(files)), {"type": "struct", "fields": []}, storage.display())
    footers = _footer_rows(files, lambda i, exc: file_errors.named(exc, storage, version, ACTION, file=entries[i].path))
    live = [n - (len(e.rows) if e.rows is not None else 0) for n, e in zip(footers, entries, strict=True)]
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
    path = Path(out_dir) / "preview"
    # a data file that cannot be read (gone, not Parquet, cut short) is named with the version
    # and the fix, whichever reader meets it: the footers here, the storage, Spark's executors
    with file_errors.files_named(storage, snap.version, ACTION):
        with at_version(f"version {snap.version}"):
            entries = version_entries(storage, snap)
            if not storage.remote:
                entries, total = first_files(spark, storage, entries, limit, snap.version)
            df: DataFrame = scan(spark, storage, layout, entries, with_position=True)
        ordered = df.orderBy(FILE_COL, ROW_COL).limit(limit)
        first = write_on_driver(ordered, path, [FILE_COL, ROW_COL], (FILE_COL, ROW_COL))
        total = df.count() if total is None else total
    return {
        "path": str(path),
        "version": version,
        "total": total,
        "rows": first.num_rows,
        "limit": limit,
        "columns": columns_of(first.schema),
    }
