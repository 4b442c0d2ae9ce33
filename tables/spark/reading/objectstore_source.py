"""Spark reading an object-store table's data files, on any master, without Delta or Hadoop jars.

Which route a job takes is a setting, DELTAWEB_SPARK_OBJECTSTORE_ROUTE:

- `spool` (the default on a local master): the driver fetches the files through the storage
  layer into a local spool and Spark's Parquet reader reads them there (`read.spool_files`).
  Executors of a cluster cannot see that spool, so a cluster master refuses it.
- `datasource` (the default on any other master): a Python data source (Spark 4's
  `pyspark.sql.datasource`) whose readers run in the executors. The driver resolves and
  confines every path through the storage layer (and checks the files exist, one HEAD each,
  concurrently) before the job; executors get only the resolved bucket URIs and object paths
  plus the store's configuration, build an obstore store with the project's own
  `build_store`, fetch each object and decode it with pyarrow into the read schema (names, or
  Parquet field ids in column-mapping id mode; missing columns null; types cast as Spark's
  Parquet reader would), with each row's file URI and index in its file, as Spark's
  `_metadata.file_path` / `row_index` give them.
- `hadoop` (tables/spark/reading/hadoop_route.py): Spark's own Parquet reader on `s3a://`,
  `abfss://` or `gs://` URIs, the table's credentials passed as per-bucket Hadoop
  configuration in the read's options. Needs the connectors (hadoop-aws, hadoop-azure,
  gcs-connector) on the cluster; this machine has none, so only the configuration is tested.

Secrets: the store configuration travels in one data source option whose name contains
"secret", which Spark's redaction (`spark.redaction.regex`) masks wherever it prints options;
it is never logged here and a store's error is scrubbed of every secret value before it
leaves an executor.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from tables.delta.errors import StorageError
from tables.delta.snapshot.schema.columnmapping import PARQUET_FIELD_ID
from tables.delta.storage.api import Capability, Storage
from tables.delta.storage.backends import all_backends, backend_of
from tables.delta.storage.objectstore_config import parse_location, scrubbed_line, secrets_of
from tables.spark.engine.control import default_parallelism
from tables.spark.engine.masters import is_local

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

ROUTE_ENV = "DELTAWEB_SPARK_OBJECTSTORE_ROUTE"
ROUTES = ("spool", "datasource", "hadoop")
SOURCE_NAME = "deltaweb_objects"
FILE_COL = "__dw_file"
ROW_COL = "__dw_row"
STORE_OPTION = "secret.store"  # "secret" in the name: Spark redacts the value where it shows options
BATCH_ROWS = 65_536  # rows per Arrow batch handed to Spark (fewer, larger batches cost less per row)
SPLIT_BYTES = 128 << 20  # Spark's spark.sql.files.maxPartitionBytes
OPEN_COST = 4 << 20  # Spark's spark.sql.files.openCostInBytes
HEAD_CONCURRENCY = 32
PREFETCH = 4  # objects in flight per task while one is decoded
_ARROW_ID = b"PARQUET:field_id"

# The standard variables of each store kind a driver's process may hold credentials in; they
# are forwarded to executors (whose environment need not have them) as store options. Each
# backend's forwarded_env (tables/delta/storage/backends/); this is the built-in ones' list.
FORWARDED_ENV = {b.kind: b.forwarded_env for b in all_backends()}


# --- the route ----------------------------------------------------------------------------------


def objectstore_route(master: str) -> str:
    """The route Spark jobs on object-store tables take on `master` (see the module's doc)."""
    value = os.environ.get(ROUTE_ENV, "").strip().lower()
    if not value:
        return "spool" if is_local(master) else "datasource"
    if value not in ROUTES:
        raise StorageError(f"{ROUTE_ENV}={value[:40]!r}: expected one of {', '.join(ROUTES)}")
    return value


# --- what executors get: store options ------------------------------------------------------------


def executor_options(storage: Storage) -> dict[str, Any]:
    """The store options an executor builds the table's store with: the standard variables of
    this process's environment for the store's kind (executors' environments need not hold
    them), overridden by the location's stored options. Secrets included: never log this."""
    backend = backend_of(parse_location(storage.location).kind)
    stored = storage.store_options() if Capability.STORE_OPTIONS in storage.capabilities else {}
    out: dict[str, Any] = dict(stored)
    canonical = _canonical_names()
    given = {canonical(k) for k in out}
    for name in backend.forwarded_env:
        # one value per setting: a stored option, else the first of its spellings set here
        if os.environ.get(name) and canonical(name) not in given:
            out[name.lower()] = os.environ[name]
            given.add(canonical(name))
    if backend.executor_extras:
        out.update(backend.executor_extras(given))
    return out


def _canonical_names() -> Callable[[str], str]:
    """The one name of a store setting's spellings (an S3 store refuses a config naming it
    twice): any backend's option prefix dropped, then its synonyms applied."""
    prefixes = [p for b in all_backends() for p in b.option_prefixes]
    synonyms = {k: v for b in all_backends() for k, v in b.synonyms.items()}

    def canonical(name: str) -> str:
        n = name.lower()
        for prefix in prefixes:
            if n.startswith(prefix):
                n = n[len(prefix) :]
                break
        return synonyms.get(n, n)

    return canonical


# --- the data source (its readers run in the executors) ---------------------------------------------


class ObjectFiles(InputPartition):
    """The files one task reads: (bucket URI index, object path, file URI) each."""

    def __init__(self, index: int, files: list[tuple[int, str, str]]) -> None:
        super().__init__(index)
        self.files = files


class ObjectFilesSource(DataSource):
    """Parquet files of an object store as rows: the read schema's columns, then the file's
    URI and the row's index in it. Options: `files` (JSON: the bucket URIs and, per file, its
    bucket, object path, URI and size), `secret.store` (JSON: the store options), `tasks`."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def reader(self, schema: StructType) -> DataSourceReader:
        return ObjectFilesReader(self.options, schema)


class ObjectFilesReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        listing = json.loads(options["files"])
        self.stores: list[str] = listing["stores"]
        self.files: list[list[Any]] = listing["files"]
        self.store_options: dict[str, Any] = json.loads(options[STORE_OPTION])
        self.tasks = max(1, int(options.get("tasks", "1")))
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        """Files packed into tasks as Spark packs file splits: at most SPLIT_BYTES (less when
        the total would give fewer tasks than cores), each file costing OPEN_COST more."""
        total = sum(int(f[3]) + OPEN_COST for f in self.files)
        target = min(SPLIT_BYTES, max(OPEN_COST, total // self.tasks))
        parts: list[list[tuple[int, str, str]]] = []
        size = 0
        for store, obj, uri, nbytes in sorted(self.files, key=lambda f: -int(f[3])):
            if not parts or (parts[-1] and size + int(nbytes) + OPEN_COST > target):
                parts.append([])
                size = 0
            parts[-1].append((store, obj, uri))
            size += int(nbytes) + OPEN_COST
        return [ObjectFiles(i, files) for i, files in enumerate(parts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ObjectFiles)
        target = arrow_schema(self.schema)
        data_fields = [f for f in target if f.name not in (FILE_COL, ROW_COL)]
        stores = {
            i: _executor_store(self.stores[i], self.store_options) for i in sorted({f[0] for f in partition.files})
        }

        def fetch(item: tuple[int, str, str]) -> Any:
            return _fetch(stores[item[0]], item[1], item[2], self.store_options)

        # the next objects are fetched while one is decoded (PREFETCH in flight): a task over
        # many small files waits for one round trip at a time, not one per file
        items = iter(partition.files)
        with ThreadPoolExecutor(PREFETCH) as pool:
            pending = deque((item, pool.submit(fetch, item)) for item in islice(items, PREFETCH))
            while pending:
                (_store, _obj, uri), future = pending.popleft()
                data = future.result()
                following = next(items, None)
                if following is not None:
                    pending.append((following, pool.submit(fetch, following)))
                yield from _file_batches(data, uri, data_fields, target)


def _executor_store(bucket_uri: str, options: dict[str, Any]) -> Any:
    from tables.delta.storage.objectstore_config import build_store

    try:
        return build_store(parse_location(bucket_uri), options)
    except Exception as exc:
        raise RuntimeError(f"{bucket_uri}: the store could not be configured: {scrub_error(exc, options)}") from None


def scrub_error(exc: BaseException, options: Mapping[str, Any]) -> str:
    """A store's error as one line, without any secret value or query string."""
    text = scrubbed_line(str(exc), secrets_of(options)) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:300]}"


