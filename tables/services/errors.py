"""The one home of the app's errors and their HTTP statuses.

ServiceError is what a use case raises for a request it cannot serve; it carries its own
status. Errors of the Delta core (DeltaError) know nothing of HTTP, so the status of each of
their codes is looked up in DELTA_STATUS here, by the API's exception handler and by the
pages alike, so that the two never disagree.
"""

from __future__ import annotations

import re
from typing import Any

from tables.delta.errors import DeltaError


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    """The one error shape of the API and of the pages' JSON endpoints (the catalog API has
    UC's own: uc_error_body, below)."""
    return {"error": {"code": code, "message": message, **extra}}


# the catalog API answers in Unity Catalog's own shape, its exception type by status
UC_TYPES = {
    400: "BadRequestException",
    401: "NotAuthorizedException",
    403: "PermissionDeniedException",
    404: "NotFoundException",
    405: "BadRequestException",
    413: "BadRequestException",
    415: "BadRequestException",
    429: "TooManyRequestsException",
    501: "NotImplementedException",
}


def uc_error_body(status: int, message: str) -> dict[str, Any]:
    """An error in Unity Catalog's shape (the catalog API's), its type from the status."""
    kind = UC_TYPES.get(status, "InternalServerErrorException" if status >= 500 else "BadRequestException")
    return {"error": {"type": kind, "code": status, "message": message}}


class ServiceError(Exception):
    """A request that cannot be served; `code` and `status` map onto API errors and pages."""

    def __init__(self, message: str, code: str = "invalid", status: int = 400, **extra: Any) -> None:
        super().__init__(message)
        self.message, self.code, self.status = message, code, status
        self.extra = extra  # more machine-readable detail for the API, e.g. files=[...]


# The HTTP status of each DeltaError code; any other code is a request the core refused (400).
# 422: the table's log cannot be read (the request was fine, the table is not).
DELTA_STATUS: dict[str, int] = {
    "version_not_found": 404,
    "invalid_timestamp": 400,
    "timestamp_out_of_range": 400,
    "commit_conflict": 409,
    "keep_target_exists": 409,
    "managed_table": 409,
    "path_outside_roots": 403,
    "not_a_delta_table": 422,
    "log_gap": 422,
    "state_reconstruction": 422,
    "unsupported_feature": 422,
    "corrupt_log": 422,
    "corrupt_checkpoint": 422,
    "checkpoint_mismatch": 422,
    "storage_error": 422,
    "invalid_predicate": 400,
    # object stores: the store refused the credentials (403: a refusal the user or an
    # administrator fixes, not a failing server), has no such bucket, or did not answer (503)
    "storage_access_denied": 403,
    "storage_bucket_not_found": 422,
    "storage_unavailable": 503,
    "storage_no_conditional_put": 422,
    # recovery from a versioned bucket: its store keeps no object versions; a copy back refused
    # (a current object with other bytes, another writer meanwhile) or not checking out
    "store_not_versioned": 422,
    "recovery_failed": 409,
    # a data file a job cannot read (tables.spark.jobs.file_errors): the table is damaged there
    "data_file_unreadable": 422,
    "data_file_missing": 422,
}
DEFAULT_DELTA_STATUS = 400


def http_status(exc: ServiceError | DeltaError) -> int:
    """The HTTP status an error is answered with, in the API and on a page."""
    if isinstance(exc, ServiceError):
        return exc.status
    return DELTA_STATUS.get(exc.code, DEFAULT_DELTA_STATUS)


def from_delta(exc: DeltaError, message: str | None = None, table: Any = None, **extra: Any) -> ServiceError:
    """A core error as a ServiceError with the same code and the status of DELTA_STATUS; its
    message names the table, not its location on the server (public_message)."""
    text = message if message is not None else str(exc)
    return ServiceError(public_message(text, table), exc.code, http_status(exc), **extra)


def one_line(text: object, limit: int = 500) -> str:
    """The first non-empty line of a message, bounded: no traceback ever reaches a user."""
    first = next((line.strip() for line in str(text).splitlines() if line.strip()), "")
    return first if len(first) <= limit else first[: limit - 1] + "…"


def printable(text: object, limit: int = 100) -> str:
    """User input quoted back in a message: bounded, control characters (a newline from %0A)
    escaped, so that a message stays one line."""
    s = str(text)[:limit]
    return s if s.isprintable() else s.encode("unicode_escape").decode("ascii")


# --- what a user may read of a message ----------------------------------------------------
# Messages of the core name a table by its location, an absolute path on the server (or a
# bucket URI). Users know tables by name: wherever a message becomes a page error, an API error,
# a job's or a restore's error, the table's location is replaced by its name, and any other
# path under the allowed roots (or the results directory) loses the server's directories.


def _path_forms(path: str) -> list[str]:
    """The spellings of a location a message may use: as registered, without file://, resolved."""
    import os

    forms = {path.rstrip("/")}
    plain = path[len("file://") :] if path.startswith("file://") else path
    if plain.startswith("/"):
        forms |= {plain.rstrip("/"), "file://" + plain.rstrip("/"), os.path.realpath(plain)}
    return sorted((f for f in forms if len(f) > 1), key=len, reverse=True)


