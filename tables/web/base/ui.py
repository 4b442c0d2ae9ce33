"""What the browser views share: sign-in and error pages (PageError, ServiceError and
DeltaError shown with the status of tables.services.errors), the table of a URL, the common context
and query-string helpers. Every *views.py module imports this; it imports none of them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from tables.delta import errors as delta_errors
from tables.models import Job, Table
from tables.services.access import roles
from tables.services.access.hot_queries import table_row
from tables.services.catalog.lookup import INT64_MAX, parse_int64
from tables.services.errors import ServiceError, http_status, public_message

MAX_ID = INT64_MAX  # the largest version or id the database can hold


class PageError(Exception):
    """A page that cannot be shown; rendered as the error page with `status`."""

    def __init__(self, message: str, status: int = 400, table: Table | None = None) -> None:
        super().__init__(message)
        self.message, self.status, self.table = message, status, table


def error_page(request: HttpRequest, message: str, status: int, table: Table | None = None) -> HttpResponse:
    # the table by its name, never its location on the server (tables.services.errors.public_message)
    message = public_message(message, table)
    return render(
        request,
        "tables/error.html",
        {"message": message, "status": status, "table": table, "can_register": roles.can_register(request.user)},
        status=status,
    )


def page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Sign-in required; PageError, ServiceError and DeltaError become an error page."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except PageError as exc:
            return error_page(request, exc.message, exc.status, exc.table)
        except (ServiceError, delta_errors.DeltaError) as exc:
            message = exc.message if isinstance(exc, ServiceError) else str(exc)
            slug = kwargs.get("slug")
            table = Table.objects.filter(slug=slug).first() if isinstance(slug, str) else None
            return error_page(request, message, http_status(exc), table)

    return login_required(wrapper)


def page_error(exc: ServiceError | delta_errors.DeltaError, table: Table | None = None) -> PageError:
    """A service or core error as the error page of a table."""
    return PageError(exc.message if isinstance(exc, ServiceError) else str(exc), http_status(exc), table)


def table_of(slug: str) -> Table:
    """The table of a page's URL, or a 404 page."""
    table = table_row(slug=slug)
    if table is None:
        raise PageError(f"There is no table '{slug}'. It may have been removed or renamed.", 404)
    return table


def context(request: HttpRequest, **extra: Any) -> dict[str, Any]:
    """What every page's template needs to know of the user."""
    return {
        "can_register": roles.can_register(request.user),
        "can_request_restore": roles.can_request_restore(request.user),
        **extra,
    }


def job_param(request: HttpRequest, name: str, table: Table | None = None, kinds: tuple[str, ...] = ()) -> Job | None:
    """The job named by a query parameter (of this table and these kinds, when given)."""
    pk = parse_int64(request.GET.get(name, ""))
    if pk is None:
        return None
    qs = Job.objects.filter(pk=pk)
    if table is not None:
        qs = qs.filter(table=table)
    if kinds:
        qs = qs.filter(kind__in=kinds)
    return qs.first()


def query(request: HttpRequest, drop: tuple[str, ...] = ("page",)) -> str:
    """The current query string without `drop`, for pagination links."""
    q = request.GET.copy()
    for key in drop:
        q.pop(key, None)
    return q.urlencode()


def version_param(raw: str, name: str, table: Table | None = None) -> int:
    """A version number from a form or query string, or a 400 page naming the field."""
    value = parse_int64(raw)
    if value is None:
        raise PageError(f"'{name}' must be a version number (0 or more), not '{(raw or '').strip()[:40]}'.", 400, table)
    return value


def site_context(request: HttpRequest) -> dict[str, Any]:
    """Template context processor for every page: the plug-ins' templates for the navigation and
    for every tab of a table (tables.plugins), and whether background work is paused (the task
    queue does not answer: a banner says so, to signed-in users)."""
    from tables import plugins
    from tables.services.jobs import broker

    signed_in = bool(getattr(request, "user", None) and request.user.is_authenticated)
    return {
        "plugin_nav": plugins.includes("nav"),
        "plugin_frame": plugins.includes("frame"),
        "background_paused": signed_in and broker.background_paused(),
    }


def focus_first_error(form) -> None:
    """Move autofocus to the first field with an error, so the keyboard lands there."""
    invalid = [name for name in form.fields if name in form.errors]
    if not invalid:
        return
    for name, field in form.fields.items():
        field.widget.attrs.pop("autofocus", None)
        if name == invalid[0]:
            field.widget.attrs["autofocus"] = True