def _fetch(store: Any, obj: str, uri: str, options: Mapping[str, Any]) -> Any:
    """An object's bytes (runs in an executor); errors name the file, never a secret."""
    import obstore

    try:
        return obstore.get(store, obj).bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"{uri}: the data file is missing") from None
    except Exception as exc:
        raise RuntimeError(f"{uri}: {scrub_error(exc, options)}") from None


def _file_batches(data: Any, uri: str, fields: list[pa.Field], target: pa.Schema) -> Iterator[pa.RecordBatch]:
    """One object's rows as batches of the target schema (runs in an executor); `data` is its
    bytes, or a local file's path (tables/spark/reading/local_source.py)."""
    import pyarrow.parquet as pq

    opened = data if isinstance(data, str) else pa.BufferReader(pa.py_buffer(memoryview(data)))
    pf = pq.ParquetFile(opened, coerce_int96_timestamp_unit="us")
    source = list(pf.schema_arrow)
    picks = [_match(f, source) for f in fields]
    columns = sorted({source[i].name for i in picks if i is not None})
    if columns:
        batches: Iterator[Any] = pf.iter_batches(batch_size=BATCH_ROWS, columns=columns, use_threads=False)
    else:  # only partition values or nulls wanted: the row count is in the footer
        total = pf.metadata.num_rows
        batches = iter([min(BATCH_ROWS, total - s) for s in range(0, total, BATCH_ROWS)])
    start = 0
    for batch in batches:
        n = batch if isinstance(batch, int) else batch.num_rows
        arrays = [
            pa.nulls(n, field.type) if i is None else _conform(batch.column(source[i].name), field.type)
            for field, i in zip(fields, picks, strict=True)
        ]
        arrays.append(pa.array([uri], pa.string()).take(np.zeros(n, dtype=np.int32)))  # n copies, in C++
        arrays.append(pa.array(np.arange(start, start + n, dtype=np.int64)))
        start += n
        yield pa.RecordBatch.from_arrays(arrays, schema=target)


