"""Keyed row diff of two versions on Spark: rows added, removed and changed, by key columns.

Works on any table (no change data feed needed): both versions are read with
`tables.spark.reading.read.read_version`. A first pass groups the rows of both versions by key with a
64-bit fingerprint of their compared columns (xxhash64, null flags included): it finds
repeated keys and the keys that are on one side only or whose fingerprints differ, moving a
few bytes per row. A second pass joins only those keys' rows, with a full outer join on
null-safe key equality, and compares them column by column (a differing fingerprint whose
columns are all equal, e.g. 0.0 and -0.0, is no change). Two rows with equal fingerprints are
taken as equal: a change is missed only if two 64-bit hashes collide. Small versions skip the
first pass (`small_inputs`): one join of whole rows, written by the driver. Larger local
versions of flat columns are diffed by pyarrow in this process, each read once, with the same
result (`tables.spark.jobs.rowdiff_arrow`, which says what it takes; the rest comes here).

- added: the key is only in `v_to`; removed: only in `v_from`;
- changed: in both, and at least one compared column differs (null-safe; NaN equals NaN).
  Compared columns are the non-key columns present in both versions; columns of a map type
  (not comparable in Spark) and columns whose type changed are compared by their JSON form.
  Columns present in only one version are shown but never make a row "changed".
- Keys must exist in both versions and be unique in each: duplicates raise
  InvalidColumnsError naming the version and how many key values repeat, before anything is
  written. Key columns of a map type are refused.

Public API (plain arguments, plain results; no Django):
- `keyed_diff(spark, location, v_from, v_to, keys, out_dir, sources=None)` -> {"path", "from", "to", "keys",
  "counts": {"added", "removed", "changed"}, "total", "compared": [columns compared],
  "columns": [{name, type}]}. Rows are written under `<out_dir>/rowdiff/` sorted by the keys,
  with the columns `_diff` ('added' | 'removed' | 'changed'), the key columns,
  `_changed_columns` (array of column names that differ; empty for added/removed rows),
  `_before` (struct of the `v_from` non-key columns, null for added rows) and `_after`
  (struct of the `v_to` non-key columns, null for removed rows); a version whose columns are
  all keys has a null `_before` (or `_after`) on every row.
  `sources`, when given, is where each side is read from: ((location, version), (location,
  version)), a version None being that table's latest (a pinned version whose files the table
  lost is read from its pin's kept table, tables.services.versions.source); `v_from` and `v_to`
  stay the versions the result names.
- `read_page(path, offset, limit)`: the shared pager (`tables.spark.results.read_page`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tables.delta.errors import InvalidColumnsError, at_version
from tables.delta.snapshot.state import load_snapshot
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import as_storage
from tables.spark.jobs import rowdiff_arrow
from tables.spark.jobs.changes import write_part, write_sorted
from tables.spark.jobs.rowdiff_arrow import Side
from tables.spark.reading.names import quote_column
from tables.spark.reading.read import Layout, check_readable, input_bytes, input_rows, scan, version_entries
from tables.spark.results import part_files, read_page, written_columns

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

    return F.col(quote_column(name))


# Diffs with at most this many differing keys are sorted and written by one task.
SINGLE_TASK_ROWS = 1_000_000


def _compared_types(a: DataFrame, b: DataFrame, keys: list[str]) -> dict[str, bool]:
    """The compared columns (non-key, in both versions), each with whether it is compared by
    its JSON form (its type changed, or it holds a map Spark cannot compare)."""
    types_a = {f.name: f.dataType for f in a.schema.fields}
    types_b = {f.name: f.dataType for f in b.schema.fields}
    return {c: types_a[c] != types_b[c] or _has_map(types_a[c]) for c in a.columns if c not in keys and c in types_b}


def _fingerprint(compared: dict[str, bool], types: dict[str, Any]):
    """A 64-bit hash of a row's compared columns. Each value is preceded by its null flag
    (xxhash64 skips nulls, so (null, 1) and (1, null) would otherwise collide), and nested
    values are hashed by their JSON form (nulls inside arrays and structs are skipped too)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    parts = []
    for c, as_json in compared.items():
        v = _quoted(c)
        if as_json or isinstance(types[c], ArrayType | MapType | StructType):
            v = F.to_json(F.struct(v.alias("v")))
        parts += [v.isNull(), v]
    return F.xxhash64(*parts) if parts else F.lit(0).cast("long")


