"""The Azure Blob Storage / ADLS Gen2 backend: `az://container/prefix` and
`abfss://container@account.dfs.core.windows.net/prefix` (also azure://, adl://, abfs://), the
AZURE_* environment and connection strings, obstore's AzureStore, and hadoop-azure's
per-account configuration for Spark."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tables.delta.errors import StorageError
from tables.delta.storage.backends.registry import Backend

if TYPE_CHECKING:
    from tables.delta.storage.location import ObjectLocation

CONNECTION_STRING = "azure_storage_connection_string"
CONNECTION_STRING_ENV = "AZURE_STORAGE_CONNECTION_STRING"


def build(loc: ObjectLocation, config: dict[str, Any], client: dict[str, Any], retry: Mapping[str, Any]) -> Any:
    """An AzureStore for the container of `loc` (in the account its host names, unless the
    options name one)."""
    from obstore.store import AzureStore

    if loc.account and "account_name" not in config and "azure_storage_account_name" not in config:
        config["account_name"] = loc.account
    if loc.host and loc.host.endswith(".dfs.fabric.microsoft.com"):
        config.setdefault("use_fabric_endpoint", True)
    return AzureStore(loc.bucket, config=config, client_options=client, retry_config=retry)


def connection_string(text: str, client: dict[str, Any]) -> dict[str, Any]:
    """Azure's `AccountName=...;AccountKey=...;BlobEndpoint=...` as store config."""
    parts = dict(p.split("=", 1) for p in text.split(";") if "=" in p)
    out: dict[str, Any] = {}
    if parts.get("UseDevelopmentStorage", "").lower() == "true":
        out["use_emulator"] = True
        client.setdefault("allow_http", True)
    if "AccountName" in parts:
        out["account_name"] = parts["AccountName"]
    if "AccountKey" in parts:
        out["account_key"] = parts["AccountKey"]
    if "SharedAccessSignature" in parts:
        out["sas_key"] = parts["SharedAccessSignature"]
    if "BlobEndpoint" in parts:
        out["endpoint"] = parts["BlobEndpoint"]
        if parts["BlobEndpoint"].startswith("http://"):
            client.setdefault("allow_http", True)
    return out


def expand_option(name: str, value: Any, client: dict[str, Any]) -> dict[str, Any] | None:
    """A connection string among the options, as the store config it stands for (obstore
    takes none)."""
    return connection_string(str(value), client) if name == CONNECTION_STRING else None


def env_config(config: dict[str, Any], client: dict[str, Any]) -> dict[str, Any]:
    """The environment's connection string beneath the options, unless they hold a key already."""
    conn = os.environ.get(CONNECTION_STRING_ENV)
    if conn and not any(k in config for k in ("account_key", "azure_storage_account_key", "sas_key")):
        return {**connection_string(conn, client), **config}
    return config


def hadoop_authority(loc: ObjectLocation, options: Callable[[], Mapping[str, Any]]) -> str:
    """`container@account.dfs.core.windows.net` (the host as written when it is a dfs one)."""
    if loc.host and ".dfs." in loc.host:
        return f"{loc.bucket}@{loc.host}"
    account = loc.account or options().get("azure_storage_account_name")
    if not account:
        raise StorageError("no Azure storage account named for the Hadoop route")
    return f"{loc.bucket}@{account}.dfs.core.windows.net"


def hadoop_conf(loc: ObjectLocation, opts: Mapping[str, str], authority: str) -> dict[str, str]:
    """hadoop-azure's configuration for the account's host: its key, a SAS, or a service
    principal (none when the cluster's managed identity serves)."""
    host = authority.split("@", 1)[1]
    key = opts.get("azure_storage_account_key") or opts.get("azure_storage_access_key") or opts.get("account_key")
    sas = opts.get("azure_storage_sas_key") or opts.get("sas_key") or opts.get("azure_storage_sas_token")
    client_id, client_secret = opts.get("azure_client_id"), opts.get("azure_client_secret")
    out: dict[str, str] = {}
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


BACKEND = Backend(
    kind="az",
    schemes=("az", "azure", "adl", "abfs", "abfss"),
    named_schemes=("az", "abfss"),
    build=build,
    container="container",
    accounts=True,
    option_prefixes=("azure_storage_", "azure_"),
    env_prefixes=("AZURE_",),
    secret_options={"azure_storage_account_key": "Azure account key", "azure_storage_sas_key": "Azure SAS token"},
    long_secrets=("azure_storage_sas_key",),
    synonyms={"access_key": "account_key", "sas_token": "sas_key"},
    allow_http_env="AZURE_ALLOW_HTTP",
    secret_env=(
        "AZURE_STORAGE_ACCOUNT_KEY",
        "AZURE_STORAGE_ACCESS_KEY",
        "AZURE_STORAGE_SAS_KEY",
        "AZURE_STORAGE_SAS_TOKEN",
        CONNECTION_STRING_ENV,
        "AZURE_CLIENT_SECRET",
        "AZURE_STORAGE_TOKEN",
    ),
    expand_option=expand_option,
    env_config=env_config,
    forwarded_env=(
        "AZURE_STORAGE_ACCOUNT_NAME",
        "AZURE_STORAGE_ACCOUNT_KEY",
        "AZURE_STORAGE_ACCESS_KEY",
        "AZURE_STORAGE_SAS_KEY",
        "AZURE_STORAGE_TOKEN",
        "AZURE_STORAGE_ENDPOINT",
        "AZURE_STORAGE_USE_EMULATOR",
        CONNECTION_STRING_ENV,
        "AZURE_ALLOW_HTTP",
        "AZURE_CLIENT_ID",
        "AZURE_CLIENT_SECRET",
        "AZURE_TENANT_ID",
    ),
    hadoop_scheme="abfss",
    hadoop_jar="hadoop-azure",
    hadoop_uncached=True,
    hadoop_authority=hadoop_authority,
    hadoop_conf=hadoop_conf,
)
