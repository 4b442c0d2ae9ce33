"""Hardening: hostile input never ends in a 5xx, errors are named and actionable, and the
security defaults (JSON under /api/, throttled sign-in, private schema, security headers,
no server paths in messages) hold for what a user actually sees.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from django.core.cache import cache, caches
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tables.models import RestoreRequest, Table
from tables.services.catalog import registration
from tables.services.sync import store as sync
from tests.web.ui_tables import history_table

pytest.importorskip("deltalake")

pytestmark = pytest.mark.django_db


# --- fixtures --------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _clear_cache(db):
    # throttles and login counters live in the shared cache (a database table here): every
    # test starts with none
    for alias in ("default", "shared"):
        caches[alias].clear()
    yield
    for alias in ("default", "shared"):
        caches[alias].clear()


@pytest.fixture
def api(analyst) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION="Token " + Token.objects.create(user=analyst).key)
    return c


@pytest.fixture
def table(roots) -> Table:
    path = history_table(roots / "sales")
    t = registration.register_table("Sales", str(path), "orders by region")
    sync.sync_table(t.pk)
    t.refresh_from_db()
    return t


def assert_error(response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert set(body) == {"error"}, body
    assert {"code", "message"} <= set(body["error"]), body
    assert body["error"]["message"] and "Traceback" not in body["error"]["message"]
    if code is not None:
        assert body["error"]["code"] == code, body
    return body["error"]


# --- 1. timestamps are bounded when parsed ---------------------------------------------

HOSTILE_TIMESTAMPS = [
    "9223372036854775807",
    "-9223372036854775808",
    "9999999999999999999999",
    "9" * 400,
    "253402300800000",  # one ms after 9999-12-31T23:59:59.999Z
    "-62135596800001",  # one ms before 0001-01-01
    "9999-12-31T23:59:59-14:00",
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59.999-00:01",
    "10000-01-01",
    "0000-01-01",
    "2024-13-01",
    "2024-02-30 12:00:00",
    "2024-01-01T25:00:00",
    "2024-01-01T00:00:00+25:00",
    "now",
    "1e20",
    "NaN",
    "\x00",
    "2024-01-01" + " " * 100 + "x",
]


@pytest.mark.parametrize("raw", HOSTILE_TIMESTAMPS)
def test_hostile_timestamps_are_a_named_400_in_the_api(api, table, raw) -> None:
    # a NUL never reaches the parser: the serializer refuses it as a malformed field
    code = "invalid" if "\x00" in raw else "invalid_timestamp"
    r = api.get(f"/api/tables/{table.pk}/resolve/", {"timestamp": raw})
    assert_error(r, 400, code)
    r = api.get(f"/api/tables/{table.pk}/history/", {"since": raw})
    assert_error(r, 400, code)


@pytest.mark.parametrize("raw", HOSTILE_TIMESTAMPS)
def test_hostile_timestamps_are_a_message_on_the_page(browser, table, raw) -> None:
    r = browser.get("/t/sales/versions/", {"as_of": raw})
    # the Versions tab itself, answered 400, with the time-travel form saying what is wrong
    assert r.status_code == 400
    assert r.context["tt_result"] is None and r.context["tt_error"]
    html = r.content.decode()
    assert "Traceback" not in html and 'id="time-travel"' in html and 'id="open-version"' in html


@pytest.mark.parametrize("raw", ["9999999999999999999999", "9999-12-31T23:59:59-14:00", "9223372036854775807"])
def test_hostile_restore_timestamps_are_refused_and_save_nothing(api, browser, table, raw) -> None:
    r = api.post(f"/api/tables/{table.pk}/restores/", {"timestamp": raw, "reason": "r"}, format="json")
    assert_error(r, 400, "invalid_timestamp")
    r = browser.post("/t/sales/restore/", {"timestamp": raw, "reason": "r"})
    assert r.status_code == 400
    assert "out of range" in r.content.decode() or "not a timestamp" in r.content.decode()
    assert RestoreRequest.objects.count() == 0


def test_the_cli_refuses_an_out_of_range_timestamp_in_one_line(table) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tables.delta.cli",
            "resolve",
            table.location,
            "--timestamp",
            "9999-12-31T23:59:59-14:00",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "out of range" in lines[0]


# --- 2. every answer under /api/ is JSON ------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["/api/foo%0A", "/api/foo%0Abar/", "/api/tables/%0A/", "/api/x/%0D%0A/", "/api/nothing", "/api/a/b/c/"],
)
def test_unknown_api_paths_answer_json_404(api, path) -> None:
    err = assert_error(api.get(path), 404, "not_found")
    assert "\n" not in err["message"]


def test_a_post_to_an_unknown_api_path_answers_json_also_with_csrf_checks(analyst) -> None:
    # a token client, and a browser session with CSRF checks on: neither gets Django's HTML page
    token = APIClient(enforce_csrf_checks=True)
    token.credentials(HTTP_AUTHORIZATION="Token " + Token.objects.create(user=analyst).key)
    assert_error(token.post("/api/nothing/", {"a": 1}, format="json"), 404, "not_found")
    session = APIClient(enforce_csrf_checks=True)
    session.force_login(analyst)
    assert_error(session.post("/api/nothing/", {"a": 1}, format="json"), 404, "not_found")


def test_a_csrf_failure_under_api_is_json_and_elsewhere_a_page(analyst, table) -> None:
    from django.test import Client

    c = Client(enforce_csrf_checks=True)
    c.force_login(analyst)
    # DRF's session authentication refuses in its own format; the middleware's CSRF check
    # (a view DRF does not own, e.g. the API root is not CSRF exempt for POST) answers JSON too
    r = c.post(f"/api/tables/{table.pk}/sync/")
    assert_error(r, 403)
    from tables.site.errors import csrf_failure

    req = c.get("/api/").wsgi_request
    r = csrf_failure(req, "CSRF token missing.")
    assert r.status_code == 403 and json.loads(r.content)["error"]["code"] == "csrf_failed"
    r = c.post("/t/sales/sync/")
    assert r.status_code == 403 and r["Content-Type"].startswith("text/html")


def test_server_errors_and_404_handlers_answer_json_under_api(rf) -> None:
    from tables.site.errors import handler404, handler500

    r = handler500(rf.get("/api/tables/"))
    assert r.status_code == 500 and json.loads(r.content)["error"]["code"] == "internal"
    r = handler404(rf.get("/api/tables/"), None)
    assert r.status_code == 404 and json.loads(r.content)["error"]["code"] == "not_found"
    r = handler404(rf.get("/no/such/page/"), None)
    assert r.status_code == 404 and "Not found" in r.content.decode()


# --- 3. security defaults ----------------------------------------------------------------


def test_debug_mode_answers_the_projects_404_not_the_url_list(settings, browser) -> None:
    settings.DEBUG = True
    r = browser.get("/no/such/page/")
    html = r.content.decode()
    assert r.status_code == 404 and "There is nothing at this address" in html
    assert "URLconf" not in html and "tables/register/" not in html
    settings.DELTAWEB_DEBUG_PAGES = True
    r = browser.get("/no/such/page/")
    assert r.status_code == 404 and "URLconf" in r.content.decode()


def test_debug_mode_answers_the_projects_500_without_a_traceback(settings, browser, monkeypatch, table) -> None:
    from tables.web.tabs import overview as overview_views

    def boom(slug):
        raise ZeroDivisionError("secret detail")

    settings.DEBUG = True
    monkeypatch.setattr(overview_views, "table_of", boom)
    r = browser.get("/t/sales/")
    html = r.content.decode()
    assert r.status_code == 500 and "Something went wrong" in html
    assert "secret detail" not in html and "Traceback" not in html and "SECRET_KEY" not in html


def test_the_token_endpoint_is_throttled(settings, analyst) -> None:
    settings.DELTAWEB_TOKEN_RATE = "10/minute"
    c = APIClient()
    for _ in range(10):
        assert_error(c.post("/api/auth/token/", {"username": "ana", "password": "wrong"}, format="json"), 400)
    r = c.post("/api/auth/token/", {"username": "ana", "password": "secret-pass-1"}, format="json")
    err = assert_error(r, 429, "throttled")
    assert int(r["Retry-After"]) > 0 and "seconds" in err["message"]


def test_the_login_form_refuses_the_eleventh_failure_and_then_the_right_password(settings, analyst) -> None:
    from django.test import Client

    settings.DELTAWEB_LOGIN_RATE = "10/minute"
    c = Client()
    for _ in range(10):
        r = c.post("/accounts/login/", {"username": "ana", "password": "wrong"})
        assert r.status_code == 200 and "_auth_user_id" not in c.session
    r = c.post("/accounts/login/", {"username": "ana", "password": "wrong"})
    assert r.status_code == 429 and "Too many failed sign-in attempts" in r.content.decode()
    # the right password is not even checked until the window has passed
    r = c.post("/accounts/login/", {"username": "ANA", "password": "secret-pass-1"})
    assert r.status_code == 429 and "_auth_user_id" not in c.session
    # once the window has passed (its counter expires), the right password signs in
    from django.test import RequestFactory

    from tables.services.access.signin_throttle import login_key

    caches["shared"].delete(login_key(RequestFactory().post("/accounts/login/"), "ana"))
    r = c.post("/accounts/login/", {"username": "ana", "password": "secret-pass-1"})
    assert r.status_code == 302 and "_auth_user_id" in c.session


def test_a_forged_forwarded_for_does_not_reset_the_token_throttle(settings, analyst) -> None:
    # no proxy is trusted by default: every request is the same client, whatever it claims
    settings.DELTAWEB_TOKEN_RATE = "100/minute"
    settings.DELTAWEB_LOGIN_RATE = "10/minute"
    c = APIClient()
    for i in range(10):
        r = c.post(
            "/api/auth/token/",
            {"username": "ana", "password": "wrong"},
            format="json",
            HTTP_X_FORWARDED_FOR=f"10.0.0.{i}",
        )
        assert_error(r, 400)
    r = c.post(
        "/api/auth/token/",
        {"username": "ana", "password": "secret-pass-1"},
        format="json",
        HTTP_X_FORWARDED_FOR="10.9.9.9",
    )
    assert_error(r, 429, "throttled")
    assert int(r["Retry-After"]) > 0


def test_a_trusted_proxy_s_forwarded_for_names_the_client(settings, analyst) -> None:
    settings.DELTAWEB_TOKEN_RATE = "3/minute"
    settings.DELTAWEB_TRUSTED_PROXIES = 1
    c = APIClient()
    for _ in range(3):
        # the client may prepend anything; the address our proxy appended is the last one
        r = c.post("/api/auth/token/", {}, format="json", HTTP_X_FORWARDED_FOR="1.2.3.4, 10.0.0.1")
        assert_error(r, 400)
    assert_error(c.post("/api/auth/token/", {}, format="json", HTTP_X_FORWARDED_FOR="5.6.7.8, 10.0.0.1"), 429)
    # another client behind the same proxy has its own count
    assert_error(c.post("/api/auth/token/", {}, format="json", HTTP_X_FORWARDED_FOR="10.0.0.2"), 400)


@pytest.mark.parametrize("spelling", ["\uff41na", "\U0001d41ana", "ANA", " ana"])
def test_every_spelling_of_a_username_shares_one_failure_count(settings, analyst, spelling) -> None:
    from django.test import Client

    settings.DELTAWEB_LOGIN_RATE = "10/minute"
    c = Client()
    for _ in range(10):
        assert c.post("/accounts/login/", {"username": "ana", "password": "wrong"}).status_code == 200
    # the form signs 'ａna' in as 'ana' (NFKC): it must be refused as 'ana' is
    r = c.post("/accounts/login/", {"username": spelling, "password": "secret-pass-1"})
    assert r.status_code == 429 and "_auth_user_id" not in c.session
    # the token endpoint shares the count
    r = APIClient().post("/api/auth/token/", {"username": spelling, "password": "secret-pass-1"}, format="json")
    assert_error(r, 429, "throttled")


def test_schema_and_docs_need_sign_in_unless_public(settings, client, analyst) -> None:
    r = client.get("/api/schema/")
    assert_error(r, 401)
    r = client.get("/api/docs/", HTTP_ACCEPT="text/html")
    assert r.status_code == 302 and r["Location"].startswith("/accounts/login/?next=/api/docs/")
    client.force_login(analyst)
    assert client.get("/api/schema/").status_code == 200
    r = client.get("/api/docs/")
    assert r.status_code == 200 and b"<script>" not in r.content  # the init script is a file
    settings.DELTAWEB_PUBLIC_SCHEMA = True
    client.logout()
    assert client.get("/api/schema/").status_code == 200


HEADERS = {
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
}


def _assert_security_headers(response) -> None:
    for name, value in HEADERS.items():
        assert response.get(name) == value, (name, response.get(name))
    csp = response["Content-Security-Policy"]
    script_src = next(d for d in csp.split(";") if d.strip().startswith("script-src"))
    assert script_src.strip() == "script-src 'self'" and "style-src 'self'" in csp  # no inline script
    assert "frame-ancestors 'none'" in csp


def test_security_headers_on_pages_api_and_errors(browser, api, table) -> None:
    r = browser.get("/t/sales/charts/")
    assert r.status_code == 200
    _assert_security_headers(r)
    html = r.content.decode()
    # the chart container is there, and every script is a file of ours (CSP: no inline script)
    assert 'id="chart-timeline"' in html and "/vendor/plotly.min.js" in html
    import re

    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), "inline script"
    assert not re.search(r"\sstyle=", html) and "<style" not in html
    _assert_security_headers(api.get(f"/api/tables/{table.pk}/"))
    _assert_security_headers(api.get("/api/nothing/"))
    _assert_security_headers(browser.get("/no/such/page/"))


@pytest.mark.parametrize("template", ["404.html", "403.html", "500.html", "registration/login.html"])
def test_error_and_login_pages_have_no_inline_script_or_style(template) -> None:
    import re

    from django.conf import settings as dj

    text = (dj.BASE_DIR / "templates" / template).read_text()
    assert "<style" not in text and not re.search(r"\sstyle=", text)
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", text)


# --- 4. a cut value always says so -------------------------------------------------------


def test_long_strings_from_the_log_are_cut_with_a_marker(api, browser, roots) -> None:
    import time

    from tests.web.ui_tables import add_action, write_raw_commit

    path = history_table(roots / "long")
    version = len(list((path / "_delta_log").glob("*.json")))
    info = {
        "timestamp": int(time.time() * 1000),
        "operation": "WRITE" + "W" * 300,
        "userMetadata": "m" * 25_000,
        "userName": "u" * 800,
        "operationParameters": {"predicate": "p" * 20_000, **{f"k{i}": i for i in range(1500)}},
    }
    write_raw_commit(path, version, info, [add_action(f"p=z/long-{version}.parquet", {"p": "z"}, 0)])
    t = registration.register_table("Long", str(path))
    sync.sync_table(t.pk)
    row = api.get(f"/api/tables/{t.pk}/history/", {"version_min": version}).json()["results"][0]
    assert row["userMetadata"].endswith("…[truncated, 25000 characters]")
    assert len(row["userMetadata"]) == 10_000 and row["userMetadata"].startswith("m" * 9000)
    assert row["userName"].endswith("…[truncated, 800 characters]") and len(row["userName"]) <= 500
    assert row["operation"].endswith("…[truncated, 305 characters]") and len(row["operation"]) <= 200
    params = row["operationParameters"]
    assert params["predicate"].endswith("…[truncated, 20000 characters]")
    assert params["…"] == "[truncated, 1501 entries]"
    # a value that fits is stored whole
    first = api.get(f"/api/tables/{t.pk}/history/", {"version_max": 0}).json()["results"][0]
    assert "truncated" not in str(first)
    # and the page shows the marker too
    r = browser.get(f"/t/{t.slug}/v/{version}/")
    assert r.status_code == 200 and "[truncated, 25000 characters]" in r.content.decode()


# --- 5. since/until: one rule on the page and in the API ---------------------------------


def test_since_and_until_mean_the_same_on_the_page_and_in_the_api(api, browser, table) -> None:
    from datetime import UTC, datetime

    from tables.models import Commit

    def ms(*args: int) -> int:
        return int(datetime(*args, tzinfo=UTC).timestamp() * 1000)

    # v0 and v1 at the first and last millisecond of 2024-03-01, v2 and v3 on 2024-03-02
    stamps = {0: ms(2024, 3, 1), 1: ms(2024, 3, 2) - 1, 2: ms(2024, 3, 2), 3: ms(2024, 3, 2, 12)}
    for v, t in stamps.items():
        Commit.objects.filter(table=table, version=v).update(timestamp=t)

    def via_api(**q) -> set[int]:
        r = api.get(f"/api/tables/{table.pk}/history/", q)
        assert r.status_code == 200, r.content
        return {row["version"] for row in r.json()["results"]}

    def via_page(**q) -> set[int]:
        cache.clear()
        r = browser.get("/t/sales/history/", q)
        assert r.status_code == 200
        return {row["version"] for row in r.context["rows"]}

    # a date alone is the whole UTC day, on both surfaces, for either end
    assert via_api(since="2024-03-01", until="2024-03-01") == via_page(date_from="2024-03-01", date_to="2024-03-01")
    assert via_api(since="2024-03-01", until="2024-03-01") == {0, 1}
    assert via_api(until="2024-03-01") == via_page(date_to="2024-03-01") == {0, 1}
    assert via_api(since="2024-03-02") == via_page(date_from="2024-03-02") == {2, 3}
    # a date-time is the instant (inclusive)
    assert via_api(until="2024-03-01T00:00:00Z") == {0}
    assert via_api(since="2024-03-01T23:59:59.999Z", until="2024-03-02 00:00:00") == {1, 2}
    assert via_api(since=str(stamps[3])) == {3}
    # a range that ends before it starts is refused, as a day range and as instants
    assert_error(
        api.get(f"/api/tables/{table.pk}/history/", {"since": "2024-03-02", "until": "2024-03-01"}),
        400,
        "invalid_range",
    )
    assert_error(api.get(f"/api/tables/{table.pk}/history/", {"until": "2024-02-30"}), 400, "invalid_timestamp")


# --- 6. no server paths in what a user reads ------------------------------------------------


def test_a_missing_version_names_the_table_not_its_location(api, browser, table) -> None:
    r = api.get(f"/api/tables/{table.pk}/versions/500/")
    err = assert_error(r, 404, "version_not_found")
    assert table.location not in err["message"] and str(table.location).rsplit("/", 1)[0] not in err["message"]
    r = browser.get("/t/sales/v/500/")
    html = r.content.decode()
    assert r.status_code == 404 and table.location not in html
    r = browser.get("/t/sales/diff/", {"from": 0, "to": 500})
    assert r.status_code == 404 and table.location not in r.content.decode()


def test_public_message_replaces_the_location_and_the_roots(table, settings) -> None:
    from tables.services.errors import public_message

    loc = table.location
    msg = f"{loc}: version 500 not found; see file://{loc}/_delta_log and {loc}/part-0.parquet"
    out = public_message(msg, table)
    assert out == "Sales: version 500 not found; see Sales/_delta_log and Sales/part-0.parquet"
    root = settings.DELTAWEB_ALLOWED_ROOTS[0]
    assert public_message(f"{root}/other/x.parquet is missing") == "other/x.parquet is missing"


def test_sync_and_job_errors_name_the_table(api, table) -> None:
    import shutil

    from tables.models import Job, JobKind
    from tables.services.jobs import lifecycle as jobs

    shutil.rmtree(f"{table.location}/_delta_log")
    job = sync.start_sync(table)
    sync.sync_table(table.pk, job.pk)
    job.refresh_from_db()
    table.refresh_from_db()
    assert job.status == "failed" and table.location not in job.error and table.location not in table.last_error
    body = api.get(f"/api/jobs/{job.pk}/").json()
    assert table.location not in body["error"]
    assert table.location not in api.get(f"/api/tables/{table.pk}/").json()["lastError"]
    other, _ = jobs.create_or_join(JobKind.SYNC, table)
    jobs.fail(other, f"cannot open {table.location}/_delta_log/00.json")
    assert Job.objects.get(pk=other.pk).error == "cannot open Sales/_delta_log/00.json"


class Py4JJavaError(Exception):
    """Stands in for py4j.protocol.Py4JJavaError (same name, as Spark raises it)."""


Py4JJavaError.__module__ = "py4j.protocol"


@pytest.mark.parametrize(
    ("java", "named"),
    [
        ("java.io.FileNotFoundException: File file:/srv/x/part-1.parquet does not exist", "missing"),
        ("org.apache.parquet.io.ParquetDecodingException: Can not read value at 0 in block -1", "not readable Parquet"),
        ("java.lang.OutOfMemoryError: Java heap space", "ran out of memory"),
        ("org.apache.spark.SparkException: Job 3 cancelled because SparkContext was shut down", "cancelled"),
        ("org.apache.spark.SparkException: Task failed while writing rows", "the Spark job failed"),
    ],
)
def test_spark_failures_are_named_and_the_detail_is_for_staff(api, table, django_user_model, java, named) -> None:
    from tables.models import Job, JobKind
    from tables.services.data import jobs as data_jobs

    job = Job.objects.create(kind=JobKind.PREVIEW, table=table, params={"version": 0})

    def compute(location, params, out_dir, progress):
        raise Py4JJavaError(
            f"An error occurred while calling o2546.parquet.\n: {java}\n\tat org.apache.Foo(Foo.java:1)"
        )

    data_jobs.run_job(job.pk, compute)
    job.refresh_from_db()
    assert job.status == "failed" and named in job.error and "o2546" not in job.error and "\n" not in job.error
    body = api.get(f"/api/jobs/{job.pk}/").json()
    assert body["error"] == job.error and "errorDetail" not in (body["result"] or {})
    staff = django_user_model.objects.create_user("boss", password="x", is_staff=True)
    c = APIClient()
    c.force_authenticate(staff)
    detail = c.get(f"/api/jobs/{job.pk}/").json()["result"]["errorDetail"]
    assert "o2546.parquet" in detail and "Py4JJavaError" in detail


# --- 7. what the schema says is what the API does ------------------------------------------


@pytest.fixture
def schema(api) -> dict:
    r = api.get("/api/schema/?format=json")
    assert r.status_code == 200
    return r.json()


def test_schema_nullability_bounds_and_errors(schema) -> None:
    comps, paths = schema["components"]["schemas"], schema["paths"]
    assert comps["Table"]["properties"]["createdBy"]["nullable"] is True
    assert comps["Job"]["properties"]["createdBy"]["nullable"] is True
    assert {"400", "401", "403"} <= set(paths["/api/tables/"]["get"]["responses"])
    assert {"400", "401", "429"} <= set(paths["/api/auth/token/"]["post"]["responses"])
    params = {p["name"]: p["schema"] for p in paths["/api/tables/"]["get"]["parameters"]}
    assert params["limit"]["minimum"] == 1 and params["offset"]["minimum"] == 0
    params = {p["name"]: p["schema"] for p in paths["/api/tables/{id}/versions/{version}/"]["get"]["parameters"]}
    assert params["version"]["minimum"] == 0 and params["version"]["maximum"] == 2**63 - 1
    assert params["id"]["minLength"] == 1
    params = {p["name"] for p in paths["/api/tables/{id}/reachability/"]["get"]["parameters"]}
    assert {"limit", "offset"} <= params
    for comp, field in [("RestoreCreate", "reason"), ("TableCreate", "name"), ("TableCreate", "location")]:
        assert comps[comp]["properties"][field]["minLength"] == 1, (comp, field)


def test_created_by_null_is_served_as_the_schema_says(api, table) -> None:
    assert table.created_by is None
    assert api.get(f"/api/tables/{table.pk}/").json()["createdBy"] is None


@pytest.mark.parametrize("reason", [0, 1.5, True, ["x"], {"a": 1}, ""])
def test_a_restore_reason_must_be_a_non_empty_string(api, table, reason) -> None:
    r = api.post(f"/api/tables/{table.pk}/restores/", {"version": 0, "reason": reason}, format="json")
    err = assert_error(r, 400, "invalid")
    assert "reason" in err["fields"]
    assert RestoreRequest.objects.count() == 0


@pytest.mark.parametrize("q", [{"limit": 0}, {"limit": -1}, {"offset": -1}, {"limit": "x"}, {"limit": 2**64}])
def test_bad_paging_is_a_400(api, table, q) -> None:
    assert_error(api.get("/api/tables/", q), 400, "invalid")


# --- malformed bodies -------------------------------------------------------------------------

UC = "/api/2.1/unity-catalog/delta"


def assert_uc_error(response, status: int) -> dict:
    assert response.status_code == status, response.content[:500]
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"type", "code", "message"}, body
    assert body["error"]["code"] == status and "Traceback" not in body["error"]["message"]
    return body["error"]


@pytest.fixture
def uc_client(analyst) -> APIClient:
    from tables.services.access.roles import WRITER
    from tests.web.pages.test_api import make_user

    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION="Bearer " + Token.objects.create(user=make_user("svc", group=WRITER)).key)
    return c


DEEP = "[" * 1200 + "]" * 1200  # about 2 KB


def test_deeply_nested_json_is_a_400_in_each_api_s_shape(api, uc_client, table) -> None:
    anonymous = APIClient()
    err = assert_error(anonymous.post("/api/auth/token/", DEEP, content_type="application/json"), 400, "parse_error")
    assert "nested more than 64 levels" in err["message"]
    assert_error(api.post(f"/api/tables/{table.pk}/restores/", DEEP, content_type="application/json"), 400)
    assert_error(api.post("/api/alerts/rules/", DEEP, content_type="application/json"), 400)
    deep_object = '{"a":' * 1200 + "1" + "}" * 1200
    err = assert_uc_error(uc_client.post(f"{UC}/preview/commits", deep_object, content_type="application/json"), 400)
    assert "nested" in err["message"]
    assert RestoreRequest.objects.count() == 0
    # nesting within the limit is still parsed (and refused for what it says, not how deep)
    ok = '{"version": 0, "reason": ' + "[" * 60 + "]" * 60 + "}"
    assert_error(api.post(f"/api/tables/{table.pk}/restores/", ok, content_type="application/json"), 400, "invalid")


def test_a_body_over_the_limit_is_a_413_in_each_shape(settings, api, uc_client, table, client) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100_000
    big = json.dumps({"version": 0, "reason": "x" * 200_000})
    err = assert_error(api.post(f"/api/tables/{table.pk}/restores/", big, content_type="application/json"), 413)
    assert err["code"] == "request_too_large" and "100,000 bytes" in err["message"]
    assert_error(APIClient().post("/api/auth/token/", big, content_type="application/json"), 413, "request_too_large")
    assert_uc_error(uc_client.post(f"{UC}/preview/commits", big, content_type="application/json"), 413)
    r = client.post("/accounts/login/", {"username": "ana", "password": "x" * 200_000})
    assert r.status_code == 413 and b"100,000 bytes" in r.content
    assert RestoreRequest.objects.count() == 0


def test_an_unexpected_catalog_error_answers_in_the_catalog_s_shape(uc_client, monkeypatch) -> None:
    from tables.services.owner import catalog as owner_uc

    def broken(*args, **kwargs):
        raise RuntimeError("secret detail")

    monkeypatch.setattr(owner_uc, "get_config", broken)
    err = assert_uc_error(uc_client.get(f"{UC}/v1/config", {"catalog": "main"}), 500)
    assert err["type"] == "InternalServerErrorException" and "secret detail" not in err["message"]


# --- one row per location -----------------------------------------------------------------


def test_every_spelling_of_a_registered_location_is_refused_with_a_link_to_it(api, browser, table, roots) -> None:
    root = roots / "sales"
    (roots / "link").symlink_to(root, target_is_directory=True)
    spellings = [
        str(root),
        str(root) + "/",
        "file://" + str(root),
        str(roots) + "/./sales",
        str(roots / "link"),
        str(roots / "link") + "/../sales/",
    ]
    for i, spelling in enumerate(spellings):
        r = api.post("/api/tables/", {"name": f"copy {i}", "location": spelling}, format="json")
        err = assert_error(r, 409, "duplicate_location")
        assert err["table"] == {"id": table.pk, "name": "Sales", "slug": "sales", "url": "/t/sales/"}, spelling
        assert "'Sales'" in err["message"] and str(root) not in err["message"]
    r = browser.post("/tables/register/", {"name": "again", "location": str(roots / "link")})
    assert r.status_code == 400 and 'href="/t/sales/"' in r.content.decode()
    assert Table.objects.count() == 1


# --- a log's strings echoed bounded -----------------------------------------------------------


def test_a_huge_path_from_the_log_comes_back_cut_and_marked(api, browser, roots) -> None:
    from tests.web.ui_tables import add_action, write_raw_commit

    path = history_table(roots / "huge")
    long_name = "p=a/" + "x" * 300_000 + ".parquet"
    info = {"timestamp": 1_700_000_000_000, "operation": "WRITE", "operationParameters": {}}
    write_raw_commit(path, 4, info, [add_action(long_name, {"p": "v" * 50_000}, 0)])
    t = registration.register_table("Huge", str(path), "")
    sync.sync_table(t.pk)
    marker = "…[truncated, 300012 characters]"
    for url in (
        f"/api/tables/{t.pk}/versions/4/files/",
        f"/api/tables/{t.pk}/diff/?from=3&to=4",
        f"/api/tables/{t.pk}/reachability/",
    ):
        r = api.get(url)
        assert r.status_code == 200, r.content[:300]
        assert len(r.content) < 60_000, (url, len(r.content))
        assert marker in r.content.decode(), url
    files = api.get(f"/api/tables/{t.pk}/versions/4/files/").json()["results"]
    huge = next(f for f in files if f["path"].startswith("p=a/xxx"))
    assert len(huge["path"]) == 4096 and huge["path"].endswith(marker)
    assert huge["partitionValues"]["p"].endswith("…[truncated, 50000 characters]")
    page = browser.get("/t/huge/v/4/")
    assert page.status_code == 200 and len(page.content) < 200_000 and marker in page.content.decode()


def test_a_lost_database_is_a_503_in_each_api_s_shape(api, uc_client, monkeypatch) -> None:
    """What a restarting database looks like to a view (tests/faults/ restarts a real one)."""
    from django.db import OperationalError

    from tables.api import tables as views
    from tables.services.owner import catalog as owner_uc

    def gone(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(views.TableViewSet, "get_queryset", gone)
    monkeypatch.setattr(owner_uc, "get_config", gone)
    r = api.get("/api/tables/")
    assert_error(r, 503, "database_unavailable")
    assert int(r["Retry-After"]) > 0
    r = uc_client.get(f"{UC}/v1/config", {"catalog": "main"})
    assert assert_uc_error(r, 503)["type"] == "InternalServerErrorException" and int(r["Retry-After"]) > 0
