"""Object-store locations and their stores: parsing `s3://`, `gs://`, `az://` and `abfss://`
locations, credentials from the environment and per-location options (never echoed), the
store built through obstore, and the named errors a store's failures become.

The storage class over such a store is in objectstore.py."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from tables.delta.errors import PathOutsideRootsError, StorageError

# scheme as written -> the store kind it names
OBJECT_SCHEMES = {
    "s3": "s3",
    "s3a": "s3",
    "gs": "gs",
    "az": "az",
    "azure": "az",
    "adl": "az",
    "abfs": "az",
    "abfss": "az",
}

# A bounded retry with exponential backoff (obstore retries 5xx, dropped connections and
# timeouts of safe requests); then the request fails with a named error instead of hanging.
RETRY_CONFIG: dict[str, Any] = {
    "max_retries": 3,
    "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=2), "base": 2},
    "retry_timeout": timedelta(seconds=30),
}
CLIENT_DEFAULTS: dict[str, Any] = {"connect_timeout": "5s", "timeout": "300s"}

# HTTP client options (obstore's ClientConfig) as option names; everything else goes to the store
_CLIENT_KEYS = {
    "allow_http",
    "allow_invalid_certificates",
    "connect_timeout",
    "default_content_type",
    "http1_only",
    "http2_only",
    "pool_idle_timeout",
    "pool_max_idle_per_host",
    "proxy_url",
    "proxy_ca_certificate",
    "proxy_excludes",
    "randomize_addresses",
    "read_timeout",
    "timeout",
    "user_agent",
}
_BOOL_CLIENT_KEYS = {"allow_http", "allow_invalid_certificates", "http1_only", "http2_only", "randomize_addresses"}
# Plain HTTP (emulators, private endpoints) from the environment, as obstore would read it were
# no client options passed (passing any replaces the environment's)
_ALLOW_HTTP_ENV = {"s3": "AWS_ALLOW_HTTP", "az": "AZURE_ALLOW_HTTP", "gs": "GOOGLE_ALLOW_HTTP"}
# delta-rs storage options with no meaning to obstore (locking providers, rename safety)
_IGNORED_KEYS = {"s3_allow_unsafe_rename", "s3_locking_provider", "dynamodb_table_name", "s3_lock_timeout_seconds"}
# option and environment names whose values are secrets (scrubbed from any message)
_SECRET_WORDS = ("secret", "key", "token", "password", "sas", "connection_string", "credential")
_ENV_SECRETS = (
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_ACCESS_KEY",
    "AZURE_STORAGE_SAS_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_CLIENT_SECRET",
    "AZURE_STORAGE_TOKEN",
    "GOOGLE_SERVICE_ACCOUNT_KEY",
)

ACCESS_CODES = (
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "AccessDenied",
    "ExpiredToken",
    "InvalidToken",
    "AuthorizationHeaderMalformed",
    "AuthenticationFailed",
    "AuthorizationFailure",
    "AuthorizationPermissionMismatch",
    "InvalidClientTokenId",
)
ERROR_CODE = re.compile(r"<Code>([A-Za-z0-9]+)</Code>")
HTTP_STATUS = re.compile(r"status code: (\d{3})")


# --- errors --------------------------------------------------------------------------------------


class ObjectStoreAccessError(StorageError):
    """The object store refused the credentials (wrong, expired, or without the permission)."""

    code = "storage_access_denied"


class BucketNotFoundError(StorageError):
    """The bucket (or container) a location names does not exist."""

    code = "storage_bucket_not_found"


class StorageUnavailableError(StorageError):
    """The object store did not answer after the bounded retries (network, 5xx, timeouts)."""

    code = "storage_unavailable"


class ConditionalPutUnsupportedError(StorageError):
    """A store that cannot put an object only if absent: commits to it are refused."""

    code = "storage_no_conditional_put"


# --- locations -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ObjectLocation:
    """A parsed object-store location: scheme as written, store kind, bucket, key prefix."""

    scheme: str
    kind: str  # s3 | gs | az
    bucket: str  # bucket, or Azure container
    prefix: str  # the key prefix, no slash at either end ("" for the bucket root)
    account: str | None = None  # Azure storage account when the URI names it
    host: str | None = None  # the Azure host as written (abfss://container@<host>/...)

    @property
    def store_id(self) -> tuple[str, str, str | None]:
        return (self.kind, self.bucket, self.account)

    @property
    def root(self) -> str:
        """The canonical prefix URI confinement compares (s3a is s3)."""
        bucket = f"{self.bucket}@{self.account}" if self.account else self.bucket
        return f"{self.kind}://{bucket}/{self.prefix}".rstrip("/")

    def uri(self, path: str | None = None) -> str:
        """The URI of an object path in this bucket (the location's own prefix when None)."""
        netloc = f"{self.bucket}@{self.host}" if self.host else self.bucket
        key = self.prefix if path is None else path
        return f"{self.scheme}://{netloc}/{key}".rstrip("/") if key else f"{self.scheme}://{netloc}"

    def contains(self, store_id: tuple[str, str, str | None], path: str) -> bool:
        """Whether object `path` of the store `store_id` lies at or under this prefix."""
        kind, bucket, account = store_id
        if kind != self.kind or bucket != self.bucket:
            return False
        if self.account and account and self.account != account:
            return False
        return not self.prefix or path == self.prefix or path.startswith(self.prefix + "/")


def scheme_of(location: str) -> str | None:
    """The lower-cased scheme of a URI, None for a plain path."""
    head, sep, _ = location.partition("://")
    return head.lower() if sep and head and head.replace("+", "").replace("-", "").isalnum() else None


def is_object_location(location: str) -> bool:
    return scheme_of(location) in OBJECT_SCHEMES


def normalize_key(path: str) -> str | None:
    """A key with `.`, `..` and empty segments resolved; None when `..` climbs above the start."""
    out: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not out:
                return None
            out.pop()
        else:
            out.append(part)
    return "/".join(out)


def parse_location(location: str) -> ObjectLocation:
    """Parse `scheme://bucket/prefix` (Azure: `abfss://container@account.host/prefix`).

    The path is taken literally (no query or fragment: `?` and `#` are legal in keys); a
    location with credentials in it is refused without repeating them."""
    text = str(location).strip()
    scheme = scheme_of(text)
    if scheme not in OBJECT_SCHEMES:
        raise StorageError(f"{text[:200]}: not an object-store location (s3://, s3a://, gs://, az://, abfss://)")
    kind = OBJECT_SCHEMES[scheme]
    rest = text.split("://", 1)[1]
    netloc, _, path = rest.partition("/")
    account = host = None
    if "@" in netloc:
        user, _, host_part = netloc.rpartition("@")
        if kind != "az" or ":" in user or not host_part:
            raise StorageError(
                f"{scheme}://...: credentials in a location are not accepted; pass them in the environment "
                "or the location's storage options"
            )
        netloc, host = user, host_part.lower()
        account = host.split(".", 1)[0]
    if not netloc:
        raise StorageError(f"{text[:200]}: the location names no bucket")
    prefix = normalize_key(path)
    if prefix is None:
        raise PathOutsideRootsError(f"{text[:200]}: '..' climbs out of the bucket", file=text[:300])
    return ObjectLocation(scheme, kind, netloc, prefix, account, host)


# --- options and credentials -----------------------------------------------------------------------


def _option_name(key: str, kind: str) -> str:
    name = key.strip().lower()
    for p in {"s3": ("aws_",), "az": ("azure_storage_", "azure_"), "gs": ("google_",)}[kind]:
        if name.startswith(p) and name[len(p) :] in _CLIENT_KEYS:
            return name[len(p) :]
    return name


def _split_options(kind: str, options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(store config, client options) from delta-rs style storage options."""
    config: dict[str, Any] = {}
    client: dict[str, Any] = dict(CLIENT_DEFAULTS)
    for key, value in options.items():
        name = _option_name(key, kind)
        if name.removeprefix("aws_") in _IGNORED_KEYS:
            continue
        if name in _CLIENT_KEYS:
            if name in _BOOL_CLIENT_KEYS and isinstance(value, str):
                value = value.strip().lower() in ("1", "true", "yes", "on")
            client[name] = value
        elif kind == "az" and name == "azure_storage_connection_string":
            config.update(_connection_string(str(value), client))
        else:
            config[name] = value
    if kind == "az":
        conn = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
        if conn and not any(k in config for k in ("account_key", "azure_storage_account_key", "sas_key")):
            config = {**_connection_string(conn, client), **config}
    if "allow_http" not in client and os.environ.get(_ALLOW_HTTP_ENV[kind], "").lower() == "true":
        client["allow_http"] = True
    return config, client


def _connection_string(text: str, client: dict[str, Any]) -> dict[str, Any]:
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


def is_secret_option(name: str) -> bool:
    """Whether an option's value is a secret (never shown, stored encrypted, scrubbed from messages)."""
    return any(w in name.lower() for w in _SECRET_WORDS)


def secrets_of(options: Mapping[str, Any]) -> tuple[str, ...]:
    values = [os.environ.get(name, "") for name in _ENV_SECRETS]
    values += [str(v) for k, v in options.items() if is_secret_option(k)]
    return tuple(v for v in values if len(v) >= 4)


_URL_QUERY = re.compile(r"(https?://[^\s?]+)\?\S*")


def scrubbed_line(text: str, secrets: Iterable[str]) -> str:
    """The first line of a store's error ("" when it has none) with URLs' query strings cut
    (they may carry signatures) and every secret value masked."""
    stripped = text.strip()
    line = _URL_QUERY.sub(r"\1?…", stripped.splitlines()[0] if stripped else "")
    for secret in secrets:
        line = line.replace(secret, "***")
    return line


def build_store(loc: ObjectLocation, options: Mapping[str, Any] | None = None) -> Any:
    """An obstore store for the bucket of `loc` (no prefix: keys are full object paths), with
    the environment's credentials overridden by `options`."""
    from obstore.store import AzureStore, GCSStore, S3Store

    config, client = _split_options(loc.kind, options or {})
    common: dict[str, Any] = {"config": config, "client_options": client, "retry_config": RETRY_CONFIG}
    if loc.kind == "s3":
        return S3Store(loc.bucket, **common)
    if loc.kind == "gs":
        return GCSStore(loc.bucket, **common)
    if loc.account and "account_name" not in config and "azure_storage_account_name" not in config:
        config["account_name"] = loc.account
    if loc.host and loc.host.endswith(".dfs.fabric.microsoft.com"):
        config.setdefault("use_fabric_endpoint", True)
    return AzureStore(loc.bucket, **common)
