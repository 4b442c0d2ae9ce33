"""The protocol's errors: `{"errorCode": ..., "message": ...}` with its codes and statuses, and
the core's errors turned into them (a message a recipient may read, no path of the server)."""

from __future__ import annotations

from typing import Any

from tables.delta.errors import DeltaError
from tables.services.errors import ServiceError, http_status, public_message

# the protocol's error codes (PROTOCOL.md, "REST APIs": 400, 401, 403, 404, 500)
INVALID = "INVALID_PARAMETER_VALUE"
UNAUTHENTICATED = "UNAUTHENTICATED"
DENIED = "PERMISSION_DENIED"
MISSING = "RESOURCE_DOES_NOT_EXIST"
UNSUPPORTED = "UNSUPPORTED_OPERATION"
INTERNAL = "INTERNAL_ERROR"
THROTTLED = "RESOURCE_EXHAUSTED"  # too many wrong tokens from one address (429, with Retry-After)

STATUS = {
    INVALID: 400,
    UNAUTHENTICATED: 401,
    DENIED: 403,
    MISSING: 404,
    UNSUPPORTED: 400,
    THROTTLED: 429,
    INTERNAL: 500,
}


class SharingError(ServiceError):
    """A request the sharing server refuses, in the protocol's terms."""

    def __init__(self, code: str, message: str, **extra: Any) -> None:
        super().__init__(message, code=code, status=STATUS.get(code, 400), **extra)

    def body(self) -> dict[str, Any]:
        """The protocol's error shape (a `retry_after` extra becomes the Retry-After header)."""
        return {"errorCode": self.code, "message": self.message}


def from_core(exc: DeltaError | ServiceError, table: Any = None) -> SharingError:
    """A core or service error as the protocol says it: a version or a table that is not there
    is 404, a log deltaweb cannot read is the server's 500, any other refusal is 400."""
    if isinstance(exc, SharingError):
        return exc
    status = http_status(exc)
    message = public_message(exc.message if isinstance(exc, ServiceError) else str(exc), table=table)
    if status == 404:
        return SharingError(MISSING, message)
    if status == 403:
        return SharingError(DENIED, message)
    if status >= 422:
        return SharingError(INTERNAL, message)
    return SharingError(INVALID, message)
