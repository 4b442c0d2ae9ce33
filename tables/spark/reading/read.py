"""Reading a table version on Spark: the core decides which files, Spark reads the Parquet.

No Delta Lake jars are involved. The core replays the log (`load_snapshot`) and gives the
active files with their partition values and deletion vectors; this module hands Spark the
plain file list and rebuilds what a Delta reader returns:

- partition values come from the log (never from directory names), typed from the schema
  (`tables.delta.snapshot.partitions`: dates, UTC timestamps, timestamp_ntz, decimals, booleans,
  numbers, strings; empty or missing is null);
- column mapping (`tables.delta.snapshot.schema.columnmapping`): name mode reads the physical column names,
  id mode matches Parquet field ids (Spark's `spark.sql.parquet.fieldId.read.enabled`,
  switched on for the session when an id-mode table is read); columns are then renamed, and
  nested structs cast, to the logical names;
- deletion vectors (`tables.delta.snapshot.dv`, decoded on the driver with pyroaring) are applied with
  Spark's hidden `_metadata.row_index`: a broadcast table of (entry, deleted row index) is
  anti-joined on the rows of each file;
- timestamp_ntz columns are read as TIMESTAMP_NTZ (never shifted by a time zone);
- a reader feature this module does not implement raises UnsupportedFeatureError naming it.

Public API (plain arguments, plain results; no Django):
- `read_version(spark, location, version=None, columns=None, with_position=False)` -> DataFrame
  of the table at `version` (latest when None) with the logical columns in schema order (or
  `columns`, in that order). `with_position=True` adds `_dw_file` (the data file's URI) and
  `_dw_row_index` (the row's index in it), the table's natural, deterministic order.
- `preview_rows(spark, location, version, offset=0, limit=100)` -> {"version", "columns":
  [{name, type}], "rows": [{column: json-safe value}], "total", "offset", "limit"}: a page of
  the version in (file, row index) order; `total` is the version's row count.
- `scan(...)`: the shared engine used by change data and diffs (file entries with extra
  columns and row selections).
"""

from __future__ import annotations

import os
import re
import stat
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa

from tables.delta.errors import InvalidColumnsError, StorageError, UnsupportedFeatureError, at_version
from tables.delta.log.actions import Metadata, Protocol
from tables.delta.snapshot.dv import read_deletion_vector
from tables.delta.snapshot.partitions import PartitionColumn, partition_columns, typed_partition_values
from tables.delta.snapshot.schema.columnmapping import logical_schema, mapping_mode, physical_name, read_schema
from tables.delta.snapshot.state import MAX_READER_VERSION, load_snapshot
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import as_storage
from tables.spark.engine.connect import is_connect
from tables.spark.engine.control import master_of
from tables.spark.reading.names import escape_glob, quote_column
from tables.spark.results import table_to_json

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

# Reader features whose data semantics this reader applies (the log replay may know more).
DATA_READER_FEATURES = frozenset(
    {"columnMapping", "deletionVectors", "timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"}
)

FILE_COL = "_dw_file"
ROW_COL = "_dw_row_index"
FIELD_ID_CONF = "spark.sql.parquet.fieldId.read.enabled"
BROADCAST_SELECTION_ROWS = 2_000_000


def check_readable(protocol: Protocol, where: str) -> None:
    """Refuse, naming the feature, a table whose data this reader cannot return correctly."""
    if protocol.min_reader_version > MAX_READER_VERSION:
        raise UnsupportedFeatureError(
            f"{where}: reader version {protocol.min_reader_version} is not supported",
            feature=f"readerVersion{protocol.min_reader_version}",
        )
    if protocol.min_reader_version >= 3:
        unknown = sorted(set(protocol.reader_features or ()) - DATA_READER_FEATURES)
        if unknown:
            raise UnsupportedFeatureError(
                f"{where}: reading data with reader feature{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(unknown)} is not supported",
                feature=unknown[0],
            )


@dataclass(frozen=True, slots=True)
class Layout:
    """What reading data files needs from a version's metadata and protocol."""

    schema: dict[str, Any]
    mode: str
    partitions: list[PartitionColumn]

    @classmethod
    def of(cls, metadata: Metadata, protocol: Protocol) -> Layout:
        mode = mapping_mode(metadata, protocol)
        return cls(metadata.schema, mode, partition_columns(metadata, mode))

    @property
    def names(self) -> list[str]:
        return [f["name"] for f in self.schema.get("fields", [])]


