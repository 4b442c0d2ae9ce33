"""Security defaults that span the pages and the API: response headers (a strict
Content-Security-Policy among them), the project's error pages even in debug mode, and a
throttled sign-in form.

Why here and not in the views: these hold for every response, including the ones no view of
ours produced (the admin, Django's 404, a CSRF refusal).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.views import LoginView
from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse

from tables.services.access.signin_throttle import login_refused_for, record_login
from tables.web import ui

logger = logging.getLogger("tables.web.security")


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
            from tables.api.errors import api_error, is_api_path, too_large_message

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
            return ui.handler404(request)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not self._active():
            return None  # production: Django calls handler404/403/500 itself
        if isinstance(exception, Http404):
            return ui.handler404(request, exception)
        if isinstance(exception, PermissionDenied):
            return ui.handler403(request, exception)
        if isinstance(exception, SuspiciousOperation):
            return ui.handler400(request, exception)
        logger.error("unexpected error on %s", request.path, exc_info=exception)
        return ui.handler500(request)


# --- the sign-in form ------------------------------------------------------------------


class ThrottledLoginView(LoginView):
    """Django's sign-in form, refusing an IP + username after DELTAWEB_LOGIN_RATE failed
    attempts (e.g. 10/minute) until the window that began with the first failure has passed.

    While refused, even the right password is not checked (answering differently would tell
    a guesser it had found it); the page says so and when to try again. A successful sign-in
    below the limit clears the count.
    """

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        from tables.services.access import oidc
        from tables.web.sso import MESSAGES

        return super().get_context_data(
            sso=oidc.enabled(),
            local_login=settings.DELTAWEB_LOCAL_LOGIN,
            sso_refused=MESSAGES.get(self.request.GET.get("sso", ""), ""),
            **kwargs,
        )

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not settings.DELTAWEB_LOCAL_LOGIN:
            return self.render_to_response(self.get_context_data(), status=403)
        username = request.POST.get("username", "")
        window = login_refused_for(request, username)
        if window is not None:
            # an unbound form: binding it would check the password
            form = self.get_form_class()(request=request, initial={"username": username[:150]})
            wait = f"{window // 60} minute{'s' if window >= 120 else ''}" if window >= 60 else f"{window} seconds"
            message = (
                "Too many failed sign-in attempts for this account from your address. "
                f"Wait {wait} and try again; the password is not checked until then."
            )
            return self.render_to_response(self.get_context_data(form=form, throttled=message), status=429)
        response = super().post(request, *args, **kwargs)
        record_login(request, username, request.user.is_authenticated)
        return response
