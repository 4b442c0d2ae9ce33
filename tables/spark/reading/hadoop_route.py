"""The hadoop route of Spark jobs on object-store tables: Spark's own Parquet reader opens
`s3a://`, `abfss://` or `gs://` URIs through the Hadoop connectors the cluster has
(hadoop-aws, hadoop-azure, gcs-connector), given this table's credentials as the read's
Hadoop configuration (per bucket or account). The core still picks and confines every file;
without the connector the error names the jar and the route that needs none."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from tables.delta.errors import StorageError
from tables.delta.storage.api import Storage
from tables.delta.storage.backends import Backend, all_backends, backend_of
from tables.delta.storage.objectstore_config import ObjectLocation, is_secret_option, parse_location
from tables.spark.reading.names import escape_glob, quote_column
from tables.spark.reading.objectstore_source import (
    FILE_COL,
    ROUTE_ENV,
    ROW_COL,
    ObjectRead,
    executor_options,
    scrub_error,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _backend(storage: Storage, loc: ObjectLocation) -> Backend:
    """The backend of a location, refused when it names no Hadoop connector to route to."""
    backend = backend_of(loc.kind)
    if backend.hadoop_scheme is None:
        raise StorageError(
            f"{storage.display()}: the hadoop route does not serve this store; set {ROUTE_ENV}=datasource"
        )
    return backend


def _authority(storage: Storage, backend: Backend, loc: ObjectLocation) -> str:
    try:
        return backend.hadoop_authority(loc, lambda: executor_options(storage))
    except StorageError as exc:
        raise StorageError(f"{storage.display()}: {exc}") from None


def hadoop_uri(storage: Storage, key: str) -> str:
    """The URI Hadoop's connector opens for a key: s3a://bucket/key,
    abfss://container@account.dfs.core.windows.net/key, gs://bucket/key."""
    bucket_uri, obj = storage.object_ref(key)  # type: ignore[attr-defined]
    loc = parse_location(bucket_uri)
    backend = _backend(storage, loc)
    return f"{backend.hadoop_scheme}://{_authority(storage, backend, loc)}/{obj}"


def hadoop_options(storage: Storage) -> dict[str, str]:
    """The Hadoop configuration (per bucket or account, so tables with other credentials do
    not share it) that gives Spark's connectors this table's credentials: passed as the read's
    options, which Spark's file sources merge into the Hadoop configuration of that read.
    Empty when the credentials come from the cluster itself (instance roles, managed identity)."""
    opts = {k.lower(): str(v) for k, v in executor_options(storage).items()}
    loc = parse_location(storage.location)
    backend = _backend(storage, loc)
    authority = _authority(storage, backend, loc)
    # every read turns off the cache of the connectors whose credentials are per bucket or
    # account (the session is shared: a cached file system would keep another table's)
    out = {f"fs.{b.hadoop_scheme}.impl.disable.cache": "true" for b in all_backends() if b.hadoop_uncached}
    try:
        out.update(backend.hadoop_conf(loc, opts, authority))
    except StorageError as exc:
        raise StorageError(f"{storage.display()}: {exc}") from None
    return out


def redacted(options: Mapping[str, str]) -> dict[str, str]:
    """Options as they may be shown: secret values masked."""
    return {k: "********" if is_secret_option(k) else v for k, v in options.items()}


def read_hadoop(spark: SparkSession, storage: Storage, paths: list[str], schema: dict[str, Any]) -> ObjectRead:
    """The rows of an object-store table's data files (log paths, resolved and confined here)
    read by Spark's own Parquet reader through the cluster's Hadoop connector, with `schema`
    (the Parquet read schema, Delta JSON); FILE_COL and ROW_COL as read_objects gives them."""
    keys = {p: storage.resolve(p) for p in paths}  # PathOutsideRootsError before anything runs
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    uris = {p: hadoop_uri(storage, keys[p]) for p in paths}
    options = hadoop_options(storage)
    # data source options with these words are masked where Spark shows a plan's options
    spark.conf.set("spark.sql.redaction.options.regex", "(?i)url|key|secret|token|sas|password")
    try:
        df = (
            spark.read.options(**options)
            .schema(StructType.fromJson(schema))
            .parquet(*[escape_glob(u) for u in sorted(set(uris.values()))])
        )
        listed = {unquote(u): u for u in df.inputFiles()}
    except Exception as exc:  # Py4J / analysis errors: one line, no secret
        raise _hadoop_error(storage, exc, options) from None
    keyed = {p: listed.get(unquote(u), u) for p, u in uris.items()}
    data = df.select(
        *[F.col(quote_column(f["name"])) for f in schema["fields"]],
        F.col("_metadata.file_path").alias(FILE_COL),
        F.col("_metadata.row_index").alias(ROW_COL),
    )
    back = {keyed[p]: storage.uri(keys[p]) for p in paths}
    return ObjectRead(data, keyed, back)


def _hadoop_error(storage: Storage, exc: BaseException, options: Mapping[str, str]) -> StorageError:
    text = str(exc)
    backend = backend_of(parse_location(storage.location).kind)
    scheme = backend.hadoop_scheme
    if "No FileSystem for scheme" in text or "UnsupportedFileSystem" in text or "ClassNotFound" in text:
        return StorageError(
            f"{storage.display()}: Spark has no Hadoop connector for {scheme}:// ({backend.hadoop_jar}) on this "
            f"cluster; install it, or set {ROUTE_ENV}=datasource (no jars needed)"
        )
    if "PATH_NOT_FOUND" in text or "FileNotFoundException" in text:
        return StorageError(f"{storage.display()}: Spark's connector did not find a data file of this version")
    line = scrub_error(exc, options)  # masks every secret option's value (secrets_of)
    return StorageError(f"{storage.display()}: Spark could not read the data files through {scheme}://: {line}")