@dataclass(slots=True)
class ScanEntry:
    """One logical file to read: its log path and partition values, values of the extra
    columns for its rows, and a row selection (`rows` dropped, or only `rows` kept)."""

    path: str
    partition_values: dict[str, str | None] | None
    extra: tuple[Any, ...] = ()
    rows: np.ndarray | None = None
    only: bool = False


def spark_type(delta_type: Any):
    """The Spark DataType of a Delta type (a type name or a nested type dict)."""
    from pyspark.sql.types import StructType

    return (
        StructType.fromJson(
            {"type": "struct", "fields": [{"name": "x", "type": delta_type, "nullable": True, "metadata": {}}]}
        )
        .fields[0]
        .dataType
    )


def local_file(storage: Storage, path: str) -> Path:
    """The local file of a log path, resolved and checked by the storage (a path outside the
    allowed roots is refused here, before Spark is handed anything)."""
    return Path(storage.local_file(storage.resolve(path)))


# --- object-store tables: the files spooled to the driver through the storage layer -------------
# Spark here has no Hadoop connectors for s3a://, abfss:// or gs:// (no jars, no Maven). A
# bounded job on an object-store table therefore fetches its data files through the storage
# layer (confined, with the table's credentials, concurrently) into a local spool directory
# and Spark reads those: the same Parquet reader, field ids and `_metadata.row_index` as for a
# local table. Data files are immutable (a Delta writer never rewrites a file name), so a
# spooled file is reused by later jobs until it ages out.

SPOOL_ENV = "DELTAWEB_SPARK_SPOOL_DIR"
SPOOL_LIMIT_ENV = "DELTAWEB_SPARK_SPOOL_MAX_BYTES"
SPOOL_LIMIT_DEFAULT = 2 << 30  # the data one job may fetch from an object store
SPOOL_MAX_AGE_SECONDS = 3600
SPOOL_BATCH = 32


class ObjectStoreReadTooLargeError(StorageError):
    """A Spark job on an object-store table would fetch more data than the spool allows."""


def _spool_limit() -> int:
    try:
        return int(os.environ.get(SPOOL_LIMIT_ENV, SPOOL_LIMIT_DEFAULT))
    except ValueError:
        return SPOOL_LIMIT_DEFAULT


def _spool_dir() -> Path:
    import tempfile

    return Path(os.environ.get(SPOOL_ENV) or os.path.join(tempfile.gettempdir(), "deltaweb-spool"))


def _evict_spool(base: Path, keep: set[Path]) -> None:
    """Remove spooled files no job touched for an hour (never one the current job uses)."""
    import time

    cutoff = time.time() - SPOOL_MAX_AGE_SECONDS
    for f in base.glob("*/*.parquet"):
        try:
            if f not in keep and f.stat().st_mtime < cutoff:
                f.unlink()
        except FileNotFoundError:
            pass


def spool_files(spark: SparkSession, storage: Storage, paths: list[str], where: str) -> dict[str, Path]:
    """Local copies of an object-store table's data files (log paths -> spooled file), fetched
    through the storage (confinement and credentials apply); at most the spool limit in bytes,
    else ObjectStoreReadTooLargeError; missing files are named as for a local table."""
    import hashlib

    master = master_of(spark)
    if not master.startswith("local"):
        raise StorageError(
            f"{where}: Spark jobs on object-store tables read the files through the driver's spool, "
            f"which executors of the cluster {master!r} cannot see; run the job with a local Spark master"
        )
    base = _spool_dir() / hashlib.sha256(storage.location.encode()).hexdigest()[:24]
    base.mkdir(parents=True, exist_ok=True)
    keys = {p: storage.resolve(p) for p in paths}
    out = {p: base / (hashlib.sha256(storage.uri(k).encode()).hexdigest()[:40] + ".parquet") for p, k in keys.items()}
    todo = [p for p in paths if not out[p].is_file()]
    limit = _spool_limit()
    fetched = sum(out[p].stat().st_size for p in paths if p not in set(todo))
    missing: list[str] = []
    for i in range(0, len(todo), SPOOL_BATCH):
        batch = todo[i : i + SPOOL_BATCH]
        try:
            blobs = storage.read_many([keys[p] for p in batch])
        except FileNotFoundError:
            blobs = []
            for p in batch:  # name every missing file, not only the first
                try:
                    blobs.append(storage.read(keys[p]))
                except FileNotFoundError:
                    missing.append(unquote(p))
                    blobs.append(None)
        for p, data in zip(batch, blobs, strict=True):
            if data is None:
                continue
            fetched += len(data)
            if fetched > limit:
                raise ObjectStoreReadTooLargeError(
                    f"{where}: this job would fetch more than {limit >> 20} MiB of data files from the object "
                    f"store to the driver (set {SPOOL_LIMIT_ENV} to allow more)"
                )
            tmp = out[p].with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, out[p])
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise StorageError(f"{where}: {len(missing)} data file(s) are missing: {shown}", files=missing[:100])
    for f in out.values():
        os.utime(f)  # in use: the eviction below and in other jobs leaves it
    _evict_spool(_spool_dir(), set(out.values()))
    return out


