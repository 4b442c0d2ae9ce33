"""The hostile walk of the surfaces added since the last one, each attack a test: request
limits (too many fields, made-up methods), locations that lead into /proc or out of the roots,
and the CSRF refusal's code. Sign-on's attacks are in tests/sso/, the listener's in
test_events.py, the smaller cases beside the features they touch."""

from __future__ import annotations

import pytest
from django.core.cache import caches
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tables.models import Table
from tables.services import registration
from tables.services.sync import store as sync
from tests.web.test_hardening import assert_error
from tests.web.test_ops import samples
from tests.web.ui_tables import history_table

pytest.importorskip("deltalake")
pytestmark = pytest.mark.django_db

MANY = "&".join(f"f{i}=1" for i in range(1200))  # DATA_UPLOAD_MAX_NUMBER_FIELDS is 1,000
MANY_FORM = {f"f{i}": "1" for i in range(1200)}


@pytest.fixture(autouse=True)
def _clear_cache(db):
    for alias in ("default", "shared"):
        caches[alias].clear()


@pytest.fixture
def api(analyst) -> APIClient:
    c = APIClient(raise_request_exception=False)
    c.credentials(HTTP_AUTHORIZATION="Token " + Token.objects.create(user=analyst).key)
    return c


@pytest.fixture
def table(roots) -> Table:
    t = registration.register_table("Sales", str(history_table(roots / "sales")))
    sync.sync_table(t.pk)
    return t


@pytest.mark.parametrize("debug", [False, True], ids=["production", "make-run"])
def test_too_many_fields_answer_400_everywhere(api, table, settings, debug) -> None:
    settings.DEBUG = debug
    anonymous = APIClient(raise_request_exception=False)
    for client in (anonymous, api):
        assert_error(client.get(f"/api/tables/?{MANY}"), 400, "too_many_fields")
        for path in ("/api/auth/token/", "/api/tables/", f"/api/tables/{table.pk}/restores/", "/api/discover/"):
            body = client.post(path, MANY_FORM)  # a form body: Django parses it field by field
            assert body.status_code in (400, 401, 403), (path, body.status_code)
            if client is api or path == "/api/auth/token/":
                assert_error(body, 400, "too_many_fields")
    page = Client(raise_request_exception=False).get(f"/accounts/login/?{MANY}")
    assert page.status_code == 400 and b"Traceback" not in page.content


def test_made_up_methods_are_counted_as_other(client, analyst) -> None:
    def series(found: dict) -> set:
        return {labels for name, labels in found if name == "deltaweb_http_requests_total"}

    anonymous = Client(raise_request_exception=False)
    anonymous.get("/api/tables/")
    before = series(samples(client))
    for i in range(50):
        r = anonymous.generic(f"X-MADE-UP-{i}", "/api/tables/")
        assert r.status_code < 500
    found = samples(client)
    grown = series(found) - before
    assert {dict(labels)["method"] for labels in grown} <= {"other", "GET"}
    assert len(grown) <= 2  # at most one new series per (view, status): not one per method
    other = [
        v
        for (name, labels), v in found.items()
        if name == "deltaweb_http_requests_total" and ("method", "other") in labels
    ]
    assert sum(other) == 50


PROC = ["/proc/1/cwd", "/proc/1/root/etc", "/proc/self/exe", "/proc/self/fd/0", "/proc/self/cwd", "/proc/self/root"]


@pytest.mark.parametrize("path", ["/api/tables/", "/api/discover/"])
def test_locations_under_proc_are_refused_by_what_was_typed(api, roots, path) -> None:
    import os
    import sys

    server_paths = {os.path.realpath(sys.executable), os.getcwd(), str(roots)}
    for location in PROC:
        field = "location" if path == "/api/tables/" else "prefix"
        r = api.post(path, {"name": "x", field: location}, format="json")
        err = assert_error(r, r.status_code)
        assert r.status_code in (400, 403), (location, r.status_code, err)
        message = err["message"]
        assert location in message, message
        leaked = [p for p in server_paths if p and p != "/" and p in message.replace(location, "")]
        assert not leaked, (location, message)
        assert "((" not in message and "))" not in message, message
    assert not Table.objects.exists()


def test_a_link_out_of_the_roots_is_refused_naming_the_link(api, roots, tmp_path_factory) -> None:
    outside = tmp_path_factory.mktemp("outside")
    history_table(outside / "secret")
    (roots / "looks-fine").symlink_to(outside / "secret")
    err = assert_error(
        api.post("/api/tables/", {"name": "x", "location": str(roots / "looks-fine")}, format="json"), 403
    )
    assert err["code"] == "location_not_allowed" and str(outside) not in err["message"]
    assert "looks-fine" in err["message"]  # as typed (the root itself is never shown)


def test_a_csrf_failure_in_the_api_says_so(analyst, table) -> None:
    c = Client(enforce_csrf_checks=True)
    c.force_login(analyst)
    assert_error(c.post(f"/api/tables/{table.pk}/sync/"), 403, "csrf_failed")
    assert_error(c.post("/api/tables/", {"name": "x", "location": "/tmp"}), 403, "csrf_failed")
