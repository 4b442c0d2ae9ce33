"""Middleware for every response, the pages', the API's and those no view of ours produced (the
admin, Django's 404, a CSRF refusal): a body too large refused before anything reads it, the
Content-Security-Policy, and the project's error pages even in debug mode."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse

from tables.api.errors import api_error, is_api_path, too_large_message
from tables.site import errors

logger = logging.getLogger("tables.site.middleware")


class RequestSizeMiddleware:
    """413 for a body larger than DATA_UPLOAD_MAX_MEMORY_SIZE, told by its Content-Length before
    anything reads it: JSON in the API's shape under /api/ (the catalog's under its prefix), plain
    text elsewhere. Django would raise RequestDataTooBig only once a view reads the body."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if limit is not None and length > limit:
            if is_api_path(request):
                return api_error(request, 413, "request_too_large", too_large_message())
            # before the session and user middleware: a plain answer, not a page of the site's frame
            return HttpResponse(too_large_message(), status=413, content_type="text/plain; charset=utf-8")
        return self.get_response(request)


class SecurityHeadersMiddleware:
    """Adds the Content-Security-Policy (settings.DELTAWEB_CSP) to every response that has none.

    X-Frame-Options, Referrer-Policy and X-Content-Type-Options come from Django's own
    middleware (settings X_FRAME_OPTIONS, SECURE_REFERRER_POLICY, SECURE_CONTENT_TYPE_NOSNIFF).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        policy = getattr(settings, "DELTAWEB_CSP", "")
        if policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = policy
        return response


class ProjectErrorPagesMiddleware:
    """In debug mode Django answers an unknown URL with a page listing the URL configuration
    and an exception with its traceback and settings. Unless DELTAWEB_DEBUG_PAGES asks for
    those, debug mode answers with the project's own 404/403/500 pages (JSON under /api/),
    as production does; the traceback still goes to the log."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    @staticmethod
    def _active() -> bool:
        return settings.DEBUG and not getattr(settings, "DELTAWEB_DEBUG_PAGES", False)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        # no view matched (Resolver404): Django rendered its technical 404 in debug mode
        if (
            self._active()
            and response.status_code == 404
            and getattr(request, "resolver_match", None) is None
            and not getattr(response, "deltaweb_page", False)
        ):
            return errors.handler404(request)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not self._active():
            return None  # production: Django calls handler404/403/500 itself
        if isinstance(exception, Http404):
            return errors.handler404(request, exception)
        if isinstance(exception, PermissionDenied):
            return errors.handler403(request, exception)
        if isinstance(exception, SuspiciousOperation):
            return errors.handler400(request, exception)
        logger.error("unexpected error on %s", request.path, exc_info=exception)
        return errors.handler500(request)
