"""Every API error as {"error": {"code", "message"}} with a fitting HTTP status.

Mapping (the contract the API documents):

- ServiceError: its own `.status` and `.code` (e.g. 400 invalid_location, 403
  location_not_allowed, 400 not_a_delta_table, 409 duplicate, 400 invalid_range,
  400 invalid_timestamp, 400 timestamp_out_of_range, 400 restore_missing_files with
  "files", 403 own_request, 409 invalid_state), plus its `.extra` fields.
- DeltaError (raised by the core while reading a registered table), by `.code`, with the
  statuses of tables.services.errors.DELTA_STATUS (the pages use the same table): 404
  version_not_found (the message lists the available versions); 400 invalid_timestamp and
  timestamp_out_of_range; 403 path_outside_roots; 409 commit_conflict; 422 for a table whose
  log cannot be read (not_a_delta_table, log_gap, state_reconstruction, unsupported_feature,
  corrupt_log, corrupt_checkpoint, storage_error); 400 for any other core error.
- DRF ValidationError: 400 "invalid", the messages joined into one sentence ("field: message;
  ..."), with the per-field messages also under "fields".
- NotAuthenticated / AuthenticationFailed: 401 (with WWW-Authenticate: Token).
- PermissionDenied (DRF or Django): 403 "permission_denied".
- NotFound / Http404: 404 "not_found".  MethodNotAllowed: 405 "method_not_allowed".
- Other DRF APIExceptions (parse error, unsupported media type, throttled...): their status and
  default code.
- A lost database connection (OperationalError, InterfaceError): 503 "database_unavailable"
  with Retry-After; nothing was changed.
- A body over DATA_UPLOAD_MAX_MEMORY_SIZE: 413 "request_too_large" (tables.site.middleware refuses
  it by its Content-Length before any view; this catches a body sent without one).
- More query or form fields than DATA_UPLOAD_MAX_NUMBER_FIELDS: 400 "too_many_fields" (files:
  "too_many_files"); any other request Django finds suspicious: 400 "bad_request".
- Anything else: 500 "internal"; the traceback goes to the log, never into the response.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation, TooManyFieldsSent, TooManyFilesSent
from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import set_rollback

from tables.api.base.tokens import CSRF_MESSAGE, CsrfFailed
from tables.delta.errors import DeltaError
from tables.services.errors import (
    ServiceError,
    error_body,
    http_status,
    one_line,
    printable,
    public_message,
    uc_error_body,
)

logger = logging.getLogger("tables.api")

DRF_CODES = {
    CsrfFailed: "csrf_failed",  # before PermissionDenied, its parent
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.AuthenticationFailed: "authentication_failed",
    exceptions.PermissionDenied: "permission_denied",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
}


def _messages(detail: Any, prefix: str = "") -> list[str]:
    """Flatten a ValidationError detail (dict / list / string) into "field: message" lines."""
    if isinstance(detail, dict):
        out: list[str] = []
        for key, value in detail.items():
            name = "" if key in ("non_field_errors", "__all__") else str(key)
            out += _messages(value, f"{prefix}.{name}" if prefix and name else (name or prefix))
        return out
    if isinstance(detail, list):
        return [m for item in detail for m in _messages(item, prefix)]
    text = str(detail)
    return [f"{prefix}: {text}" if prefix else text]


def validation_message(detail: Any) -> str:
    return "; ".join(_messages(detail)) or "The request is not valid."


def _response(code: str, message: str, http_status: int, headers: dict[str, str] | None = None, **extra) -> Response:
    return Response(error_body(code, message, **extra), status=http_status, headers=headers)


def _table_of(context: dict[str, Any]) -> Any:
    """The table a failed request was about (from the URL), so that its location in a message
    can become its name; None when the URL names none."""
    view = context.get("view")
    kwargs = getattr(view, "kwargs", None) or {}
    key = kwargs.get("id") or kwargs.get("table_id")
    if not key:
        return None
    from tables.services.catalog.lookup import table_by_key

    try:
        return table_by_key(str(key))
    except Exception:  # a message is still worth sending without the table's name
        return None


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF's EXCEPTION_HANDLER: always answers (never lets an exception escape as HTML)."""
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) if str(exc) else None)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) if str(exc) else None)

    if isinstance(exc, RequestDataTooBig):
        set_rollback()
        return _response("request_too_large", too_large_message(), 413)
    if isinstance(exc, SuspiciousOperation):
        set_rollback()
        return _response(*refused_request(exc))
    if is_database_unavailable(exc):
        set_rollback()
        logger.warning("database unavailable in the API: %s", one_line(exc))
        return _response("database_unavailable", DATABASE_UNAVAILABLE, 503, {"Retry-After": DATABASE_RETRY_AFTER})
    if isinstance(exc, ServiceError):
        set_rollback()
        return _response(exc.code, public_message(exc.message, _table_of(context)), exc.status, **exc.extra)
    if isinstance(exc, DeltaError):
        set_rollback()
        return _response(exc.code, public_message(exc.message, _table_of(context)), http_status(exc))
    if isinstance(exc, exceptions.ValidationError):
        set_rollback()
        fields = exc.detail if isinstance(exc.detail, dict) else None
        extra = {"fields": fields} if fields else {}
        return _response("invalid", validation_message(exc.detail), status.HTTP_400_BAD_REQUEST, **extra)
    if isinstance(exc, exceptions.APIException):
        set_rollback()
        headers: dict[str, str] = {}
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header
        if getattr(exc, "wait", None):
            headers["Retry-After"] = f"{int(exc.wait)}"
        code = next((c for cls, c in DRF_CODES.items() if isinstance(exc, cls)), None) or exc.default_code
        detail = exc.detail
        message = validation_message(detail) if isinstance(detail, (dict, list)) else str(detail)
        return _response(str(code), message, exc.status_code, headers or None)

    set_rollback()
    view = context.get("view")
    logger.exception("unexpected error in %s", type(view).__name__ if view else "the API", exc_info=exc)
    return _response("internal", INTERNAL_MESSAGE, status.HTTP_500_INTERNAL_SERVER_ERROR)