def _spark_uri(uri: str) -> str:
    """Spark's `_metadata.file_path` form of a local file URI (`file:/x`, not `file:///x`)."""
    return re.sub(r"^file:/+", "file:/", uri)


def input_files(df: DataFrame) -> list[str]:
    """The files a DataFrame reads, as Spark names them (its `inputFiles()`), fetched in one
    call through the JVM bridge: iterating the Java array costs one round trip per file (a
    Connect client gets the whole list in one answer of the server)."""
    if is_connect(df.sparkSession):
        return list(df.inputFiles())
    names = df._jdf.inputFiles()
    # Scala's generic array wrapper takes the String[] (Java's Object[] methods are not found
    # for it by the bridge); file names never hold a NUL
    joined = df.sparkSession._jvm.scala.collection.immutable.ArraySeq.unsafeWrapArray(names).mkString("\0")
    return str(joined).split("\0") if joined else []


def _local_paths(files: list[str]) -> list[str] | None:
    """The local paths of the `file:` URIs `input_files` or `scan(inputs=)` named, or None when
    one is not local (read in the executors from its store)."""
    paths = []
    for uri in files:
        parsed = urlparse(uri)
        if parsed.scheme != "file":
            return None
        paths.append(unquote(parsed.path))
    return paths


def input_bytes(files: list[str]) -> int | None:
    """Bytes of the files `input_files` named (None when one is not a local file): what
    decides whether a job's result is small enough to be sorted and written by one task."""
    paths = _local_paths(files)
    try:
        return None if paths is None else sum(os.path.getsize(p) for p in paths)
    except OSError:
        return None


def input_rows(files: list[str], at_most: int) -> int | None:
    """Rows of the local Parquet files named, from their footers (deletion vectors not taken
    off), counted until more than `at_most`; None when one is not local or not readable (the
    job's own read then says why)."""
    import pyarrow.parquet as pq

    paths = _local_paths(files)
    if paths is None:
        return None
    total = 0
    for path in paths:
        try:
            total += pq.read_metadata(path).num_rows
        except (OSError, ValueError):  # pyarrow's ArrowInvalid is a ValueError
            return None
        if total > at_most:
            break
    return total


LOCAL_RELATION_BYTES = 8 << 20
_LOCAL_RELATION_LOCK = threading.Lock()


def small_frame(spark: SparkSession, table: pa.Table, schema: Any = None) -> DataFrame:
    """A DataFrame of a small Arrow table kept in the plan (a local relation, built from Arrow
    batches, not Python rows pickled for the JVM to unpickle in a job of their own). Above
    LOCAL_RELATION_BYTES the rows go to the executors as an RDD (the session's setting, see
    tables.spark.session). A Connect client always sends the batches in the plan (the server
    caches large ones once)."""
    if table.nbytes > LOCAL_RELATION_BYTES or is_connect(spark):
        return spark.createDataFrame(table, schema)
    key = "spark.sql.execution.arrow.localRelationThreshold"
    # the worker's jobs share one session from several threads: one at a time here, so
    # that the setting is always put back as it was
    with _LOCAL_RELATION_LOCK:
        before = spark.conf.get(key)
        spark.conf.set(key, str(LOCAL_RELATION_BYTES))
        try:
            return spark.createDataFrame(table, schema)
        finally:
            spark.conf.set(key, before)


