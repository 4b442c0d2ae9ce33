"""Pages of the alerts app: the activity feed, a user's alert settings (webhooks with
their secret shown once, subscriptions, notifications, deliveries and redelivery), and the
rules page where analysts, approvers and staff add, edit and switch off users' rules.
Views parse the request and render; alerts.services and alerts.activity do the work."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from alerts import activity, services
from alerts.forms import RuleForm
from alerts.models import Channel, CustomRule, Severity
from tables.models import Table
from tables.services.catalog.lookup import parse_int64, table_by_key
from tables.services.errors import ServiceError
from tables.web.base.ui import MAX_ID, PageError, context, focus_first_error, page


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
    if what == "create_webhook":
        return _create_webhook(request)
    try:
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


def _create_webhook(request: HttpRequest) -> HttpResponse:
    """A new webhook, its secret shown once; a refused one is the form again with what was
    typed and the reason beside the field at fault (a secret is never typed: it is made here)."""
    name, url = request.POST.get("name", "")[:200], request.POST.get("url", "")[:2000]
    try:
        ep, secret = services.create_endpoint(request.user, name, url)
    except ServiceError as exc:
        refused = {"field": exc.extra.get("field") or "", "message": exc.message}
        values = {"name": name, "url": url}
        ctx = _settings_context(request, webhook_error=refused, webhook_values=values)
        return render(request, "alerts/settings.html", ctx, status=exc.status)
    # rendered, not redirected: the secret must not travel through a cookie or a URL
    return render(request, "alerts/settings.html", _settings_context(request, new_endpoint=ep, new_secret=secret))


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


# --- users' rules (analysts, approvers, staff) ----------------------------------------------------

RULE_ID = "rule_%s"  # the form's field ids (rule_name, ...)


def _admin_only(request: HttpRequest) -> None:
    """The rules page is for those who change rules: anyone else gets a 403, whatever the method."""
    if not services.can_edit_rules(request.user):
        raise PageError(
            "Alert rules are changed by analysts, approvers and administrators; ask an administrator for one of "
            "those roles.",
            403,
        )


def _refused(form: RuleForm, exc: ServiceError) -> None:
    """A rule the services refused: the message beside the field it names (else above the form)."""
    field = exc.extra.get("field")
    form.add_error(field if field in form.fields else None, exc.message)


def _invalid(form: RuleForm) -> None:
    form.mark_errors()
    focus_first_error(form)


@page
@require_http_methods(["GET", "POST"])
def rules_page(request: HttpRequest) -> HttpResponse:
    """GET: users' rules and the form of a new one. POST: create (action=create), or switch
    one off or on (action=disable / enable, id)."""
    _admin_only(request)
    form = RuleForm(auto_id=RULE_ID)
    if request.method == "POST":
        what = request.POST.get("action", "")
        if what in ("disable", "enable"):
            rule = services.set_rule_enabled(request.user, _pk(request), what == "enable")
            messages.success(request, f"Rule “{rule.name}” switched {'on' if rule.enabled else 'off'}.")
            return redirect(reverse("alerts:rules") + f"#rule-{rule.pk}")
        if what != "create":
            raise ServiceError("Unknown action.", "invalid")
        form = RuleForm(request.POST, auto_id=RULE_ID)
        if form.is_valid():
            try:
                rule = services.create_rule(request.user, **form.rule_fields())
            except ServiceError as exc:
                _refused(form, exc)
            else:
                messages.success(request, f"Rule “{rule.name}” added.")
                return redirect(reverse("alerts:rules") + f"#rule-{rule.pk}")
        _invalid(form)
    rules = CustomRule.objects.select_related("table", "created_by")
    status = 400 if form.errors else 200
    return render(request, "alerts/rules.html", context(request, rules=rules, form=form), status=status)


@page
@require_http_methods(["GET", "POST"])
def rule_edit(request: HttpRequest, pk: int) -> HttpResponse:
    """One rule's form: GET filled in as the rule is, POST saves it (or says what is wrong)."""
    _admin_only(request)
    rule = CustomRule.objects.filter(pk=pk).first() if pk <= MAX_ID else None
    if rule is None:
        raise PageError(f"There is no rule {pk}.", 404)
    if request.method == "GET":
        form = RuleForm.of_rule(rule, auto_id=RULE_ID)
        return render(request, "alerts/rule_edit.html", context(request, rule=rule, form=form))
    form = RuleForm(request.POST, auto_id=RULE_ID)
    if form.is_valid():
        try:
            services.update_rule(request.user, rule.pk, **form.rule_fields())
        except ServiceError as exc:
            _refused(form, exc)
        else:
            messages.success(request, f"Rule “{form.cleaned_data['name'].strip()}” saved.")
            return redirect(reverse("alerts:rules") + f"#rule-{rule.pk}")
    _invalid(form)
    return render(request, "alerts/rule_edit.html", context(request, rule=rule, form=form), status=400)
