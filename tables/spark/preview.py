"""The cached preview of a version on Spark: its first rows written as Parquet, and its row count.

Public API (plain arguments, plain results; no Django):
- `write_preview(spark, location, version, out_dir, limit=100)` -> {"path", "version",
  "total", "rows", "limit", "columns": [{name, type}]}. The first `limit` rows of the version
  in (file, row index) order (the order `read.preview_rows` pages in) are written under
  `<out_dir>/preview/` (replaced if present); `total` is the version's row count and `rows`
  how many were written. The web process pages the file with `results.read_page`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tables.delta.storage import Storage, as_storage
from tables.results import part_files, type_name

from .changes import write_sorted
from .read import FILE_COL, ROW_COL, read_version

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PREVIEW_ROWS = 100


def write_preview(
    spark: SparkSession, location: str | Storage, version: int, out_dir: str | Path, limit: int = PREVIEW_ROWS
) -> dict[str, Any]:
    """Write the first `limit` rows of `version` under out_dir (module contract)."""
    import pyarrow.parquet as pq

    storage = as_storage(location)
    df = read_version(spark, storage, version, with_position=True)
    path = Path(out_dir) / "preview"
    first = df.orderBy(FILE_COL, ROW_COL).limit(max(0, int(limit))).coalesce(1)
    write_sorted(first, path, [FILE_COL, ROW_COL], drop=(FILE_COL, ROW_COL))
    files = part_files(path)
    written = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    columns = (
        [{"name": f.name, "type": type_name(f.type)} for f in pq.ParquetFile(files[0]).schema_arrow] if files else []
    )
    return {
        "path": str(path),
        "version": version,
        "total": df.count(),
        "rows": written,
        "limit": limit,
        "columns": columns,
    }
