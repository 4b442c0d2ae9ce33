"""The account page: who you are, your roles, and your API token (issue a new one with an
expiry, shown once; revoke it)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from tables.services.access import api_tokens, roles
from tables.web.base.ui import context, page


@page
@require_http_methods(["GET", "POST"])
def account(request: HttpRequest) -> HttpResponse:
    new_key = ""
    if request.method == "POST":
        if request.POST.get("action") == "revoke":
            done = api_tokens.revoke(request.user)
            messages.success(request, "Your API token is revoked." if done else "You had no API token.")
            return redirect("tables:account")
        try:
            days = int(request.POST.get("days", ""))
        except ValueError:
            days = api_tokens.default_days()
        token, _expires = api_tokens.issue(request.user, days)
        new_key = token.key  # shown once, on this answer only
    held = [r for r in roles.ROLES if roles.in_group(request.user, r)]
    ctx = context(
        request,
        token=api_tokens.describe(request.user),
        new_key=new_key,
        days=api_tokens.CHOICES_DAYS,
        default_days=api_tokens.default_days(),
        held_roles=held,
    )
    response = render(request, "tables/account.html", ctx)
    response["Cache-Control"] = "no-store"  # the page may carry a token
    return response
