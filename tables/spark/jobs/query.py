"""A checked SQL statement run at the versions it names (tables.services.query).

Public API (plain arguments, plain results; no Django):
- `run_query(spark, frames, statement, out_dir, max_rows, seconds, tag)` -> {"path", "rows",
  "cut", "maxRows", "columns"}. Each of `frames` (placeholder index -> (location, version or
  None for the latest)) is read through the confined reader (`read_version`: every path the
  log names is checked at the storage boundary) and bound as a temporary view of a name made
  for this run; the statement, which names only its placeholders `__dw_t<i>`, runs over those
  views and nothing else. At most `max_rows` rows are written, as one Parquet part under
  `<out_dir>/query/` (`cut` says whether the result held more). Past `seconds` the run is
  interrupted through its Spark tag and fails with that reason. The views are dropped after.
"""

from __future__ import annotations

import re
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tables.spark.engine.control import interrupt
from tables.spark.jobs.changes import write_part
from tables.spark.reading.read import read_version
from tables.spark.results import columns_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_PLACEHOLDER = re.compile(r"\b__dw_t(\d+)\b")


def distinct_names(names: list[str]) -> list[str]:
    """Column names made distinct (`SELECT a.id, b.id` has two `id`s): id, id_2, ..."""
    seen: set[str] = set()
    out = []
    for name in names:
        candidate, n = name, 1
        while candidate in seen:
            n += 1
            candidate = f"{name}_{n}"
        seen.add(candidate)
        out.append(candidate)
    return out


class QueryTimedOut(RuntimeError):
    code = "query_timed_out"

    def __init__(self, seconds: float) -> None:
        self.message = f"The query ran longer than {seconds:g} s (DELTAWEB_QUERY_SECONDS) and was cancelled."
        super().__init__(self.message)


def run_query(
    spark: SparkSession,
    frames: dict[int, tuple[str, int | None]],
    statement: str,
    out_dir: str | Path,
    max_rows: int,
    seconds: float,
    tag: str,
) -> dict[str, Any]:
    """Run the statement over its frames and write its first `max_rows` rows (module contract)."""
    run = uuid.uuid4().hex[:12]
    names = {i: f"dw_q{run}_t{i}" for i in frames}
    timed_out = threading.Event()

    def stop() -> None:
        timed_out.set()
        interrupt(spark, tag)

    timer = threading.Timer(seconds, stop)
    timer.daemon = True
    timer.start()
    try:
        for i, (location, version) in frames.items():
            read_version(spark, location, version).createOrReplaceTempView(names[i])
        sql = _PLACEHOLDER.sub(lambda m: names[int(m.group(1))], statement)
        table = spark.sql(sql).limit(max_rows + 1).toArrow()
    except Exception:
        if timed_out.is_set():
            raise QueryTimedOut(seconds) from None
        raise
    finally:
        timer.cancel()
        for name in names.values():
            try:
                spark.catalog.dropTempView(name)
            except Exception:  # a view that was never made, or a session gone: nothing to drop
                pass
    cut = table.num_rows > max_rows
    table = table.slice(0, max_rows).rename_columns(distinct_names(table.column_names))
    path = Path(out_dir) / "query"
    write_part(table, path)
    return {
        "path": str(path),
        "rows": table.num_rows,
        "cut": cut,
        "maxRows": max_rows,
        "columns": columns_of(table.schema),
    }