def differing_keys(a: DataFrame, b: DataFrame, keys: list[str], compared: dict[str, bool]) -> DataFrame:
    """Per key value (`__k0`, `__k1`, ...) of either version: how many rows hold it in `a`
    (`__na`) and in `b` (`__nb`) and their fingerprints (`__ha`, `__hb`), kept only for keys
    that repeat, are on one side only or whose fingerprints differ. One aggregation over the
    keys and a hash per row: the shuffle moves a few bytes per row instead of whole rows, and
    duplicates are found in the same pass."""
    from pyspark.sql import functions as F

    def side(df: DataFrame, tag: int) -> DataFrame:
        types = {f.name: f.dataType for f in df.schema.fields}
        return df.select(
            *[_quoted(k).alias(f"__k{i}") for i, k in enumerate(keys)],
            F.lit(tag).alias("__side"),
            _fingerprint(compared, types).alias("__h"),
        )

    key_cols = [f"__k{i}" for i in range(len(keys))]
    # shuffled by key before grouping: a plain groupBy first aggregates each input task's rows
    # on their own, a hash table of every row when keys are unique (they must be), which
    # spills at millions of rows and saves nothing; 2M rows per side: 3.6-4.7 s -> 2.5 s
    both = side(a, 0).unionByName(side(b, 1)).repartition(_key_partitions(a.sparkSession), *key_cols)
    in_a, in_b = F.col("__side") == 0, F.col("__side") == 1
    per_key = both.groupBy(*key_cols).agg(
        F.count_if(in_a).alias("__na"),
        F.count_if(in_b).alias("__nb"),
        F.max(F.when(in_a, F.col("__h"))).alias("__ha"),
        F.max(F.when(in_b, F.col("__h"))).alias("__hb"),
    )
    return per_key.where((F.col("__na") != 1) | (F.col("__nb") != 1) | (F.col("__ha") != F.col("__hb")))


def _key_partitions(spark: SparkSession) -> int:
    """Partitions of the by-key shuffle: a few per core, so that one task's table of keys
    stays small (the session's shuffle partitions when that is more)."""
    from tables.spark.engine.control import default_parallelism

    return max(int(spark.conf.get("spark.sql.shuffle.partitions") or 4), 4 * default_parallelism(spark))


def _only_keys(df: DataFrame, flagged: DataFrame, keys: list[str]) -> DataFrame:
    """The rows of `df` whose key is among the flagged ones (null-safe key equality)."""
    cond = None
    for i, k in enumerate(keys):
        c = _quoted(k).eqNullSafe(flagged[f"__k{i}"])
        cond = c if cond is None else cond & c
    return df.join(flagged, cond, "left_semi")


def diff_frame(a: DataFrame, b: DataFrame, keys: list[str], keep_same: bool = False) -> tuple[DataFrame, list[str]]:
    """The diff rows of two DataFrames unique on `keys` (unsorted), and the compared columns:
    every compared column of both rows of a key, null-safe (NaN equals NaN). `keep_same` keeps
    a row for every key, those without a change flagged by `__same` and without their values."""
    from pyspark.sql import functions as F

    by_json = _compared_types(a, b, keys)
    compared = list(by_json)

    def side(df: DataFrame, tag: str) -> DataFrame:
        others = [c for c in df.columns if c not in keys]
        # a version of key columns only: Parquet has no struct without fields, so null
        row = F.struct(*[_quoted(c) for c in others]) if others else F.lit(None).cast("string")
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
        as_json = by_json[c]
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
    differs = (F.col("_diff") != "changed") | (F.size("_changed_columns") > 0)
    if keep_same:
        return out.select(
            *[c for c in out.columns if c not in ("_before", "_after")],
            *[F.when(differs, F.col(c)).alias(c) for c in ("_before", "_after")],
            (~differs).alias("__same"),
        ), compared
    return out.where(differs), compared