def rows_frame(spark: SparkSession, rows: list[tuple[Any, ...]], schema: Any) -> DataFrame:
    """`small_frame` of Python rows in a Spark schema (the entries table of a scan)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    # instants in UTC, as PySpark 4.0's default was (4.3 asks for the zone by name)
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in arrow_schema]
    table = pa.Table.from_arrays(
        [pa.array(list(c), f.type) for c, f in zip(columns, arrow_schema, strict=True)], schema=arrow_schema
    )
    return small_frame(spark, table, schema)


def _parquet(spark: SparkSession, schema: Any, paths: list[str]) -> DataFrame:
    """spark.read.schema(schema).parquet(*paths), with the paths sent to the JVM as one string
    split there: PySpark sends a list one element per round trip (10,000 files, 10,000 calls).
    A Connect client sends the paths in the plan, one message."""
    from pyspark.sql import DataFrame

    if is_connect(spark):
        return spark.read.schema(schema).parquet(*paths)
    if not paths:
        return spark.read.schema(schema).parquet()
    jvm = spark._jvm
    # no path holds a NUL; split(regex, -1) keeps every (non-empty) name
    names = jvm.java.util.regex.Pattern.compile("\0").split("\0".join(paths), -1)
    seq = jvm.scala.collection.immutable.ArraySeq.unsafeWrapArray(names)
    return DataFrame(spark.read.schema(schema)._jreader.parquet(seq), spark)


def _read_files(
    spark: SparkSession, paths: list[Path], schema: dict[str, Any], where: str
) -> tuple[DataFrame, dict[Path, str]]:
    """Parquet files read with an explicit schema, and each file's `_metadata.file_path`."""
    from pyspark.sql.types import StructType

    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise StorageError(f"{where}: {len(missing)} data file(s) are missing: {shown}", files=missing[:100])
    globbed = [escape_glob(str(p)) for p in paths]
    df = _parquet(spark, StructType.fromJson(schema), globbed)
    uris = {}
    for u in input_files(df):
        uris[Path(os.path.normpath(unquote(urlparse(u).path)))] = _spark_uri(u)
    unlisted = [str(p) for p in paths if p not in uris]
    if unlisted:
        raise StorageError(
            f"{where}: Spark did not list {len(unlisted)} data file(s), e.g. {unlisted[0]}", files=unlisted[:100]
        )
    return df, uris


# Reads of at least this many files averaging at most SMALL_FILE_BYTES go through pyarrow in
# the executors (tables/spark/reading/local_source.py): Spark's reader costs about 1 ms of JVM work
# per file and a task per 32 small files; 10,000 change-data files: 11 s of CPU to about 3.
SMALL_FILES = 256
SMALL_FILE_BYTES = 1 << 20


def _many_small(files: list[Path]) -> dict[Path, int | None] | None:
    """Each file's size (None: not a regular file) when a read of these local files is one of
    many small files, else None. One stat per file, whose answer the read reuses."""
    if len(files) < SMALL_FILES:
        return None
    sizes: dict[Path, int | None] = {}
    for p in files:
        try:
            st = p.stat()
            sizes[p] = st.st_size if stat.S_ISREG(st.st_mode) else None
        except OSError:
            sizes[p] = None
    return sizes if sum(n or 0 for n in sizes.values()) <= SMALL_FILE_BYTES * len(files) else None


def _read_small_files(
    spark: SparkSession, sizes: dict[Path, int | None], schema: dict[str, Any], where: str
) -> tuple[DataFrame, dict[Path, str]]:
    """`_read_files` for many small files (`_many_small`'s sizes): read by pyarrow in the
    executors, without Spark listing them; the data has `__dw_file` (the file's URI, as Spark
    names it) and `__dw_row`."""
    from tables.spark.reading.local_source import read_local_files

    missing = [str(p) for p, size in sizes.items() if size is None]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise StorageError(f"{where}: {len(missing)} data file(s) are missing: {shown}", files=missing[:100])
    uris = {p: _spark_uri(p.as_uri()) for p in sizes}
    return read_local_files(spark, [(p, uris[p], size) for p, size in sizes.items()], schema), uris