def _server_prefixes() -> list[str]:
    from django.conf import settings

    roots = [*getattr(settings, "DELTAWEB_ALLOWED_ROOTS", []), getattr(settings, "DELTAWEB_RESULTS_DIR", "")]
    forms = {f for root in roots if root for f in _path_forms(str(root))}
    return sorted(forms, key=len, reverse=True)


def public_message(text: object, table: Any = None) -> str:
    """`text` with the table's location replaced by its name and server directories of the
    allowed roots left out (`/srv/…/var/tables/demo-orders/x.parquet` → `demo-orders/x.parquet`)."""
    s = str(text)
    if table is not None and getattr(table, "location", None):
        for form in _path_forms(str(table.location)):
            s = s.replace(form, str(table.name))
    for prefix in _server_prefixes():
        s = s.replace(prefix + "/", "").replace(prefix, "(an allowed root)")
    return s


# --- the task queue ----------------------------------------------------------------------------

# The task queue (Celery's broker) did not take a job the request just created: nothing will run
# it, so the request is answered 503 with Retry-After (the job row ends failed with the reason,
# tables.services.jobs.lifecycle.check_sent), not 202 for a job that fails a moment later.
BROKER_UNAVAILABLE = "broker_unavailable"
BROKER_RETRY_AFTER = "10"  # seconds: how often the pages ask the broker again (tables.services.jobs.broker)


# --- Spark failures --------------------------------------------------------------------------

# The Spark Connect server (DELTAWEB_SPARK_REMOTE) did not answer: the job fails with this code
# (its result's errorCode), its error naming the server's sc:// address (never the URL's
# parameters) and how to start it (tables.spark.engine.connect.SparkUnavailable).
SPARK_UNAVAILABLE = "spark_unavailable"

SPARK_FAILURES: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (
        ("FileNotFoundException", "Path does not exist", "does not exist", "No such file"),
        "spark_missing_file",
        "a data file of the table is missing (removed by VACUUM or by hand?)",
    ),
    (
        (
            "ParquetDecodingException",
            "is not a Parquet file",
            "Could not read footer",
            "CorruptedParquet",
            "Can not read value at",
            "SchemaColumnConvertNotSupportedException",
        ),
        "spark_unreadable_parquet",
        "a data file of the table is not readable Parquet",
    ),
    (
        ("OutOfMemoryError", "Java heap space", "GC overhead limit", "Container killed", "exceeding memory limits"),
        "spark_out_of_memory",
        "the Spark job ran out of memory",
    ),
    (
        ("RETRIES_EXCEEDED", "StatusCode.UNAVAILABLE", "SESSION_CHANGED"),
        SPARK_UNAVAILABLE,
        "the Spark Connect server stopped answering (restarted or down); start the job again",
    ),
    (
        ("cancelled", "canceled", "SparkContext was shut down", "interrupted"),
        "spark_cancelled",
        "the Spark job was cancelled",
    ),
)


def is_spark_error(exc: BaseException) -> bool:
    """An exception raised by Spark (through py4j or pyspark), not by our own code."""
    module = type(exc).__module__ or ""
    return module.startswith(("py4j", "pyspark")) or type(exc).__name__ in ("Py4JJavaError", "Py4JError")


# a data file's URI or path as Spark's Java exceptions write it
_DATA_FILE = re.compile(
    r"""
    (?<![^\s'"\[\],;()])     # from a token's start, never from inside one ("o2546" -> "2546")
    (?!o\d+\.\w+\b(?!/))     # never py4j's call name: "calling o2546.parquet." names no file
    ((?:file:|[a-z0-9]+://)?/?[^\s'"\[\],;()]+\.parquet)
    """,
    re.IGNORECASE | re.VERBOSE,
)
DATA_FILE_FIX = "Restore it from a backup or restore the table to a version that does not use it."


def spark_failure(exc: BaseException) -> tuple[str, str, str]:
    """(code, one-line message a user can act on, technical detail for staff) of a Spark failure.
    The detail is bounded and keeps the Java exception's first lines, never a Python traceback.
    A data file's failure names the file Spark names (made relative to the table's name by
    public_message when the job's error is stored) and the fix."""
    text = str(exc)
    code, message = "spark_failed", "the Spark job failed"
    for needles, c, m in SPARK_FAILURES:
        if any(n.lower() in text.lower() for n in needles):
            code, message = c, m
            break
    if code in ("spark_missing_file", "spark_unreadable_parquet") and (found := _DATA_FILE.search(text)):
        name = found.group(1)
        name = name[len("file:") :] if name.startswith("file:") and not name.startswith("file://") else name
        # only a file under the allowed roots, which public_message shows by the table's name:
        # never a server directory (an object-store table's files are read from a local spool)
        if any(name.startswith(prefix + "/") for prefix in _server_prefixes()):
            message = f"{message}: {name[:300]}. {DATA_FILE_FIX}"
    lines = [line.rstrip() for line in text.splitlines() if line.strip()][:20]
    detail = f"{type(exc).__name__}: " + "\n".join(lines)
    return code, message, detail[:4000]
