"""Keyed row diff of two versions on Spark: rows added, removed and changed, by key columns.

Works on any table (no change data feed needed): both versions are read with
`tables.spark.read.read_version`, checked for duplicate keys (one job over the key columns),
and joined with a full outer join on null-safe key equality.

- added: the key is only in `v_to`; removed: only in `v_from`;
- changed: in both, and at least one compared column differs (null-safe; NaN equals NaN).
  Compared columns are the non-key columns present in both versions; columns of a map type
  (not comparable in Spark) and columns whose type changed are compared by their JSON form.
  Columns present in only one version are shown but never make a row "changed".
- Keys must exist in both versions and be unique in each: duplicates raise
  InvalidColumnsError naming the version and how many key values repeat, before anything is
  written. Key columns of a map type are refused.

Public API (plain arguments, plain results; no Django):
- `keyed_diff(spark, location, v_from, v_to, keys, out_dir)` -> {"path", "from", "to", "keys",
  "counts": {"added", "removed", "changed"}, "total", "compared": [columns compared],
  "columns": [{name, type}]}. Rows are written under `<out_dir>/rowdiff/` sorted by the keys,
  with the columns `_diff` ('added' | 'removed' | 'changed'), the key columns,
  `_changed_columns` (array of column names that differ; empty for added/removed rows),
  `_before` (struct of the `v_from` non-key columns, null for added rows) and `_after`
  (struct of the `v_to` non-key columns, null for removed rows).
- `read_page(path, offset, limit)`: the shared pager (`tables.results.read_page`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tables.delta.errors import InvalidColumnsError
from tables.delta.storage import Storage, as_storage
from tables.results import part_files, read_page, type_name

from .changes import write_sorted
from .read import read_version

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["keyed_diff", "read_page"]

DIFF_KINDS = ("added", "removed", "changed")


def _has_map(dtype: Any) -> bool:
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(dtype, MapType):
        return True
    if isinstance(dtype, ArrayType):
        return _has_map(dtype.elementType)
    if isinstance(dtype, StructType):
        return any(_has_map(f.dataType) for f in dtype.fields)
    return False


def _quoted(name: str):
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def duplicate_keys(a: DataFrame, b: DataFrame, keys: list[str]) -> tuple[int, int]:
    """How many key values repeat in `a` and in `b` (one job over the key columns only)."""
    from pyspark.sql import functions as F

    sides = [df.select(*[_quoted(k) for k in keys]).withColumn("__side", F.lit(i)) for i, df in enumerate((a, b))]
    repeated = (
        sides[0]
        .unionByName(sides[1])
        .groupBy("__side", *[_quoted(k) for k in keys])
        .count()
        .where(F.col("count") > 1)
        .groupBy("__side")
        .count()
        .collect()
    )
    found = {r["__side"]: r["count"] for r in repeated}
    return found.get(0, 0), found.get(1, 0)


def diff_frame(a: DataFrame, b: DataFrame, keys: list[str]) -> tuple[DataFrame, list[str]]:
    """The diff rows of two DataFrames unique on `keys` (unsorted), and the compared columns."""
    from pyspark.sql import functions as F

    types_a = {f.name: f.dataType for f in a.schema.fields}
    types_b = {f.name: f.dataType for f in b.schema.fields}
    compared = [c for c in a.columns if c not in keys and c in types_b]

    def side(df: DataFrame, tag: str) -> DataFrame:
        others = [c for c in df.columns if c not in keys]
        row = F.struct(*[_quoted(c) for c in others]) if others else F.lit(None).cast("struct<>")
        return df.select(
            *[_quoted(k).alias(f"__k{i}_{tag}") for i, k in enumerate(keys)],
            row.alias(f"__row_{tag}"),
            F.lit(True).alias(f"__in_{tag}"),
        )

    left, right = side(a, "a"), side(b, "b")
    cond = None
    for i in range(len(keys)):
        c = left[f"__k{i}_a"].eqNullSafe(right[f"__k{i}_b"])
        cond = c if cond is None else cond & c
    joined = left.join(right, cond, "full_outer")
    in_a, in_b = F.col("__in_a").isNotNull(), F.col("__in_b").isNotNull()

    def value(tag: str, c: str, as_json: bool):
        v = F.col(f"__row_{tag}").getField(c)
        return F.to_json(F.struct(v.alias("v"))) if as_json else v

    diffs = []
    for c in compared:
        as_json = types_a[c] != types_b[c] or _has_map(types_a[c])
        diffs.append(F.when(~value("a", c, as_json).eqNullSafe(value("b", c, as_json)), F.lit(c)))
    none = F.array().cast("array<string>")
    changed = F.filter(F.array(*diffs), lambda x: x.isNotNull()) if diffs else none
    out = joined.select(
        F.when(in_a & in_b, F.lit("changed")).when(in_b, F.lit("added")).otherwise(F.lit("removed")).alias("_diff"),
        *[F.coalesce(F.col(f"__k{i}_a"), F.col(f"__k{i}_b")).alias(k) for i, k in enumerate(keys)],
        F.when(in_a & in_b, changed).otherwise(none).alias("_changed_columns"),
        F.col("__row_a").alias("_before"),
        F.col("__row_b").alias("_after"),
    )
    return out.where((F.col("_diff") != "changed") | (F.size("_changed_columns") > 0)), compared


def keyed_diff(
    spark: SparkSession,
    location: str | Storage,
    v_from: int,
    v_to: int,
    keys: list[str],
    out_dir: str | Path,
) -> dict[str, Any]:
    """Write the keyed diff of two versions under out_dir (module contract)."""

    storage = as_storage(location)
    keys = [k for k in dict.fromkeys(keys)]
    if not keys:
        raise InvalidColumnsError(f"{storage.display()}: a keyed diff needs at least one key column")
    a, b = read_version(spark, storage, v_from), read_version(spark, storage, v_to)
    for v, df in ((v_from, a), (v_to, b)):
        missing = [k for k in keys if k not in df.columns]
        if missing:
            raise InvalidColumnsError(
                f"{storage.display()}: key column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                f"not in version {v} (its columns: {', '.join(df.columns)})",
                version=v,
                columns=missing,
            )
    for key in keys:
        if _has_map(a.schema[key].dataType) or _has_map(b.schema[key].dataType):
            raise InvalidColumnsError(f"{storage.display()}: key column {key} holds a map, which cannot be compared")
    for v, n in zip((v_from, v_to), duplicate_keys(a, b, keys), strict=True):
        if n:
            raise InvalidColumnsError(
                f"{storage.display()}: key ({', '.join(keys)}) is not unique in version {v}: {n} key value(s) repeat",
                version=v,
                columns=keys,
            )
    out, compared = diff_frame(a, b, keys)
    path = Path(out_dir) / "rowdiff"
    write_sorted(out, path, [*keys, "_diff"])
    counts = _written_counts(path)
    return {
        "path": str(path),
        "from": v_from,
        "to": v_to,
        "keys": keys,
        "counts": counts,
        "total": sum(counts.values()),
        "compared": compared,
        "columns": _columns(path),
    }


def _written_counts(path: Path) -> dict[str, int]:
    """Rows per kind of the written diff, counted by pyarrow from its `_diff` column (a second
    Spark job reading the result back cost more than the count)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    counts = {k: 0 for k in DIFF_KINDS}
    for f in part_files(path):
        for item in pc.value_counts(pq.read_table(f, columns=["_diff"]).column("_diff")).to_pylist():
            counts[item["values"]] = counts.get(item["values"], 0) + item["counts"]
    return counts


def _columns(path: Path) -> list[dict[str, str]]:
    import pyarrow.parquet as pq

    files = part_files(path)
    return [{"name": f.name, "type": type_name(f.type)} for f in pq.ParquetFile(files[0]).schema_arrow] if files else []
