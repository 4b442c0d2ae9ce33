"""What operators and their tools ask of a process: /healthz (alive), /readyz (can serve, part
by part: 503 naming what is down), /metrics (Prometheus text, only for the configured
scrapers), and the middleware that counts and times requests for it. None needs a session."""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from tables.services.ops import health, metrics

logger = logging.getLogger("tables.ops")


@never_cache
@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok\n", content_type="text/plain")


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    ok, checks = health.readiness()
    down = [name for name, c in checks.items() if not c["ok"]]
    if down:
        logger.warning("not ready: %s down", ", ".join(down))
    body = {"status": "ok" if ok else "unavailable", "down": down, "checks": checks}
    return JsonResponse(body, status=200 if ok else 503)


def _scraper_allowed(request: HttpRequest) -> bool:
    token = getattr(settings, "DELTAWEB_METRICS_TOKEN", "")
    if token and request.headers.get("Authorization", "") == f"Bearer {token}":
        return True
    try:
        client = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(client in ipaddress.ip_network(net, strict=False) for net in settings.DELTAWEB_METRICS_ALLOWED)


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not _scraper_allowed(request):
        return HttpResponse(
            "not a configured scraper (DELTAWEB_METRICS_ALLOWED, DELTAWEB_METRICS_TOKEN)\n",
            status=403,
            content_type="text/plain",
        )
    return HttpResponse(metrics.exposition(), content_type="text/plain; version=0.0.4; charset=utf-8")


class RequestMetricsMiddleware:
    """Counts and times every request by its view's route (never the raw path: bounded labels)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        t0 = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        view = (match.view_name or match.route) if match else "unmatched"
        metrics.observe_request(
            request.method or "", view or "unmatched", response.status_code, time.perf_counter() - t0
        )
        return response
