"""The discovery page: every Delta table under a prefix, previewed (GET ?prefix=), then the
chosen new ones registered (POST) and synced by the probe's next tick. Nothing is ticked until
the user ticks it ("Tick all" / "Tick none": ?tick=all, and discover.js without a reload); the
tables that cannot be read are listed apart, with why, and never offered."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from tables.services.access import roles
from tables.services.catalog import discovery
from tables.services.errors import ServiceError
from tables.web.base.ui import PageError, context, page


@page
@require_http_methods(["GET", "POST"])
def discover(request: HttpRequest) -> HttpResponse:
    if not roles.can_register(request.user):
        raise PageError("Discovering tables needs the analyst or approver role; ask an administrator.", 403)
    source = request.POST if request.method == "POST" else request.GET
    prefix = (source.get("prefix") or "").strip()[:2000]
    glue = (source.get("glue") or "").strip()[:255]
    if request.method == "POST":
        chosen: list[str] | None = request.POST.getlist("location")
        if not chosen and _count(request.POST.get("offered")) > 0:
            if not request.POST.get("again"):
                messages.error(request, "No table was ticked: nothing was registered. Tick the tables to register.")
                return redirect(_preview_url(prefix, glue))
            chosen = []  # only the schedule is saved
        elif not chosen:
            chosen = None  # a form that offered no new table (or a client without the form): all of them
        elif _all_ticked(request, len(chosen)):
            chosen = None  # every listed table ticked, more found than listed: all of them, as the page says
        try:
            source = discovery.schedule(request.user, prefix, glue) if request.POST.get("again") else None
            done = discovery.register_found(prefix, request.user, chosen, glue_database=glue, source=source)
        except ServiceError as exc:
            return _render(request, prefix, glue, error=exc.message, status=exc.status)
        n = len(done["registered"])
        messages.success(request, f"Registered {n} table{'s' if n != 1 else ''}; each syncs within a few seconds.")
        for row in done["skipped"][:10]:
            messages.error(request, f"Not registered: {row['location']}: {row['message']}")
        return redirect(reverse("tables:table_list"))
    if not prefix and not glue:
        return _render(request, prefix, glue)
    try:
        rows = discovery.PREVIEW_ROWS
        if glue:
            found = discovery.preview_glue(glue, request.user, rows)
        else:
            found = discovery.preview(prefix, request.user, rows)
    except ServiceError as exc:
        return _render(request, prefix, glue, error=exc.message, status=exc.status)
    return _render(request, prefix, glue, found=found)


def _count(raw: str | None) -> int:
    """A count the form sent back (hidden), 0 when it is not one."""
    return int(raw) if raw and raw.isascii() and raw.isdigit() and len(raw) < 10 else 0


def _preview_url(prefix: str, glue: str) -> str:
    query = urlencode({"glue": glue} if glue else {"prefix": prefix})
    return f"{reverse('tables:discover')}?{query}"


def _all_ticked(request: HttpRequest, ticked: int) -> bool:
    """Whether the form came back with every new table it listed ticked while the preview
    found more than it listed (its hidden `offered` and `more`)."""
    try:
        offered, more = int(request.POST.get("offered", "")), int(request.POST.get("more", ""))
    except ValueError:
        return False
    return more > 0 and ticked == offered


def _render(
    request: HttpRequest, prefix: str, glue: str, found=None, error: str = "", status: int = 200
) -> HttpResponse:
    # the service lists the first discovery.PREVIEW_ROWS tables; its counts cover them all
    listed = found["tables"] if found else []
    ctx = context(
        request,
        prefix=prefix,
        glue=glue,
        found=found,
        rows=[r for r in listed if r["status"] != "unreadable"],
        unreadable=[r for r in listed if r["status"] == "unreadable"],
        error=error,
        more=found["more"] if found else 0,
        offered=sum(r["status"] == "new" for r in listed),
        tick_all=request.GET.get("tick") == "all",
    )
    return render(request, "tables/discover.html", ctx, status=status)