@dataclass(slots=True)
class _ScanColumns:
    """The columns a scan returns (`wanted`) and what reading them needs of the layout."""

    wanted: list[str]
    fields: dict[str, dict[str, Any]]
    logical: dict[str, dict[str, Any]]
    part_by_name: dict[str, PartitionColumn]
    parts: list[PartitionColumn]
    void: set[str]
    phys_schema: dict[str, Any]


def scan(
    spark: SparkSession,
    storage: Storage,
    layout: Layout,
    entries: list[ScanEntry],
    *,
    columns: list[str] | None = None,
    extra: Sequence[tuple[str, Any]] = (),
    file_columns: Sequence[tuple[str, Any]] = (),
    with_position: bool = False,
    inputs: list[str] | None = None,
) -> DataFrame:
    """Rows of `entries` as a DataFrame: logical columns (all, or `columns` in that order),
    then `extra` columns (name, Delta type; values from each entry's `extra`), then
    `file_columns` (read from the files as they are, e.g. `_change_type` of CDC files), then
    the position columns when asked. An entry's rows are filtered by its selection; a file
    listed in several entries yields its rows once per entry. `inputs`, when given, receives
    the URI of every file the frame reads (`file:` for a local or spooled file, the store's
    URI when executors read the store: `input_bytes` tells them apart)."""
    cols = _scan_columns(storage, layout, columns, file_columns)
    out_schema = _out_schema(cols, extra, file_columns, with_position)
    entries = [e for e in entries if not (e.only and (e.rows is None or len(e.rows) == 0))]
    if not entries:
        return spark.createDataFrame([], out_schema)
    if layout.mode == "id":
        spark.conf.set(FIELD_ID_CONF, "true")
    data, key_of, back, n_files = _read_data(spark, storage, entries, cols.phys_schema, inputs)
    data = _join_entries(spark, data, entries, key_of, cols.parts, extra, n_files)
    return data.select(*_output_columns(cols, layout, extra, file_columns, with_position, back))


def _scan_columns(
    storage: Storage, layout: Layout, columns: list[str] | None, file_columns: Sequence[tuple[str, Any]]
) -> _ScanColumns:
    """The wanted columns, checked against the layout, and the physical schema to read them with."""
    names = layout.names
    wanted = list(columns) if columns is not None else names
    unknown = [c for c in wanted if c not in names]
    if unknown:
        raise InvalidColumnsError(f"{storage.display()}: no column {', '.join(map(repr, unknown))} in this version")
    fields = {f["name"]: f for f in layout.schema.get("fields", [])}
    part_by_name = {p.name: p for p in layout.partitions}
    void = {n for n in wanted if fields[n]["type"] == "void"}
    data_cols = [n for n in wanted if n not in part_by_name and n not in void]
    parts = [part_by_name[n] for n in wanted if n in part_by_name]

    phys_schema = read_schema(layout.schema, layout.mode)
    keep = set(data_cols)
    phys_schema["fields"] = [
        pf for pf, lf in zip(phys_schema["fields"], layout.schema["fields"], strict=True) if lf["name"] in keep
    ]
    phys_schema["fields"] += [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in file_columns]
    logical = {f["name"]: f for f in logical_schema(layout.schema)["fields"]}
    return _ScanColumns(wanted, fields, logical, part_by_name, parts, void, phys_schema)