# Both versions together up to this many bytes of local data files are diffed in one Spark job
# whose rows come to the driver (every key; whole rows only where they differ), written there by
# pyarrow: the two passes below run 13 Spark jobs, 1.3-1.7 s on a 60-row table (5 jobs, 0.7-0.9 s
# this way). Every key crosses to the driver, so the gain shrinks with the rows: two versions of
# (id, int) took 1.27 s against 2.09 s at 300,000 rows (3.0 MB), 2.61 s against 2.27 s at 900,000
# (7.8 MB); keys that compress well put more rows in fewer bytes, hence both bounds.
DRIVER_BYTES = 4 << 20
DRIVER_ROWS = 500_000


def small_inputs(files: list[str]) -> bool:
    """Whether the files both versions read take the driver's route: local, at most
    DRIVER_BYTES, at most DRIVER_ROWS rows (their footers')."""
    size = input_bytes(files)
    if size is None or size > DRIVER_BYTES:
        return False
    rows = input_rows(files, DRIVER_ROWS)
    return rows is not None and rows <= DRIVER_ROWS


def _driver_keys(a: DataFrame, b: DataFrame, keys: list[str]) -> bool:
    """Whether Arrow groups the key columns' values as Spark's join matches them: flat types
    without floating point (Spark makes -0.0 and 0.0 one key, Arrow two)."""
    from pyspark.sql.types import (
        BinaryType,
        BooleanType,
        DateType,
        DecimalType,
        IntegralType,
        StringType,
        TimestampNTZType,
        TimestampType,
    )

    flat = (BinaryType, BooleanType, DateType, DecimalType, IntegralType, StringType, TimestampType, TimestampNTZType)
    return all(isinstance(df.schema[k].dataType, flat) for df in (a, b) for k in keys)


def _diff_on_driver(a: DataFrame, b: DataFrame, keys: list[str], path: Path) -> list[str] | None:
    """The keyed diff of two small frames written to `path` by the driver; the compared columns,
    or None (nothing written) when a key repeats: a repeated key's rows are in the join more
    than once, and the two passes name the version that repeats it."""
    import pyarrow.compute as pc

    out, compared = diff_frame(a, b, keys, keep_same=True)
    # sorted by Spark in one task: its order of nulls, NaN and strings, as write_sorted's
    table = out.coalesce(1).sortWithinPartitions(*keys, "_diff").toArrow()
    if table.group_by(keys).aggregate([]).num_rows != table.num_rows:
        return None
    write_part(table.filter(pc.invert(table.column("__same"))).drop_columns(["__same"]), path)
    return compared


def diff_into(
    a: DataFrame,
    b: DataFrame,
    keys: list[str],
    path: Path,
    versions: tuple[int, int],
    shown: str,
    small: bool = False,
) -> list[str]:
    """The keyed diff of two frames written to `path` (sorted by key); the compared columns.
    InvalidColumnsError when a key repeats in either (`versions` and `shown` name them).
    `small`: both frames are small enough for the driver's route (`small_inputs`)."""
    from pyspark.sql import functions as F

    if small and _driver_keys(a, b, keys):
        compared = _diff_on_driver(a, b, keys, path)
        if compared is not None:
            return compared

    # first pass: the keys that differ (and repeated keys), kept in memory for the second
    flagged = differing_keys(a, b, keys, _compared_types(a, b, keys)).cache()
    try:
        repeated_a, repeated_b, n_flagged = flagged.select(
            F.count_if(F.col("__na") > 1), F.count_if(F.col("__nb") > 1), F.count("*")
        ).first()
        _refuse_repeated(keys, versions, (repeated_a, repeated_b), shown)
        # second pass: whole rows only for those keys, compared column by column
        out, compared = diff_frame(_only_keys(a, flagged, keys), _only_keys(b, flagged, keys), keys)
        write_sorted(out, path, [*keys, "_diff"], single=n_flagged <= SINGLE_TASK_ROWS)
    finally:
        flagged.unpersist()
    return compared


Place = tuple[str, int | None]  # (location, version; None: that table's latest)


