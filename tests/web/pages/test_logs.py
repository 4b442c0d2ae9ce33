"""Structured logs: the request id given (or made) comes back in X-Request-ID and is on every
JSON line the request writes, with the user and the table; it travels with the task the
request sends, so the real Celery worker's JSON lines name it too, with the job."""

from __future__ import annotations

import io
import json
import logging
import time

import pytest

from deltaweb.logs import JsonFormatter
from tables.models import Job, JobStatus
from tables.services.catalog.registration import register_table
from tests.web.sync.test_probe import small_table

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_request_id_is_kept_or_made_and_sent_back(client) -> None:
    given = client.get("/healthz", HTTP_X_REQUEST_ID="req-abcdef12")
    assert given["X-Request-ID"] == "req-abcdef12"
    made = client.get("/healthz", HTTP_X_REQUEST_ID="bad id\n with spaces")
    assert made["X-Request-ID"] != "bad id\n with spaces" and len(made["X-Request-ID"]) == 32


def test_a_requests_lines_carry_its_id_user_and_table(browser, roots, eager_celery) -> None:
    from deltaweb.celery import app

    app.loader.import_default_modules()  # first: loading the task modules sets logging up again
    table = register_table("events", str(small_table(roots / "events", 2)))
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    logging.getLogger("tables").addHandler(handler)
    try:
        browser.post(f"/t/{table.slug}/sync/", HTTP_X_REQUEST_ID="req-sync-0001")
    finally:
        logging.getLogger("tables").removeHandler(handler)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    synced = next(line for line in lines if line["message"].startswith("synced table events"))
    assert synced["request_id"] == "req-sync-0001" and synced["user"] == "ana" and synced["table"] == table.slug
    assert synced["level"] == "INFO" and synced["logger"] == "tables.sync" and synced["time"].endswith("Z")


def test_the_worker_names_the_request_that_sent_its_task(browser, roots, celery_worker_factory, tmp_path) -> None:
    celery_worker_factory("json", {"DELTAWEB_LOG_FORMAT": "json"})
    table = register_table("orders", str(small_table(roots / "orders", 2)))
    browser.post(f"/t/{table.slug}/sync/", HTTP_X_REQUEST_ID="req-from-web-42")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not Job.objects.filter(table=table, status=JobStatus.SUCCEEDED).exists():
        time.sleep(0.3)
    job = Job.objects.get(table=table)
    assert job.status == JobStatus.SUCCEEDED
    time.sleep(0.5)  # the line after the job's row
    lines = []
    for raw in (tmp_path / "json.log").read_text().splitlines():
        try:
            lines.append(json.loads(raw))
        except ValueError:
            continue  # Celery's banner is not a log record
    synced = [line for line in lines if line.get("message", "").startswith("synced table orders")]
    assert synced, (tmp_path / "json.log").read_text()[-2000:]
    assert synced[0]["request_id"] == "req-from-web-42" and synced[0]["job"] == f"tables.sync_table:{job.pk}"


def test_every_web_line_of_a_request_carries_its_id_and_each_request_has_an_access_line(browser, roots) -> None:
    """A request with X-Request-ID: its access line (method, path, status, duration, user) and
    Django's own `Not Found` line, written after the middleware is done, both name it."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        browser.get("/api/tables/999/", HTTP_X_REQUEST_ID="req-missing-0042")
        browser.get("/", HTTP_X_REQUEST_ID="req-list-00043")
    finally:
        root.removeHandler(handler)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    mine = [line for line in lines if line.get("request_id") == "req-missing-0042"]
    assert {line["logger"] for line in mine} >= {"django.request", "deltaweb.access"}, lines
    access = next(line for line in mine if line["logger"] == "deltaweb.access")
    assert access["http"]["status"] == 404 and access["http"]["path"] == "/api/tables/999/"
    assert access["http"]["method"] == "GET" and access["http"]["ms"] >= 0 and access["user"] == "ana"
    listed = [line for line in lines if line.get("request_id") == "req-list-00043"]
    assert [line["http"]["status"] for line in listed if line["logger"] == "deltaweb.access"] == [200]
    assert all("request_id" in line for line in lines), [line for line in lines if "request_id" not in line]
