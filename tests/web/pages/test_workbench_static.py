"""Static files after a real collectstatic: hashed names, gzip copies, WhiteNoise serving them
compressed and cached for ever; plotly.js among them, taken from the installed package."""

from __future__ import annotations

import gzip
import json
import re

import pytest
from django.core.management import call_command
from django.test import Client, override_settings

from tables.web.base.staticfiles import plotly_file

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    """One collectstatic for the module (it hashes and compresses 5 MB of plotly)."""
    root = tmp_path_factory.mktemp("collected")
    # only what collectstatic wrote, as in a deployment
    with override_settings(STATIC_ROOT=root, WHITENOISE_USE_FINDERS=False):
        call_command("collectstatic", interactive=False, verbosity=0)
        yield root


def test_collectstatic_hashes_and_compresses_plotly_and_our_files(collected) -> None:
    manifest = json.loads((collected / "staticfiles.json").read_text())["paths"]
    for name in ("vendor/plotly.min.js", "tables/style.css", "tables/charts.js", "tables/favicon.svg"):
        hashed = manifest[name]
        assert re.search(r"\.[0-9a-f]{12}\.", hashed), hashed
        assert (collected / hashed).is_file()
    plotly = collected / manifest["vendor/plotly.min.js"]
    assert plotly.read_bytes() == plotly_file().read_bytes()
    gz = plotly.with_name(plotly.name + ".gz")
    assert gzip.decompress(gz.read_bytes()) == plotly.read_bytes()
    assert gz.stat().st_size < plotly.stat().st_size / 2


def test_pages_link_hashed_files_served_compressed_and_cached_for_ever(collected, analyst) -> None:
    from tables.models import Table

    Table.objects.create(name="Sales", slug="sales", location="/nowhere/sales", last_synced_version=0)
    client = Client()  # a new client: WhiteNoise reads the collected files when it starts
    client.force_login(analyst)
    page = client.get("/t/sales/charts/").content.decode()
    src = re.search(r'<script src="(/static/vendor/plotly\.min\.[0-9a-f]{12}\.js)"', page)
    assert src, "the page links plotly by its hashed name"
    css = re.search(r'href="(/static/tables/style\.[0-9a-f]{12}\.css)"', page)
    assert css
    r = client.get(src.group(1), HTTP_ACCEPT_ENCODING="gzip, deflate")
    assert r.status_code == 200 and r["Content-Encoding"] == "gzip"
    assert "max-age=315360000" in r["Cache-Control"] and "immutable" in r["Cache-Control"]
    body = b"".join(r.streaming_content)
    assert gzip.decompress(body) == plotly_file().read_bytes()
    assert int(r["Content-Length"]) == len(body) < plotly_file().stat().st_size / 2
    r = client.get("/favicon.ico")
    assert r.status_code == 302 and re.fullmatch(r"/static/tables/favicon\.[0-9a-f]{12}\.svg", r["Location"])


def test_a_missing_static_file_is_a_404_under_the_development_server(settings) -> None:
    # `make run` serves /static/ through Django's StaticFilesHandler and the finders
    from django.contrib.staticfiles import finders
    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from django.core.handlers.wsgi import WSGIHandler
    from django.test import RequestFactory

    settings.DEBUG = True
    assert finders.find("tables/no-such-file.js") is None
    assert finders.find("tables/no-such-file.js", find_all=True) == []
    seen: dict[str, str] = {}
    handler = StaticFilesHandler(WSGIHandler())
    environ = RequestFactory().get("/static/tables/no-such-file.js").environ
    b"".join(handler(environ, lambda status, headers, exc_info=None: seen.setdefault("status", status)))
    assert seen["status"].startswith("404")
    # and a file that exists is still served
    environ = RequestFactory().get("/static/vendor/plotly.min.js").environ
    b"".join(handler(environ, lambda status, headers, exc_info=None: seen.__setitem__("status", status)))
    assert seen["status"].startswith("200") or plotly_file() is None


def test_under_make_runs_debug_settings_plotly_is_hashed_and_cached_for_ever(collected, analyst, settings) -> None:
    """`make run` (DEBUG on, the collected files served, the finders off): the page links plotly
    by its hashed name, and that URL answers immutable for a year (issue 57, item 5: it was the
    plain name with max-age=0, 4.8 MB fetched again on every page)."""
    from tables.models import Table

    settings.DEBUG = True
    Table.objects.create(name="Dev", slug="dev", location="/nowhere/dev", last_synced_version=0)
    client = Client()
    client.force_login(analyst)
    page = client.get("/t/dev/charts/").content.decode()
    src = re.search(r'<script src="(/static/vendor/plotly\.min\.[0-9a-f]{12}\.js)"', page)
    assert src, re.findall(r'<script src="[^"]*"', page)
    r = client.get(src.group(1), HTTP_ACCEPT_ENCODING="gzip")
    assert r.status_code == 200 and r["Content-Encoding"] == "gzip"
    assert r["Cache-Control"] == "max-age=315360000, public, immutable"
    assert gzip.decompress(b"".join(r.streaming_content)) == plotly_file().read_bytes()
