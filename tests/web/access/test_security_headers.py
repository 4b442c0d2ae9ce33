"""The headers a browser is given: a Content-Security-Policy without inline styles on every page
but Swagger UI's (no template keeps a style attribute or element), and, where a deployment
turns them on (the image does), Secure cookies and HSTS behind TLS (a proxy's header, when
configured, says a request came over it); plain http (`make run`) keeps working without them."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.web.pages.test_api import make_user

pytestmark = pytest.mark.django_db
TEMPLATE_DIRS = [REPO / "templates", REPO / "tables" / "templates", REPO / "alerts" / "templates"]


def style_src(response) -> str:
    policy = response["Content-Security-Policy"]
    return next(d.strip() for d in policy.split(";") if d.strip().startswith("style-src"))


def test_only_swagger_ui_may_style_inline(client) -> None:
    anonymous = client.get("/accounts/login/")
    assert style_src(anonymous) == "style-src 'self'", anonymous["Content-Security-Policy"]
    client.force_login(make_user("root", staff=True, superuser=True))
    for path in ("/", "/account/", "/restores/", "/admin/", "/activity/", "/tables/register/"):
        answer = client.get(path)
        assert answer.status_code == 200, path
        assert style_src(answer) == "style-src 'self'", (path, answer["Content-Security-Policy"])
    docs = client.get("/api/docs/", HTTP_ACCEPT="text/html")
    assert docs.status_code == 200 and "'unsafe-inline'" in style_src(docs)
    assert "script-src 'self';" in docs["Content-Security-Policy"]


def test_the_charts_page_allows_exactly_the_style_elements_plotly_adds(client, settings) -> None:
    from tables.models import Table
    from tests.conftest import golden_path

    path = golden_path("basic-with-inserts-deletes-checkpoint")
    settings.DELTAWEB_ALLOWED_ROOTS = [str(path.parent)]
    Table.objects.create(name="t", slug="t", location=str(path))
    client.force_login(make_user("root", staff=True, superuser=True))
    charts = client.get("/t/t/charts/")
    assert charts.status_code == 200
    sources = style_src(charts).split()[1:]
    # the empty element plotly fills through CSSOM, and the map library's stylesheet: by hash
    assert "'unsafe-inline'" not in sources and "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='" in sources
    assert sources[0] == "'self'" and all(s.startswith("'sha256-") for s in sources[1:]) and len(sources) <= 4
    assert style_src(client.get("/t/t/")) == "style-src 'self'"


def test_no_template_keeps_an_inline_style() -> None:
    found = []
    for root in TEMPLATE_DIRS:
        for path in root.rglob("*.html"):
            text = path.read_text()
            for match in re.finditer(r"<style\b|\sstyle\s*=", text):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{path.relative_to(REPO)}:{line}")
    assert not found, found


def _settings(names: list[str], **env: str) -> list[str]:
    keep = {
        k: v for k, v in os.environ.items() if not k.startswith(("DELTAWEB_SECURE", "DELTAWEB_HSTS", "DELTAWEB_PROXY"))
    }
    code = "import django; django.setup(); from django.conf import settings as s; " + "; ".join(
        f"print(repr(s.{n}))" for n in names
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**keep, "DJANGO_SETTINGS_MODULE": "deltaweb.settings", **env},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


NAMES = ["SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_HSTS_SECONDS", "SECURE_PROXY_SSL_HEADER"]


def test_secure_cookies_and_hsts_come_from_the_environment_and_the_image_turns_them_on() -> None:
    assert _settings(NAMES) == ["False", "False", "0", "None"]  # make run: plain http
    on = _settings(
        NAMES,
        DELTAWEB_SECURE_COOKIES="1",
        DELTAWEB_HSTS_SECONDS="31536000",
        DELTAWEB_PROXY_SSL_HEADER="X-Forwarded-Proto",
    )
    assert on[:3] == ["True", "True", "31536000"] and "HTTP_X_FORWARDED_PROTO" in " ".join(on[3:])
    envs = " ".join(line for line in (REPO / "Dockerfile").read_text().splitlines() if line.startswith("ENV "))
    assert "DELTAWEB_SECURE_COOKIES=1" in envs and re.search(r"DELTAWEB_HSTS_SECONDS=[1-9]", envs)
    compose = (REPO / "docker-compose.yml").read_text()
    assert "DELTAWEB_PROXY_SSL_HEADER" in compose and "DELTAWEB_SECURE_COOKIES" in compose


def test_behind_tls_the_session_cookie_is_secure_and_hsts_is_sent(client, settings) -> None:
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    make_user("ana")
    form = client.get("/accounts/login/", HTTP_X_FORWARDED_PROTO="https")
    assert form["Strict-Transport-Security"] == "max-age=31536000"
    signed_in = client.post(
        "/accounts/login/", {"username": "ana", "password": "pw-ana"}, HTTP_X_FORWARDED_PROTO="https"
    )
    assert signed_in.status_code == 302
    cookie = signed_in.cookies[settings.SESSION_COOKIE_NAME]
    assert cookie["secure"] and cookie["httponly"]
    assert client.cookies["csrftoken"]["secure"]
    # a plain http request (no proxy's header) is told nothing about HSTS
    assert "Strict-Transport-Security" not in client.get("/accounts/login/")