def _field_id(field: pa.Field) -> bytes | None:
    return (field.metadata or {}).get(_ARROW_ID)


def _match(want: pa.Field, have: list[pa.Field]) -> int | None:
    """The index of the file's field `want` reads: by Parquet field id when it has one (column
    mapping id mode), else by name, exactly, then ignoring case (as Spark's reader does)."""
    fid = _field_id(want)
    if fid is not None:
        for i, f in enumerate(have):
            if _field_id(f) == fid:
                return i
        if any(_field_id(f) is not None for f in have):
            return None
    for i, f in enumerate(have):
        if f.name == want.name:
            return i
    lowered = [i for i, f in enumerate(have) if f.name.lower() == want.name.lower()]
    return lowered[0] if len(lowered) == 1 else None


def _conform(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """An array of the file's type as `target`: struct fields matched by id or name (missing
    ones null), list and map values conformed, other types cast (timestamps truncated to
    microseconds, as Spark reads them)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    src = arr.type
    if src == target:
        return arr
    mask = arr.is_null() if arr.null_count else None
    if pa.types.is_struct(target) and pa.types.is_struct(src):
        have = [src.field(j) for j in range(src.num_fields)]
        children = []
        for tf in target:
            i = _match(tf, have)
            children.append(pa.nulls(len(arr), tf.type) if i is None else _conform(arr.field(i), tf.type))
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_map(target) and pa.types.is_map(src):
        keys = _conform(arr.keys, target.key_type)
        items = _conform(arr.items, target.item_type)
        return pa.MapArray.from_arrays(arr.offsets, keys, items, type=target, mask=mask)
    if pa.types.is_list(target) and (pa.types.is_list(src) or pa.types.is_large_list(src)):
        values = _conform(arr.values, target.value_type)
        offsets = arr.offsets.cast(pa.int32())
        return pa.ListArray.from_arrays(offsets, values, type=target, mask=mask)
    if pa.types.is_dictionary(src):
        return _conform(arr.dictionary_decode(), target)
    return arr.cast(target, safe=not pa.types.is_timestamp(target))


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark expects for `schema`, every field nullable, Parquet field ids
    kept in the fields' metadata (what the reader matches columns by in id mode)."""
    return pa.schema([_arrow_field(f) for f in schema.fields])


def _arrow_field(f: Any) -> pa.Field:
    fid = (f.metadata or {}).get(PARQUET_FIELD_ID)
    meta = {_ARROW_ID: str(fid).encode()} if fid is not None else None
    return pa.field(f.name, _arrow_type(f.dataType), True, meta)


def _arrow_type(dt: DataType) -> pa.DataType:
    from pyspark.sql.pandas.types import to_arrow_type
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(dt, StructType):
        return pa.struct([_arrow_field(f) for f in dt.fields])
    if isinstance(dt, ArrayType):
        return pa.list_(pa.field("element", _arrow_type(dt.elementType), True))
    if isinstance(dt, MapType):
        return pa.map_(
            pa.field("key", _arrow_type(dt.keyType), False), pa.field("value", _arrow_type(dt.valueType), True)
        )
    return to_arrow_type(dt, timezone="UTC")  # instants in UTC (PySpark 4.3 asks for the zone by name)


def _nullable(t: Any) -> Any:
    """A Delta/Spark JSON type with every field, element and value nullable (as Spark's file
    readers read a schema: a file may lack a column)."""
    if not isinstance(t, dict):
        return t
    if t.get("type") == "struct":
        return {**t, "fields": [{**f, "nullable": True, "type": _nullable(f["type"])} for f in t["fields"]]}
    if t.get("type") == "array":
        return {**t, "containsNull": True, "elementType": _nullable(t["elementType"])}
    if t.get("type") == "map":
        return {
            **t,
            "valueContainsNull": True,
            "keyType": _nullable(t["keyType"]),
            "valueType": _nullable(t["valueType"]),
        }
    return t


# --- the driver's side ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ObjectRead:
    """Data files read on the executors: `data` has the read schema's columns, then FILE_COL
    (`keys[log path]` for each file) and ROW_COL (the row's index in its file); `table_uris`
    maps a FILE_COL value back to the table's own URI when the two differ (hadoop route)."""

    data: DataFrame
    keys: dict[str, str]
    table_uris: dict[str, str] | None


def _missing_error(where: str, missing: list[str]) -> StorageError:
    shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    return StorageError(f"{where}: {len(missing)} data file(s) are missing: {shown}", files=missing[:100])


def _sizes(storage: Storage, paths: list[str], keys: dict[str, str]) -> dict[str, int]:
    """Each file's size, one HEAD per file (HEAD_CONCURRENCY in flight); a missing file is
    named as the log names it, before any task runs."""

    def head(p: str) -> int | None:
        try:
            return storage.head(keys[p]).size
        except FileNotFoundError:
            return None

    with ThreadPoolExecutor(max(1, min(HEAD_CONCURRENCY, len(paths)))) as pool:
        sizes = dict(zip(paths, pool.map(head, paths), strict=True))
    missing = [unquote(p) for p in paths if sizes[p] is None]
    if missing:
        raise _missing_error(storage.display(), missing)
    return sizes  # type: ignore[return-value]


def read_objects(spark: SparkSession, storage: Storage, paths: list[str], schema: dict[str, Any]) -> ObjectRead:
    """The rows of an object-store table's data files (log paths, resolved and confined here)
    read in the executors by this module's data source (the "datasource" route; the "hadoop"
    route is tables/spark/reading/hadoop_route.py), with `schema` (the Parquet read schema, Delta JSON)."""
    keys = {p: storage.resolve(p) for p in paths}  # PathOutsideRootsError before anything runs
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    refs = {p: storage.object_ref(keys[p]) for p in paths}  # type: ignore[attr-defined]
    uris = {p: storage.uri(keys[p]) for p in paths}
    sizes = _sizes(storage, paths, keys)
    buckets = sorted({bucket for bucket, _obj in refs.values()})
    index = {b: i for i, b in enumerate(buckets)}
    listing = {"stores": buckets, "files": [[index[refs[p][0]], refs[p][1], uris[p], sizes[p]] for p in paths]}
    read_schema = StructType.fromJson(_nullable({"type": "struct", "fields": schema["fields"]}))
    read_schema = StructType(
        [*read_schema.fields, StructField(FILE_COL, StringType()), StructField(ROW_COL, LongType())]
    )
    # a Connect client registers it in its session on the server (the class travels by
    # reference: the server's Python workers import this module)
    spark.dataSource.register(ObjectFilesSource)
    df = (
        spark.read.format(SOURCE_NAME)
        .schema(read_schema)
        .option("files", json.dumps(listing))
        .option(STORE_OPTION, json.dumps(executor_options(storage)))
        .option("tasks", str(default_parallelism(spark)))
        .load()
    )
    return ObjectRead(df, uris, None)
