"""The Google Cloud Storage backend: `gs://bucket/prefix`, the GOOGLE_* environment (a key file
in GOOGLE_APPLICATION_CREDENTIALS sent to Spark's executors as its content), obstore's GCSStore,
and gcs-connector's service-account configuration for Spark."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tables.delta.errors import StorageError
from tables.delta.storage.backends.registry import Backend

if TYPE_CHECKING:
    from tables.delta.storage.location import ObjectLocation

KEY_FILE_ENV = "GOOGLE_APPLICATION_CREDENTIALS"


def build(loc: ObjectLocation, config: dict[str, Any], client: dict[str, Any], retry: Mapping[str, Any]) -> Any:
    """A GCSStore for the bucket of `loc`."""
    from obstore.store import GCSStore

    return GCSStore(loc.bucket, config=config, client_options=client, retry_config=retry)


def executor_extras(given: set[str]) -> dict[str, Any]:
    """The service-account key of the file GOOGLE_APPLICATION_CREDENTIALS names, as an option:
    a key file on the driver's disk is not on the executors'."""
    if not os.environ.get(KEY_FILE_ENV) or "service_account_key" in given:
        return {}
    try:
        with open(os.environ[KEY_FILE_ENV], encoding="utf-8") as fh:
            return {"google_service_account_key": fh.read()}
    except OSError as exc:
        raise StorageError(f"{KEY_FILE_ENV} cannot be read: {exc.strerror}") from None


def hadoop_conf(loc: ObjectLocation, opts: Mapping[str, str], authority: str) -> dict[str, str]:
    """gcs-connector's configuration for a service-account key among the options (none when the
    cluster's own credentials serve)."""
    raw = opts.get("google_service_account_key") or opts.get("service_account_key")
    if not raw:
        return {}
    try:
        info = json.loads(raw)
    except ValueError:
        raise StorageError("the service-account key is not JSON") from None
    return {
        "fs.gs.auth.type": "SERVICE_ACCOUNT_JSON_KEYFILE",
        "fs.gs.auth.service.account.email": str(info.get("client_email", "")),
        "fs.gs.auth.service.account.private.key.id": str(info.get("private_key_id", "")),
        "fs.gs.auth.service.account.private.key": str(info.get("private_key", "")),
    }


BACKEND = Backend(
    kind="gs",
    schemes=("gs",),
    build=build,
    container="bucket",
    option_prefixes=("google_",),
    env_prefixes=("GOOGLE_",),
    secret_options={"google_service_account_key": "GCS service account JSON"},
    long_secrets=("google_service_account_key",),
    synonyms={"application_credentials": "service_account_key"},
    allow_http_env="GOOGLE_ALLOW_HTTP",
    secret_env=("GOOGLE_SERVICE_ACCOUNT_KEY",),
    forwarded_env=("GOOGLE_SERVICE_ACCOUNT", "GOOGLE_SERVICE_ACCOUNT_KEY", "GOOGLE_BASE_URL", "GOOGLE_ALLOW_HTTP"),
    executor_extras=executor_extras,
    hadoop_scheme="gs",
    hadoop_jar="gcs-connector",
    hadoop_conf=hadoop_conf,
)
