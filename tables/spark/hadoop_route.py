"""The hadoop route of Spark jobs on object-store tables: Spark's own Parquet reader opens
`s3a://`, `abfss://` or `gs://` URIs through the Hadoop connectors the cluster has
(hadoop-aws, hadoop-azure, gcs-connector), given this table's credentials as the read's
Hadoop configuration (per bucket or account). The core still picks and confines every file;
without the connector the error names the jar and the route that needs none."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from tables.delta.errors import StorageError
from tables.delta.objectstore_config import is_secret_option, parse_location
from tables.delta.storage import Storage
from tables.spark.names import escape_glob, quote_column
from tables.spark.objectstore_source import FILE_COL, ROUTE_ENV, ROW_COL, ObjectRead, executor_options, scrub_error

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HADOOP_SCHEMES = {"s3": "s3a", "az": "abfss", "gs": "gs"}
HADOOP_JARS = {"s3": "hadoop-aws", "az": "hadoop-azure", "gs": "gcs-connector"}


def hadoop_uri(storage: Storage, key: str) -> str:
    """The URI Hadoop's connector opens for a key: s3a://bucket/key,
    abfss://container@account.dfs.core.windows.net/key, gs://bucket/key."""
    bucket_uri, obj = storage.object_ref(key)  # type: ignore[attr-defined]
    loc = parse_location(bucket_uri)
    if loc.kind == "az":
        host = loc.host if loc.host and ".dfs." in loc.host else f"{_azure_account(storage, loc)}.dfs.core.windows.net"
        return f"abfss://{loc.bucket}@{host}/{obj}"
    return f"{HADOOP_SCHEMES[loc.kind]}://{loc.bucket}/{obj}"


def _azure_account(storage: Storage, loc: Any) -> str:
    account = loc.account or executor_options(storage).get("azure_storage_account_name")
    if not account:
        raise StorageError(f"{storage.display()}: no Azure storage account named for the Hadoop route")
    return str(account)


def hadoop_options(storage: Storage) -> dict[str, str]:
    """The Hadoop configuration (per bucket or account, so tables with other credentials do
    not share it) that gives Spark's connectors this table's credentials: passed as the read's
    options, which Spark's file sources merge into the Hadoop configuration of that read.
    Empty when the credentials come from the cluster itself (instance roles, managed identity)."""
    opts = {k.lower(): str(v) for k, v in executor_options(storage).items()}
    loc = parse_location(storage.location)
    out: dict[str, str] = {"fs.s3a.impl.disable.cache": "true", "fs.abfss.impl.disable.cache": "true"}
    if loc.kind == "s3":
        pre = f"fs.s3a.bucket.{loc.bucket}."

        def opt(*names: str) -> str | None:
            return next((opts[n] for n in names if opts.get(n)), None)

        key_id, secret = opt("aws_access_key_id", "access_key_id"), opt("aws_secret_access_key", "secret_access_key")
        token = opt("aws_session_token", "aws_token", "session_token", "token")
        if key_id and secret:
            out[pre + "access.key"] = key_id
            out[pre + "secret.key"] = secret
            provider = "TemporaryAWSCredentialsProvider" if token else "SimpleAWSCredentialsProvider"
            out[pre + "aws.credentials.provider"] = f"org.apache.hadoop.fs.s3a.{provider}"
            if token:
                out[pre + "session.token"] = token
        region = opt("aws_region", "aws_default_region", "region")
        if region:
            out[pre + "endpoint.region"] = region
        endpoint = opt("aws_endpoint_url", "aws_endpoint", "endpoint_url", "endpoint")
        if endpoint:  # an S3-compatible server: path-style requests, plain HTTP when it says so
            out[pre + "endpoint"] = endpoint
            out[pre + "path.style.access"] = "true"
            out[pre + "connection.ssl.enabled"] = str(endpoint.startswith("https://")).lower()
        return out
    if loc.kind == "az":
        host = hadoop_uri(storage, "").split("@", 1)[1].split("/", 1)[0] if loc.bucket else ""
        key = opts.get("azure_storage_account_key") or opts.get("azure_storage_access_key") or opts.get("account_key")
        sas = opts.get("azure_storage_sas_key") or opts.get("sas_key") or opts.get("azure_storage_sas_token")
        client_id, client_secret = opts.get("azure_client_id"), opts.get("azure_client_secret")
        if key:
            out[f"fs.azure.account.key.{host}"] = key
        elif sas:
            out[f"fs.azure.account.auth.type.{host}"] = "SAS"
            out[f"fs.azure.sas.fixed.token.{host}"] = sas
        elif client_id and client_secret and opts.get("azure_tenant_id"):
            out[f"fs.azure.account.auth.type.{host}"] = "OAuth"
            out[f"fs.azure.account.oauth.provider.type.{host}"] = (
                "org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider"
            )
            out[f"fs.azure.account.oauth2.client.id.{host}"] = client_id
            out[f"fs.azure.account.oauth2.client.secret.{host}"] = client_secret
            out[f"fs.azure.account.oauth2.client.endpoint.{host}"] = (
                f"https://login.microsoftonline.com/{opts['azure_tenant_id']}/oauth2/token"
            )
        return out
    raw = opts.get("google_service_account_key") or opts.get("service_account_key")
    if raw:
        try:
            info = json.loads(raw)
        except ValueError:
            raise StorageError(f"{storage.display()}: the service-account key is not JSON") from None
        out.update(
            {
                "fs.gs.auth.type": "SERVICE_ACCOUNT_JSON_KEYFILE",
                "fs.gs.auth.service.account.email": str(info.get("client_email", "")),
                "fs.gs.auth.service.account.private.key.id": str(info.get("private_key_id", "")),
                "fs.gs.auth.service.account.private.key": str(info.get("private_key", "")),
            }
        )
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
    kind = parse_location(storage.location).kind
    scheme = HADOOP_SCHEMES[kind]
    if "No FileSystem for scheme" in text or "UnsupportedFileSystem" in text or "ClassNotFound" in text:
        return StorageError(
            f"{storage.display()}: Spark has no Hadoop connector for {scheme}:// ({HADOOP_JARS[kind]}) on this "
            f"cluster; install it, or set {ROUTE_ENV}=datasource (no jars needed)"
        )
    if "PATH_NOT_FOUND" in text or "FileNotFoundException" in text:
        return StorageError(f"{storage.display()}: Spark's connector did not find a data file of this version")
    line = scrub_error(exc, options)  # masks every secret option's value (secrets_of)
    return StorageError(f"{storage.display()}: Spark could not read the data files through {scheme}://: {line}")