def _out_schema(
    cols: _ScanColumns,
    extra: Sequence[tuple[str, Any]],
    file_columns: Sequence[tuple[str, Any]],
    with_position: bool,
) -> StructType:
    """The Spark schema of a scan's result."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    return StructType(
        [StructField(n, spark_type(cols.logical[n]["type"]), True) for n in cols.wanted]
        + [StructField(n, spark_type(t), True) for n, t in (*extra, *file_columns)]
        + ([StructField(FILE_COL, StringType()), StructField(ROW_COL, LongType())] if with_position else [])
    )


def _read_data(
    spark: SparkSession,
    storage: Storage,
    entries: list[ScanEntry],
    phys_schema: dict[str, Any],
    inputs: list[str] | None,
) -> tuple[DataFrame, Callable[[str], str], dict[str, str] | None, int]:
    """The entries' files read, with `__dw_file` and `__dw_row`: (data, the join key of a log path,
    the join key -> the table's own URI when they differ, the number of files)."""
    from pyspark.sql import functions as F

    remote = storage.remote
    if remote:
        from tables.spark.reading.hadoop_route import read_hadoop
        from tables.spark.reading.objectstore_source import objectstore_route, read_objects
    route = objectstore_route(master_of(spark)) if remote else None
    back: dict[str, str] | None = None  # the join key of a file -> the table's own URI, when they differ
    if route in ("datasource", "hadoop"):
        # read in the executors (tables/spark/reading/objectstore_source.py, hadoop_route.py)
        paths = sorted({e.path for e in entries})
        reader = read_hadoop if route == "hadoop" else read_objects
        read = reader(spark, storage, paths, phys_schema)
        data, back, n_files = read.data, read.table_uris, len(read.keys)
        if inputs is not None:
            inputs.extend(storage.uri(storage.resolve(p)) for p in paths)
        return data, read.keys.__getitem__, back, n_files
    if remote:
        spooled = spool_files(spark, storage, sorted({e.path for e in entries}), storage.display())

        def file_of(path: str) -> Path:
            return spooled[path]
    else:
        resolved: dict[str, Path] = {}

        def file_of(path: str) -> Path:
            # each log path resolved by the storage once (10,000 files: 0.25 s less)
            found = resolved.get(path)
            if found is None:
                found = resolved[path] = local_file(storage, path)
            return found

    files = sorted({file_of(e.path) for e in entries})
    small = _many_small(files)
    if small is not None:
        data, uris = _read_small_files(spark, small, phys_schema, storage.display())
    else:
        df, uris = _read_files(spark, files, phys_schema, storage.display())
        data = df.select(
            *[F.col(quote_column(pf["name"])) for pf in phys_schema["fields"]],
            F.col("_metadata.file_path").alias("__dw_file"),
            F.col("_metadata.row_index").alias("__dw_row"),
        )
    if inputs is not None:
        inputs.extend(uris.values())
    n_files = len(files)

    def key_of(path: str) -> str:
        return uris[file_of(path)]

    if remote:
        # the table's own file URIs, not the spool's: the same order and names as Spark
        # reading the store directly would give
        back = {key_of(p): storage.uri(storage.resolve(p)) for p in {e.path for e in entries}}
    return data, key_of, back, n_files


def _join_entries(
    spark: SparkSession,
    data: DataFrame,
    entries: list[ScanEntry],
    key_of: Callable[[str], str],
    parts: list[PartitionColumn],
    extra: Sequence[tuple[str, Any]],
    n_files: int,
) -> DataFrame:
    """The rows joined to their entries (partition values, extra columns), when needed, and filtered by selections."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType, IntegerType, StringType, StructField, StructType

    selections = [e for e in entries if e.rows is not None and len(e.rows)]
    join_needed = bool(parts or extra or selections or len(entries) != n_files)
    if not join_needed:
        return data
    entry_schema = StructType(
        [
            StructField("__dw_key", StringType(), False),
            StructField("__dw_entry", IntegerType(), False),
            StructField("__dw_only", BooleanType(), False),
        ]
        + [StructField(f"__dw_p{i}", spark_type(p.type), True) for i, p in enumerate(parts)]
        + [StructField(f"__dw_x{i}", spark_type(t), True) for i, (_n, t) in enumerate(extra)]
    )
    rows = [
        (key_of(e.path), i, e.only, *typed_partition_values(e.partition_values, parts), *e.extra)
        for i, e in enumerate(entries)
    ]
    table = rows_frame(spark, rows, entry_schema)
    data = data.join(F.broadcast(table), data["__dw_file"] == table["__dw_key"], "inner")
    if selections:
        data = _select_rows(spark, data, entries)
    return data


def _select_rows(spark: SparkSession, data: DataFrame, entries: list[ScanEntry]) -> DataFrame:
    """The joined rows filtered by their entries' selections (rows dropped, or only rows kept)."""
    from pyspark.sql import functions as F

    ids = np.concatenate(
        [np.full(len(e.rows), i, dtype=np.int32) for i, e in enumerate(entries) if e.rows is not None and len(e.rows)]
    )
    idx = np.concatenate([e.rows.astype(np.int64) for e in entries if e.rows is not None and len(e.rows)])
    sel = small_frame(
        spark,
        pa.table({"__dw_sel_entry": pa.array(ids, pa.int32()), "__dw_sel_row": pa.array(idx, pa.int64())}),
    ).withColumn("__dw_hit", F.lit(True))
    if len(idx) <= BROADCAST_SELECTION_ROWS:
        sel = F.broadcast(sel)
    data = data.join(
        sel,
        (data["__dw_entry"] == sel["__dw_sel_entry"]) & (data["__dw_row"] == sel["__dw_sel_row"]),
        "left",
    )
    hit = F.col("__dw_hit").isNotNull()
    return data.where(F.when(F.col("__dw_only"), hit).otherwise(~hit))