def refused_request(exc: Exception | None) -> tuple[str, str, int]:
    """The code, message and status of a request Django refuses to read (too many fields, any
    other 400 it raises); logged as a warning, since a client sent it on purpose or by a bug."""
    from django.conf import settings

    logger.warning("refused a request: %s", one_line(exc))
    if isinstance(exc, TooManyFieldsSent):
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
        return "too_many_fields", f"The request has more than {limit} query or form fields; send fewer.", 400
    if isinstance(exc, TooManyFilesSent):
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FILES
        return "too_many_files", f"The request has more than {limit} files; send fewer.", 400
    return "bad_request", "The request was refused as malformed.", 400


API_PREFIX = "/api/"
# the catalog API answers in Unity Catalog's own error shape: {"error": {type, code, message}}
UC_PREFIX = "/api/2.1/unity-catalog/"


def is_api_path(request: HttpRequest) -> bool:
    """Whether a request is the API's: its errors answer JSON, never an HTML page."""
    return (request.path_info or request.path).startswith(API_PREFIX)


def is_uc_path(request: HttpRequest) -> bool:
    return (request.path_info or request.path).startswith(UC_PREFIX)


def api_error(request: HttpRequest, status: int, code: str, message: str) -> JsonResponse:
    """An error outside DRF's views, in the shape of the API the request was sent to."""
    if is_uc_path(request):
        return JsonResponse(uc_error_body(status, message), status=status)
    return JsonResponse(error_body(code, message), status=status)


def _shown_path(request: HttpRequest) -> str:
    # a path can carry newlines and control characters (%0A): escape them, bound the length
    return printable(request.path, 200)


# csrf_exempt: there is nothing here to protect, and a POST with a token to a mistyped path
# should hear "no such endpoint", not Django's CSRF page.
@csrf_exempt
def not_found_view(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Catch-all under /api/: unknown paths answer in the API's error format, not HTML."""
    if is_uc_path(request):  # handler404 (debug pages off) sends every path here, the catalog's too
        return uc_not_found_view(request)
    path = _shown_path(request)
    message = f"There is no API endpoint at {path}; see /api/docs/ for the list."
    if not request.path.endswith("/"):
        message = f"There is no API endpoint at {path} (API paths end with '/'); see /api/docs/."
    return JsonResponse(error_body("not_found", message), status=404)


@csrf_exempt
def uc_not_found_view(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Catch-all under the catalog prefix: 404 NotFoundException in UC's shape, whatever the
    method and authentication (UC's own server answers a path it does not route with 404, and
    a client reads a 404 on .../delta/v1/config as "this protocol is not served")."""
    path = _shown_path(request)
    hint = " (catalog paths have no trailing '/')" if request.path.endswith("/") else ""
    message = (
        f"There is no catalog endpoint at {path}{hint}; GET {UC_PREFIX}delta/v1/config lists the endpoints "
        f"deltaweb serves and {UC_PREFIX}delta/openapi.yaml describes them."
    )
    return JsonResponse(uc_error_body(404, message), status=404)


DATABASE_UNAVAILABLE = "The database does not answer (restarting?); nothing was changed. Try again in a few seconds."
DATABASE_RETRY_AFTER = "5"  # seconds, the Retry-After of every such 503 (API, catalog, pages)


def is_database_unavailable(exc: BaseException | None) -> bool:
    """A lost or refused database connection: the request changed nothing (its transaction,
    if any, is gone with the connection), so the answer is a 503 to retry, not a 500."""
    from django.db import InterfaceError, OperationalError

    return isinstance(exc, OperationalError | InterfaceError)


INTERNAL_MESSAGE = (
    "The server hit an unexpected error; it has been logged. Please try again or contact an administrator."
)


def api_server_error(request: HttpRequest, exc: BaseException | None = None) -> JsonResponse:
    """The 500 of a request under /api/ that failed outside DRF's exception handler (a 503 when
    the database did not answer, e.g. while the session was read)."""
    if is_database_unavailable(exc):
        response = api_error(request, 503, "database_unavailable", DATABASE_UNAVAILABLE)
        response["Retry-After"] = DATABASE_RETRY_AFTER
        return response
    return api_error(request, 500, "internal", INTERNAL_MESSAGE)


def too_large_message() -> str:
    from django.conf import settings

    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return f"The request body is larger than the {limit:,} bytes the server accepts."


def api_csrf_failure(reason: str = "") -> JsonResponse:
    """A session-authenticated unsafe request to /api/ without a valid CSRF token."""
    return JsonResponse(error_body("csrf_failed", CSRF_MESSAGE), status=403)
