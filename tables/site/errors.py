"""The project's error handlers (deltaweb/urls.py, CSRF_FAILURE_VIEW) and the one declaration
of which error shape a path speaks: under /delta-sharing/ the Delta Sharing protocol's
`{"errorCode", "message"}`, under the catalog's prefix Unity Catalog's, under /api/ the API's
JSON error, whatever failed (an unknown path, a CSRF check, an exception outside DRF);
elsewhere the project's own pages. Django's defaults would answer HTML everywhere. Above both
the pages and the API, which never import each other."""

from __future__ import annotations

import sys

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from django.views.csrf import csrf_failure as django_csrf_failure

from tables.api.base.errors import (
    DATABASE_RETRY_AFTER,
    DATABASE_UNAVAILABLE,
    api_csrf_failure,
    api_error,
    api_server_error,
    is_api_path,
    is_database_unavailable,
    not_found_view,
    refused_request,
)
from tables.services.errors import error_body
from tables.services.sharing.errors import INTERNAL, INVALID, STATUS, SharingError

SHARING_PREFIX = "/delta-sharing/"


def is_sharing_path(request: HttpRequest) -> bool:
    return (request.path_info or request.path).startswith(SHARING_PREFIX)


def _sharing_error(status: int, message: str) -> JsonResponse:
    """The protocol's shape: its code for the status (400 INVALID_PARAMETER_VALUE...)."""
    code = next((c for c, s in STATUS.items() if s == status), INTERNAL if status >= 500 else INVALID)
    return JsonResponse(SharingError(code, message).body(), status=status)


def refusal(request: HttpRequest, status: int, code: str, message: str) -> HttpResponse:
    """A request refused before any view read it (tables.site.middleware), in the shape of the
    path's API; a plain line of text on the pages (no page of the site's frame: nothing has
    looked the session up yet)."""
    if is_sharing_path(request):
        return _sharing_error(status, message)
    if is_api_path(request):  # the catalog's shape under its prefix, the API's elsewhere
        return api_error(request, status, code, message)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_sharing_path(request):
        return _sharing_error(404, "No such endpoint of the Delta Sharing protocol.")
    if is_api_path(request):
        return not_found_view(request)
    response = defaults.page_not_found(request, exception)
    response.deltaweb_page = True  # the project's page, not Django's debug page (tables.site.middleware)
    return response


def handler400(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """A request Django would not read (too many fields, a malformed body...): the API's error
    under /api/, the protocol's under /delta-sharing/, Django's plain 400 page elsewhere; never a
    500."""
    if is_api_path(request) or is_sharing_path(request):
        code, message, status = refused_request(exception)
        return refusal(request, status, code, message)
    return defaults.bad_request(request, exception)


def handler403(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_sharing_path(request):
        return _sharing_error(403, "You may not do this.")
    if is_api_path(request):
        return JsonResponse(error_body("permission_denied", "You may not do this."), status=403)
    return defaults.permission_denied(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    exc = sys.exc_info()[1]
    if is_sharing_path(request):
        return _sharing_error(500, "The server failed to answer this request.")
    if is_api_path(request):
        return api_server_error(request, exc)
    if is_database_unavailable(exc):
        # a plain page: the site's frame would ask the database for the user again
        response = HttpResponse(DATABASE_UNAVAILABLE, status=503, content_type="text/plain; charset=utf-8")
        response["Retry-After"] = DATABASE_RETRY_AFTER
        return response
    return defaults.server_error(request)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: JSON under /api/, Django's explanation page elsewhere."""
    if is_api_path(request):
        return api_csrf_failure(reason)
    return django_csrf_failure(request, reason)
