"""The project's error handlers (deltaweb/urls.py, CSRF_FAILURE_VIEW): under /api/ every answer
is the API's JSON error, whatever failed (an unknown path, a CSRF check, an exception outside
DRF); elsewhere the project's own pages. Django's defaults would answer HTML everywhere. Above
both the pages and the API, which never import each other."""

from __future__ import annotations

import sys

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from django.views.csrf import csrf_failure as django_csrf_failure

from tables.api.errors import (
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


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api_path(request):
        return not_found_view(request)
    response = defaults.page_not_found(request, exception)
    response.deltaweb_page = True  # the project's page, not Django's debug page (tables.site.middleware)
    return response


def handler400(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """A request Django would not read (too many fields, a malformed body...): the API's error
    under /api/, Django's plain 400 page elsewhere; never a 500."""
    if is_api_path(request):
        code, message, status = refused_request(exception)
        return api_error(request, status, code, message)
    return defaults.bad_request(request, exception)


def handler403(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api_path(request):
        return JsonResponse(error_body("permission_denied", "You may not do this."), status=403)
    return defaults.permission_denied(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    exc = sys.exc_info()[1]
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
