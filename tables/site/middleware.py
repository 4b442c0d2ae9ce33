"""Middleware for every response, the pages', the API's and those no view of ours produced (the
admin, Django's 404, a CSRF refusal): a body too large refused before anything reads it, a
request no view could read (too many fields, JSON nested too deep) refused before any view in the
shape of the path's API, the Content-Security-Policy, and the project's error pages even in
debug mode."""

from __future__ import annotations

import base64
import functools
import hashlib
import logging
import re
from collections.abc import Callable
from itertools import accumulate

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse

from tables.api.base.errors import api_error, is_api_path, too_large_message
from tables.api.base.parsers import MAX_JSON_DEPTH
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


# A JSON body nested deeper than the APIs' parsers accept (64 levels) is refused before any view
# parses it, whoever would read it: the json module recurses once per level (a RecursionError, a
# 500, at about a thousand less the request's own stack).
MAX_JSON_NESTING = MAX_JSON_DEPTH
# a JSON string (its escapes included): brackets inside one are text, not nesting
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
# a body's brackets as signed bytes: +1 opens, -1 closes, everything else deleted
_NESTING = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[{]}")))


def json_nesting(body: bytes) -> int:
    """How deep a JSON text's arrays and objects nest, without parsing it (strings skipped),
    in C-speed passes: a body of a few megabytes in milliseconds."""
    if body.count(b"[") + body.count(b"{") <= MAX_JSON_NESTING:
        return min(body.count(b"[") + body.count(b"{"), MAX_JSON_NESTING)  # cannot be deeper
    steps = _JSON_STRING.sub(b"", body).translate(_NESTING, _NOT_BRACKETS)
    return max(accumulate(memoryview(steps).cast("b")), default=0)


def _field_count(query: str | bytes) -> int:
    """The fields Django would count in a query string or form body (`&`-separated, as
    urllib.parse.parse_qsl counts them against DATA_UPLOAD_MAX_NUMBER_FIELDS)."""
    return 1 + query.count("&" if isinstance(query, str) else b"&") if query else 0


class RequestShapeMiddleware:
    """400 for a request no view could read, before any view (or the CSRF check) reads it, in
    the shape of the path's API (errors.refusal): more query fields, or form fields in a body,
    than DATA_UPLOAD_MAX_NUMBER_FIELDS (Django raises TooManyFieldsSent only when something reads
    them, and not every entry point answered that with a 400), or a body whose JSON nests
    deeper than MAX_JSON_NESTING. A multipart body is left to Django's parser, which counts its
    fields as it streams (handler400)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
        if limit is not None and _field_count(request.META.get("QUERY_STRING", "")) > limit:
            return self._too_many_fields(request, limit)
        content_type = request.META.get("CONTENT_TYPE", "")
        if request.method not in ("GET", "HEAD", "OPTIONS") and not content_type.startswith("multipart/"):
            try:
                body = request.body
            except RequestDataTooBig:
                return errors.refusal(request, 413, "request_too_large", too_large_message())
            if limit is not None and content_type.startswith("application/x-www-form-urlencoded"):
                if _field_count(body) > limit:
                    return self._too_many_fields(request, limit)
            if body.lstrip()[:1] in (b"[", b"{") and json_nesting(body) > MAX_JSON_NESTING:
                logger.warning("refused a request: JSON nested deeper than %d levels", MAX_JSON_NESTING)
                message = f"JSON parse error - nested more than {MAX_JSON_NESTING} levels deep"
                return errors.refusal(request, 400, "parse_error", message)  # the API parser's words
        return self.get_response(request)

    @staticmethod
    def _too_many_fields(request: HttpRequest, limit: int) -> HttpResponse:
        logger.warning("refused a request: more than %d query or form fields", limit)
        message = f"The request has more than {limit} query or form fields; send fewer."
        return errors.refusal(request, 400, "too_many_fields", message)


@functools.cache
def plotly_style_hashes() -> tuple[str, ...]:
    """The style elements plotly.js adds to a page, as CSP hash sources: empty ones (it inserts
    its rules through CSSOM, which the policy does not restrict) and the map library's
    stylesheet, which it carries as a string. Read from the installed plotly.min.js, so an
    upgrade brings its own."""
    from tables.web.base.staticfiles import plotly_file

    texts = {""}
    path = plotly_file()
    if path is not None:
        source = path.read_text(encoding="utf-8", errors="replace")
        texts |= {m[1] for m in re.finditer(r"textContent='([^'\\]*)'", source)}
    return tuple(sorted(f"'sha256-{base64.b64encode(hashlib.sha256(t.encode()).digest()).decode()}'" for t in texts))


# The pages whose scripts add style elements: exactly those, by their hashes (never
# 'unsafe-inline', which would let any injected markup style itself). Swagger UI's page sets a
# policy of its own (tables.api.auth.DocsView).
STYLE_ELEMENTS: dict[str, Callable[[], tuple[str, ...]]] = {
    "tables:table_charts_page": plotly_style_hashes,
    "tables:table_query": plotly_style_hashes,
}


def _with_style_sources(policy: str, sources: tuple[str, ...]) -> str:
    directives = [d.strip() for d in policy.split(";") if d.strip()]
    for i, directive in enumerate(directives):
        if directive.split()[0] == "style-src" and "'unsafe-inline'" not in directive.split():
            directives[i] = " ".join([directive, *sources])
    return "; ".join(directives)


class SecurityHeadersMiddleware:
    """Adds the Content-Security-Policy (settings.DELTAWEB_CSP) to every response that has none,
    with the hashes of the style elements a page's own scripts add (STYLE_ELEMENTS).

    X-Frame-Options, Referrer-Policy and X-Content-Type-Options come from Django's own
    middleware (settings X_FRAME_OPTIONS, SECURE_REFERRER_POLICY, SECURE_CONTENT_TYPE_NOSNIFF).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        policy = getattr(settings, "DELTAWEB_CSP", "")
        if policy and "Content-Security-Policy" not in response:
            match = getattr(request, "resolver_match", None)
            styles = STYLE_ELEMENTS.get(match.view_name) if match is not None else None
            response["Content-Security-Policy"] = _with_style_sources(policy, styles()) if styles else policy
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
