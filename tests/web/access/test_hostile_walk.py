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

from tables.models import RestoreRequest, Table
from tables.services.catalog import registration
from tables.services.sync import store as sync
from tests.web.access.test_hardening import assert_error
from tests.web.pages.test_ops import samples
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

    def others(found: dict) -> float:  # the process's count so far (other tests' requests too)
        return sum(
            v
            for (name, labels), v in found.items()
            if name == "deltaweb_http_requests_total" and ("method", "other") in labels
        )

    anonymous = Client(raise_request_exception=False)
    anonymous.get("/api/tables/")
    first = samples(client)
    before, counted = series(first), others(first)
    for i in range(50):
        r = anonymous.generic(f"X-MADE-UP-{i}", "/api/tables/")
        assert r.status_code < 500
    found = samples(client)
    grown = series(found) - before
    assert {dict(labels)["method"] for labels in grown} <= {"other", "GET"}
    assert len(grown) <= 2  # at most one new series per (view, status): not one per method
    assert others(found) - counted == 50


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


def test_a_retention_beyond_any_answers_400(api, table) -> None:
    for raw in ("99999999999999999999 days", "1e308 hours", "9" * 5000):
        err = assert_error(api.get(f"/api/tables/{table.pk}/reachability/", {"vacuumRetention": raw}), 400, "invalid")
        assert len(err["message"]) < 400


def test_a_lone_surrogate_in_a_json_body_answers_400(api, table) -> None:
    for path, raw in (
        (f"/api/tables/{table.pk}/row-history/", '{"key": {"id": "\\ud800"}, "from": 0, "to": 1}'),
        (f"/api/tables/{table.pk}/row-history/", '{"key": {"\\udfff": "1"}, "from": 0, "to": 1}'),
        (f"/api/tables/{table.pk}/restores/", '{"version": 0, "reason": "\\ud800"}'),
    ):
        assert_error(api.post(path, raw, content_type="application/json"), 400, "parse_error")
    assert not RestoreRequest.objects.filter(table=table).exists()


HOSTILE = ["-1", "9" * 40, "\x00", "x" * 5000, "../../etc", "[]"]


def test_the_api_answers_hostile_bodies_and_parameters_without_a_5xx(api, table) -> None:
    """Row history, reachability, discovery, restores (recovery included) and the data jobs,
    with hostile values: each a 4xx (or a job), never a 5xx."""
    t = table.pk
    bodies = {
        f"/api/tables/{t}/row-history/": [
            {"key": {"id": "x" * 2_000_000}, "from": 0, "to": 1},
            {"key": {f"c{i}": "1" for i in range(5000)}, "from": 0, "to": 1},
            {"key": {"id": {"a": [1, {"b": 2}]}}, "from": 0, "to": 1},
            {"key": {"\x00": "1\x00"}, "from": 0, "to": 1},
            {"key": {"id": "1"}, "from": 10**30, "to": 10**30},
            {"key": {"id": 1e308}, "from": -1, "to": "a"},
            {"key": []},
        ],
        "/api/discover/": [
            {"prefix": "glue://"},
            {"prefix": "s3://" + "a" * 3000},
            {"prefix": "s3://bucket/\x00"},
            {"prefix": "file:///proc/self/fd"},
            {"prefix": "/" + "a/" * 3000},
            {"prefix": "~"},
            {"prefix": "\\\\server\\share"},
        ],
        f"/api/tables/{t}/restores/": [
            {"version": 0, "reason": "r", "recoverFilesFirst": True},
            {"timestamp": "2020-01-01", "reason": "r", "recoverFilesFirst": True},
            {"version": 0, "reason": "r", "where": "(" * 5000},
            {"version": 0, "reason": "r", "where": "x" * 100_000},
            {"version": 0, "reason": "r", "recoverFilesFirst": "yes please"},
        ],
        f"/api/tables/{t}/changes/": [{"from": 0, "to": 10**30}],
        f"/api/tables/{t}/diff/rows/": [
            {"from": 0, "to": 1, "keys": ["id"] * 5000},
            {"from": 0, "to": 1, "keys": ["x" * 100_000]},
        ],
    }
    answered = []
    for path, cases in bodies.items():
        for body in cases:
            r = api.post(path, body, format="json")
            answered.append((path, r.status_code))
    for value in HOSTILE:
        for path in (f"/api/tables/{t}/reachability/", f"/api/tables/{t}/history/", "/api/activity/", "/healthz"):
            for name in ("vacuumRetention", "since", "limit", "offset", "recoverable"):
                answered.append((path, api.get(path, {name: value}).status_code))
    server_errors = [(p, s) for p, s in answered if s >= 500]
    assert not server_errors, server_errors


def test_the_pages_answer_hostile_parameters_without_a_5xx(browser, table) -> None:
    s = table.slug
    pages = [
        f"/t/{s}/{p}"
        for p in (
            "",
            "history/",
            "charts/",
            "versions/",
            "schema/",
            "restores/",
            "charts.json",
            "v/1/",
            "diff/",
            "row/",
            "restore/",
            "history.csv",
        )
    ]
    pages += ["/", "/restores/", "/tables/discover/", "/tables/register/", "/account/"]
    names = [
        "vacuumRetention",
        "since",
        "until",
        "from",
        "to",
        "page",
        "sort",
        "columns",
        "key",
        "version",
        "timestamp",
        "prefix",
    ]
    failed = []
    for page in pages:
        for name in names:
            for value in HOSTILE:
                status = browser.get(page, {name: value}).status_code
                if status >= 500:
                    failed.append((page, name, value[:10], status))
    forms = [
        f"/t/{s}/row/start/",
        f"/t/{s}/diff/rows/",
        f"/t/{s}/v/1/preview/",
        f"/t/{s}/restore/",
        "/tables/discover/",
        "/tables/register/",
    ]
    for form in forms:
        for name in (
            "key",
            "from",
            "to",
            "version",
            "timestamp",
            "reason",
            "where",
            "prefix",
            "location",
            "name",
            "keys",
            "source",
            "region",
        ):
            for value in HOSTILE:
                status = browser.post(form, {name: value}).status_code
                if status >= 500:
                    failed.append((form, name, value[:10], status))
    assert not failed, failed