def _output_columns(
    cols: _ScanColumns,
    layout: Layout,
    extra: Sequence[tuple[str, Any]],
    file_columns: Sequence[tuple[str, Any]],
    with_position: bool,
    back: dict[str, str] | None,
) -> list[Column]:
    """The result's columns: logical names, extra and file columns, then the position columns."""
    from pyspark.sql import functions as F

    out = []
    for n in cols.wanted:
        if n in cols.void:
            out.append(F.lit(None).alias(n))
        elif n in cols.part_by_name:
            out.append(F.col(f"__dw_p{cols.parts.index(cols.part_by_name[n])}").alias(n))
        else:
            col = F.col(quote_column(physical_name(cols.fields[n], layout.mode)))
            target = spark_type(cols.logical[n]["type"])
            if layout.mode != "none" and isinstance(cols.logical[n]["type"], dict):
                col = col.cast(target)  # nested physical names -> logical (positional)
            out.append(col.alias(n))
    out += [F.col(f"__dw_x{i}").alias(n) for i, (n, _t) in enumerate(extra)]
    out += [F.col(quote_column(n)) for n, _t in file_columns]
    if with_position:
        file_col = F.col("__dw_file")
        if back:
            file_col = F.create_map(*[F.lit(x) for kv in sorted(back.items()) for x in kv])[file_col]
        out += [file_col.alias(FILE_COL), F.col("__dw_row").alias(ROW_COL)]
    return out


def version_entries(storage: Storage, snapshot: Any) -> list[ScanEntry]:
    """Scan entries of a snapshot's active files, their deletion vectors decoded."""
    cache: dict[str, bytes] = {}
    entries = []
    for row in snapshot.files.select(["path", "partitionValues", "deletionVector"]).to_pylist():
        dv = row["deletionVector"]
        rows = read_deletion_vector(storage, dv, f"{storage.display()}/{unquote(row['path'])}", cache) if dv else None
        entries.append(ScanEntry(row["path"], row["partitionValues"], rows=rows))
    return entries


def read_version(
    spark: SparkSession,
    location: str | Storage,
    version: int | None = None,
    columns: list[str] | None = None,
    with_position: bool = False,
    inputs: list[str] | None = None,
) -> DataFrame:
    """The table at `version` (latest when None) as a Spark DataFrame (module contract);
    `inputs` receives the URIs of the files it reads, as `scan`'s does."""
    storage = as_storage(location)
    snap = load_snapshot(storage, version)
    check_readable(snap.protocol, f"{storage.display()} at version {snap.version}")
    layout = Layout.of(snap.metadata, snap.protocol)
    with at_version(f"version {snap.version}"):
        entries = version_entries(storage, snap)
        return scan(spark, storage, layout, entries, columns=columns, with_position=with_position, inputs=inputs)


def preview_rows(
    spark: SparkSession, location: str | Storage, version: int | None, offset: int = 0, limit: int = 100
) -> dict[str, Any]:
    """A page of rows of a version, in (file, row index) order (module contract)."""
    storage = as_storage(location)
    snap = load_snapshot(storage, version)
    check_readable(snap.protocol, f"{storage.display()} at version {snap.version}")
    layout = Layout.of(snap.metadata, snap.protocol)
    with at_version(f"version {snap.version}"):
        df = scan(spark, storage, layout, version_entries(storage, snap), with_position=True)
    offset, limit = max(0, int(offset)), max(0, int(limit))
    page = df.orderBy(FILE_COL, ROW_COL).offset(offset).limit(limit).drop(FILE_COL, ROW_COL)
    out = table_to_json(page.toArrow())
    return {"version": snap.version, **out, "total": df.count(), "offset": offset, "limit": limit}