def keyed_diff(
    spark: SparkSession,
    location: str | Storage,
    v_from: int,
    v_to: int,
    keys: list[str],
    out_dir: str | Path,
    sources: tuple[Place, Place] | None = None,
) -> dict[str, Any]:
    """Write the keyed diff of two versions under out_dir (module contract)."""

    storage = as_storage(location)
    keys = [k for k in dict.fromkeys(keys)]
    if not keys:
        raise InvalidColumnsError(f"{storage.display()}: a keyed diff needs at least one key column")
    # each side from its own place: the table, or the pin store's kept table of a pinned version
    (loc_a, at_a), (loc_b, at_b) = sources or ((storage, v_from), (storage, v_to))
    sides = (_side(loc_a, at_a), _side(loc_b, at_b))
    path = Path(out_dir) / "rowdiff"
    compared = _diff_by_arrow(sides, keys, path, (v_from, v_to), storage.display())
    if compared is None:
        compared = _diff_on_spark(spark, sides, keys, path, (v_from, v_to), storage.display())
    counts = _written_counts(path)
    return {
        "path": str(path),
        "from": v_from,
        "to": v_to,
        "keys": keys,
        "counts": counts,
        "total": sum(counts.values()),
        "compared": compared,
        "columns": written_columns(path),
    }


def _side(location: str | Storage, version: int | None) -> Side:
    """A version to diff: its log replayed and its files' deletion vectors decoded, nothing read."""
    storage = as_storage(location)
    snap = load_snapshot(storage, version)
    check_readable(snap.protocol, f"{storage.display()} at version {snap.version}")
    layout = Layout.of(snap.metadata, snap.protocol)
    with at_version(f"version {snap.version}"):
        return Side(storage, snap.version, layout, version_entries(storage, snap))


def _diff_by_arrow(
    sides: tuple[Side, Side], keys: list[str], path: Path, versions: tuple[int, int], shown: str
) -> list[str] | None:
    """The diff written by pyarrow (`rowdiff_arrow`) when that route answers it as Spark would
    and the versions are not small (those take the driver's route, one short Spark job);
    the compared columns, or None when Spark makes the diff."""
    if any(k not in s.layout.names for s in sides for k in keys):
        return None  # refused, as always, by the Spark route's checks
    try:
        rowdiff_arrow.check_types(sides, keys)
        files = []
        for side in sides:
            with at_version(f"version {side.version}"):
                files.append(rowdiff_arrow.local_files(side))
        rowdiff_arrow.check_size(files)
        if small_inputs([p.as_uri() for side_files in files for p in dict.fromkeys(side_files)]):
            return None
        a, b = rowdiff_arrow.read_sides(sides, files, keys[0] if len(keys) == 1 else None)
        compared = [c for c in a.column_names if c not in keys and c in b.column_names]
        outcome = rowdiff_arrow.arrow_diff(a, b, keys, compared)
    except (rowdiff_arrow.Declined, pa.ArrowNotImplementedError):  # a key type Arrow's join lacks
        return None
    if outcome.table is None:
        _refuse_repeated(keys, versions, outcome.repeated, shown)
    write_part(outcome.table, path)
    return compared


def _refuse_repeated(keys: list[str], versions: tuple[int, int], repeated: tuple[int, int], shown: str) -> None:
    """InvalidColumnsError naming the first version in which key values repeat, and how many."""
    for v, n in zip(versions, repeated, strict=True):
        if n:
            raise InvalidColumnsError(
                f"{shown}: key ({', '.join(keys)}) is not unique in version {v}: {n} key value(s) repeat",
                version=v,
                columns=keys,
            )


def _diff_on_spark(
    spark: SparkSession, sides: tuple[Side, Side], keys: list[str], path: Path, versions: tuple[int, int], shown: str
) -> list[str]:
    """The diff made by Spark: both versions read by `scan`, the driver's route for small ones
    and the two passes for the others; the compared columns."""
    files: list[str] = []
    frames = []
    for side in sides:
        with at_version(f"version {side.version}"):
            frames.append(scan(spark, side.storage, side.layout, side.entries, inputs=files))
    a, b = frames
    for v, df in zip(versions, frames, strict=True):
        missing = [k for k in keys if k not in df.columns]
        if missing:
            raise InvalidColumnsError(
                f"{shown}: key column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                f"not in version {v} (its columns: {', '.join(df.columns)})",
                version=v,
                columns=missing,
            )
    for key in keys:
        if _has_map(a.schema[key].dataType) or _has_map(b.schema[key].dataType):
            raise InvalidColumnsError(f"{shown}: key column {key} holds a map, which cannot be compared")
    return diff_into(a, b, keys, path, versions, shown, small_inputs(files))


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
