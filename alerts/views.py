"""Pages of the alerts app: the activity feed, and a user's alert settings (webhooks with
their secret shown once, subscriptions, notifications, deliveries and redelivery).
Views parse the request and render; alerts.services and alerts.activity do the work."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from alerts import activity, services
from alerts.models import Channel, Severity
from tables.models import Table
from tables.services.errors import ServiceError
from tables.services.lookup import parse_int64, table_by_key
from tables.web.ui import PageError, context, page


@page
@require_GET
def activity_page(request: HttpRequest) -> HttpResponse:
    """Recent commits and alerts across tables, filtered as the API is; the page refreshes
    its lists by polling the API with conditional requests (alerts/live.js)."""
    try:
        f = activity.FeedFilter.parse(request.GET)
    except ServiceError as exc:
        raise PageError(exc.message, exc.status) from exc
    api = reverse("alerts-api:activity") + ("?" + request.GET.urlencode() if request.GET else "")
    return render(
        request,
        "alerts/activity.html",
        context(
            request,
            feed=activity.feed(f),
            f=f,
            tables=Table.objects.only("name", "slug"),
            kinds=activity.KINDS,
            severities=Severity.values,
            api_url=api,
            unread=services.notifications_of(request.user, unread_only=True).count(),
            rules=services.rule_settings(f.table) if f.table is not None else None,
        ),
    )


def _settings_context(request: HttpRequest, **extra):
    return context(
        request,
        endpoints=services.endpoints_of(request.user),
        subscriptions=services.subscriptions_of(request.user),
        notifications=services.notifications_of(request.user)[:50],
        deliveries=services.deliveries_of(request.user).filter(user=request.user)[:50],
        tables=Table.objects.only("name", "slug"),
        channels=Channel.choices,
        severities=Severity.values,
        **extra,
    )


@page
@require_http_methods(["GET", "POST"])
def settings_page(request: HttpRequest) -> HttpResponse:
    """GET: the user's alert settings. POST (one form per action): create or delete a webhook,
    subscribe or unsubscribe, mark notifications read, redeliver."""
    if request.method == "GET":
        return render(request, "alerts/settings.html", _settings_context(request))
    what = request.POST.get("action", "")
    try:
        if what == "create_webhook":
            ep, secret = services.create_endpoint(
                request.user, request.POST.get("name", ""), request.POST.get("url", "")
            )
            # rendered, not redirected: the secret must not travel through a cookie or a URL
            return render(
                request, "alerts/settings.html", _settings_context(request, new_endpoint=ep, new_secret=secret)
            )
        if what == "delete_webhook":
            services.delete_endpoint(request.user, _pk(request))
            messages.success(request, "Webhook removed.")
        elif what == "subscribe":
            key = request.POST.get("table", "")
            table = table_by_key(key) if key else None
            if key and table is None:
                raise ServiceError("There is no such table.", "not_found", 404)
            endpoint = parse_int64(request.POST.get("endpoint", "")) if request.POST.get("endpoint") else None
            services.subscribe(
                request.user, table, request.POST.get("channel", ""), request.POST.get("min_severity", ""), endpoint
            )
            messages.success(request, "Subscribed.")
        elif what == "unsubscribe":
            services.unsubscribe(request.user, _pk(request))
            messages.success(request, "Subscription removed.")
        elif what == "mark_read":
            services.mark_read(request.user)
        elif what == "set_rule":
            table = table_by_key(request.POST.get("table", ""))
            if table is None:
                raise ServiceError("There is no such table.", "not_found", 404)
            threshold = request.POST.get("threshold", "").strip()
            try:
                value = float(threshold) if threshold else None
            except ValueError as exc:
                raise ServiceError("The threshold is a number.", "invalid_threshold") from exc
            services.set_rule(
                request.user,
                table,
                request.POST.get("rule", ""),
                enabled=request.POST.get("enabled") == "on",
                threshold=value,
            )
            messages.success(request, "Rule saved.")
            return redirect(reverse("alerts:activity") + "?table=" + table.slug)
        elif what == "redeliver":
            services.redeliver(request.user, _pk(request))
            messages.success(request, "Delivery queued again.")
        else:
            raise ServiceError("Unknown action.", "invalid")
    except ServiceError as exc:
        return render(request, "alerts/settings.html", _settings_context(request, error=exc.message), status=exc.status)
    return redirect("alerts:settings")


def _pk(request: HttpRequest) -> int:
    pk = parse_int64(request.POST.get("id", ""))
    if pk is None:
        raise ServiceError("Which one? (id missing)", "invalid")
    return pk


@page
@require_POST
def mark_read(request: HttpRequest) -> HttpResponse:
    services.mark_read(request.user)
    return redirect("alerts:activity")
