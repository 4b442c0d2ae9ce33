"""Hardening: hostile input never ends in a 5xx, errors are named and actionable, and the
security defaults (JSON under /api/, throttled sign-in, private schema, security headers,
no server paths in messages) hold for what a user actually sees.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.contrib.auth.models import Group
from django.core.cache import cache
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tables import registration, roles, sync
from tables.models import RestoreRequest, Table
from tests.web.ui_tables import history_table

pytest.importorskip("deltalake")

pytestmark = pytest.mark.django_db


# --- fixtures --------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _clear_cache():
    # throttles and login counters live in the cache: every test starts with none
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def roots(settings, tmp_path):
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    return tmp_path


@pytest.fixture
def analyst(django_user_model):
    user = django_user_model.objects.create_user("ana", password="secret-pass-1")
    user.groups.add(Group.objects.get_or_create(name=roles.ANALYST)[0])
    return user


@pytest.fixture
def browser(client, analyst):
    client.force_login(analyst)
    return client


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
    r = browser.get("/t/sales/", {"as_of": raw})
    # the table page itself, answered 400, with the time-travel form saying what is wrong
    assert r.status_code == 400
    assert r.context["tt_result"] is None and r.context["tt_error"]
    html = r.content.decode()
    assert "Traceback" not in html and 'id="history' in html


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
