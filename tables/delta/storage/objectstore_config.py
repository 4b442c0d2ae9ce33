"""Object-store locations and their stores: parsing `s3://`, `gs://`, `az://` and `abfss://`
locations, credentials from the environment and per-location options (never echoed), the
store built through obstore, and the named errors a store's failures become.

What differs between the stores (schemes, option prefixes, secrets, how a store is built) is
each backend's, in the registry of tables/delta/storage/backends/; this module applies it.
The storage class over such a store is in objectstore.py."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

from tables.delta.errors import PathOutsideRootsError, StorageError
from tables.delta.storage.backends import Backend, all_backends, backend_for_scheme, backend_of, named_schemes
from tables.delta.storage.location import ObjectLocation  # the parser's result; imported from here by many

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
# delta-rs storage options with no meaning to obstore (locking providers, rename safety)
_IGNORED_KEYS = {"s3_allow_unsafe_rename", "s3_locking_provider", "dynamodb_table_name", "s3_lock_timeout_seconds"}
# option names whose values are secrets (scrubbed from any message; the environment's are
# each backend's secret_env)
_SECRET_WORDS = ("secret", "key", "token", "password", "sas", "connection_string", "credential")

ERROR_CODE = re.compile(r"<Code>([A-Za-z0-9]+)</Code>")
HTTP_STATUS = re.compile(r"status code: (\d{3})")


# --- locations -----------------------------------------------------------------------------------


def scheme_of(location: str) -> str | None:
    """The lower-cased scheme of a URI, None for a plain path."""
    head, sep, _ = location.partition("://")
    return head.lower() if sep and head and head.replace("+", "").replace("-", "").isalnum() else None


def is_object_location(location: str) -> bool:
    """Whether a location's scheme is one a registered object-store backend serves."""
    return backend_for_scheme(scheme_of(location)) is not None


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
    backend = backend_for_scheme(scheme)
    if backend is None:
        raise StorageError(f"{text[:200]}: not an object-store location ({named_schemes()})")
    rest = text.split("://", 1)[1]
    netloc, _, path = rest.partition("/")
    account = host = None
    if "@" in netloc:
        user, _, host_part = netloc.rpartition("@")
        if not backend.accounts or ":" in user or not host_part:
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
    return ObjectLocation(scheme, backend.kind, netloc, prefix, account, host)


def canonical(loc: ObjectLocation) -> ObjectLocation:
    """The location with its scheme's canonical spelling (s3a:// is s3://, the backend's
    `spellings`): what a location is registered, compared and discovered as."""
    backend = backend_for_scheme(loc.scheme)
    if backend is not None and loc.scheme in backend.spellings:
        return dataclasses.replace(loc, scheme=backend.schemes[0])
    return loc


# --- options and credentials -----------------------------------------------------------------------


def _option_name(key: str, backend: Backend) -> str:
    name = key.strip().lower()
    for p in backend.option_prefixes:
        if name.startswith(p) and name[len(p) :] in _CLIENT_KEYS:
            return name[len(p) :]
    return name


def _split_options(backend: Backend, options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(store config, client options) from delta-rs style storage options."""
    config: dict[str, Any] = {}
    client: dict[str, Any] = dict(CLIENT_DEFAULTS)
    for key, value in options.items():
        name = _option_name(key, backend)
        if name.removeprefix("aws_") in _IGNORED_KEYS:
            continue
        if name in _CLIENT_KEYS:
            if name in _BOOL_CLIENT_KEYS and isinstance(value, str):
                value = value.strip().lower() in ("1", "true", "yes", "on")
            client[name] = value
            continue
        expanded = backend.expand_option(name, value, client) if backend.expand_option else None
        if expanded is not None:
            config.update(expanded)
        else:
            config[name] = value
    if backend.env_config:
        config = backend.env_config(config, client)
    # plain HTTP (emulators, private endpoints) from the environment, as obstore would read it
    # were no client options passed (passing any replaces the environment's)
    allow_http = os.environ.get(backend.allow_http_env, "") if backend.allow_http_env else ""
    if "allow_http" not in client and allow_http.lower() == "true":
        client["allow_http"] = True
    return config, client


def is_secret_option(name: str) -> bool:
    """Whether an option's value is a secret (never shown, stored encrypted, scrubbed from messages)."""
    return any(w in name.lower() for w in _SECRET_WORDS)


def secrets_of(options: Mapping[str, Any]) -> tuple[str, ...]:
    values = [os.environ.get(name, "") for b in all_backends() for name in b.secret_env]
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
    the environment's credentials overridden by `options`; its backend builds it."""
    backend = backend_of(loc.kind)
    config, client = _split_options(backend, options or {})
    return backend.build(loc, config, client, RETRY_CONFIG)
