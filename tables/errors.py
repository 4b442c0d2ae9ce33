"""The one home of the app's errors and their HTTP statuses.

ServiceError is what a use case raises for a request it cannot serve; it carries its own
status. Errors of the Delta core (DeltaError) know nothing of HTTP, so the status of each of
their codes is looked up in DELTA_STATUS here, by the API's exception handler and by the
pages alike, so that the two never disagree.
"""

from __future__ import annotations

from typing import Any

from tables.delta.errors import DeltaError


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
    "managed_table": 409,
    "path_outside_roots": 403,
    "not_a_delta_table": 422,
    "log_gap": 422,
    "state_reconstruction": 422,
    "unsupported_feature": 422,
    "corrupt_log": 422,
    "corrupt_checkpoint": 422,
    "storage_error": 422,
}
DEFAULT_DELTA_STATUS = 400


def http_status(exc: ServiceError | DeltaError) -> int:
    """The HTTP status an error is answered with, in the API and on a page."""
    if isinstance(exc, ServiceError):
        return exc.status
    return DELTA_STATUS.get(exc.code, DEFAULT_DELTA_STATUS)


def from_delta(exc: DeltaError, message: str | None = None, **extra: Any) -> ServiceError:
    """A core error as a ServiceError with the same code and the status of DELTA_STATUS."""
    return ServiceError(message if message is not None else str(exc), exc.code, http_status(exc), **extra)


def one_line(text: object, limit: int = 500) -> str:
    """The first non-empty line of a message, bounded: no traceback ever reaches a user."""
    first = next((line.strip() for line in str(text).splitlines() if line.strip()), "")
    return first if len(first) <= limit else first[: limit - 1] + "…"


def printable(text: object, limit: int = 100) -> str:
    """User input quoted back in a message: bounded, control characters (a newline from %0A)
    escaped, so that a message stays one line."""
    s = str(text)[:limit]
    return s if s.isprintable() else s.encode("unicode_escape").decode("ascii")
