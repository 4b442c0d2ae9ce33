"""One row's history through the API and the UI, run as a job on a real local Spark session.

The Celery app runs eagerly (the task runs when the request's transaction commits), as in
test_rows.py. The job's events are compared with the core's `row_history` (itself checked
against delta-rs in tests/core/test_row_history.py); bad requests create no job; a log path
outside the allowed roots is refused before Spark opens anything; the pages show the events
(escaped) and the preview links each row to its history.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from rest_framework.test import APIClient

from tables.delta.history.row_history import row_history
from tables.models import Job, JobStatus
from tables.services.data import jobs as data_jobs
from tables.services.versions import read as versions

from ..access.test_confinement import assert_refused, hostile, place, was_read  # noqa: F401  (fixtures)
from ..pages.test_api import assert_error, make_user, token_client
from .test_rows import api, eager, spark, table  # noqa: F401  (fixtures)

deltalake = pytest.importorskip("deltalake")
from deltalake import write_deltalake  # noqa: E402

pytestmark = pytest.mark.django_db


def post(client: APIClient, target, body: dict):
    return client.post(f"/api/tables/{target.pk}/row-history/", body, format="json")


def start(client: APIClient, capture, target, body: dict) -> Job:
    """POST a row history; its job runs (eagerly) before this returns."""
    with capture(execute=True):
        r = post(client, target, body)
    assert r.status_code == 202, r.content
    assert r["Location"].endswith(f"/api/jobs/{r.json()['id']}/")
    return Job.objects.get(pk=r.json()["id"])


def test_the_jobs_events_are_the_cores_newest_first(eager, table, api, django_capture_on_commit_callbacks) -> None:  # noqa: F811
    job = start(api, django_capture_on_commit_callbacks, table, {"key": {"id": "3"}, "from": 0, "to": 3})
    assert job.kind == "rowhistory" and job.status == JobStatus.SUCCEEDED, job.error
    assert job.stage == "done" and job.done == job.total == 3
    core = row_history(table.location, {"id": "3"}, 0, 3)
    body = api.get(f"/api/jobs/{job.pk}/results/").json()
    assert body["kind"] == "rowhistory" and body["key"] == {"id": 3} and (body["from"], body["to"]) == (0, 3)
    assert body["files"] == {"read": core.files_read, "skipped": core.files_skipped}
    assert body["counts"] == {"insert": 1, "update": 1, "delete": 0} and body["total"] == 2
    want = [e.to_dict() for e in reversed(core.events)]
    got = [
        {**r, "before": r["before"] and json.loads(r["before"]), "after": r["after"] and json.loads(r["after"])}
        for r in body["rows"]
    ]
    assert got == want
    assert [r["version"] for r in got] == [3, 0] and got[0]["changed"] == ["name"]
    assert got[0]["before"] == {"id": 3, "name": "c"} and got[0]["after"] == {"id": 3, "name": "C"}

    # the same key (spelled otherwise) and range: the finished job is reused, nothing new runs
    jobs = Job.objects.count()
    r = post(api, table, {"key": {"id": "+03"}, "from": 0, "to": 3})
    assert r.status_code == 202 and r.json()["id"] == job.pk and Job.objects.count() == jobs

    # a deleted row, over another range
    deleted = start(api, django_capture_on_commit_callbacks, table, {"key": {"id": "2"}, "from": 1, "to": 3})
    rows = api.get(f"/api/jobs/{deleted.pk}/results/").json()["rows"]
    assert [(r["version"], r["change"]) for r in rows] == [(2, "delete"), (1, "insert")]
    assert rows[0]["after"] is None and json.loads(rows[0]["before"]) == {"id": 2, "name": "b"}


def test_a_key_more_than_one_row_has_fails_the_job_in_one_line(
    eager,  # noqa: F811
    table,  # noqa: F811
    api,  # noqa: F811
    django_capture_on_commit_callbacks,
) -> None:
    write_deltalake(table.location, pa.table({"id": pa.array([1], pa.int64()), "name": ["again"]}), mode="append")
    versions.snapshot_at(table, 4)
    job = start(api, django_capture_on_commit_callbacks, table, {"key": {"id": "1"}, "from": 0, "to": 4})
    assert job.status == JobStatus.FAILED and "not unique" in job.error and "version 4" in job.error
    assert "\n" not in job.error and table.location not in job.error
    assert_error(api.get(f"/api/jobs/{job.pk}/results/"), 409, "job_failed")


@pytest.mark.parametrize(
    ("body", "status", "code", "words"),
    [
        ({"key": {"id": "1"}, "from": 3, "to": 1}, 400, "invalid_range", "must not be after"),
        ({"key": {"id": "1"}, "from": 0, "to": 99}, 404, "version_not_found", "to"),
        ({"key": {"id": "1"}, "from": 0}, 400, "invalid", "to"),
        ({"key": {}, "from": 0, "to": 3}, 400, "invalid", "key"),
        ({"key": "id=1", "from": 0, "to": 3}, 400, "invalid", "key"),
        ({"key": {"id": {"a": 1}}, "from": 0, "to": 3}, 400, "invalid", "key"),
        ({"key": {"nope": "1"}, "from": 0, "to": 3}, 400, "invalid_keys", "'nope' is not a column"),
        ({"key": {"id": "one"}, "from": 0, "to": 3}, 400, "invalid_keys", "not a valid long"),
        ({"key": {"id": "1", "name": "x" * 1001}, "from": 0, "to": 3}, 400, "invalid", "key"),
        ({"key": {f"c{i}": "1" for i in range(33)}, "from": 0, "to": 3}, 400, "invalid_keys", "At most 32"),
        ({"key": {"id": "1"}, "from": -1, "to": 3}, 400, "invalid", "from"),
    ],
)
def test_bad_requests_create_no_job(table, api, body: dict, status: int, code: str, words: str) -> None:  # noqa: F811
    before = Job.objects.count()
    message = assert_error(post(api, table, body), status, code)
    assert words in message or words in json.dumps(post(api, table, body).json())
    assert Job.objects.count() == before


def test_invalid_keys_name_the_column(table, api) -> None:  # noqa: F811
    body = post(api, table, {"key": {"id": "1", "nope": "2"}, "from": 0, "to": 3}).json()["error"]
    assert body["code"] == "invalid_keys" and body["columns"] == ["nope"]


def test_sign_in_required(table) -> None:  # noqa: F811
    r = APIClient().post(
        f"/api/tables/{table.pk}/row-history/", {"key": {"id": "1"}, "from": 0, "to": 1}, format="json"
    )
    assert_error(r, 401, "not_authenticated")
    assert Job.objects.count() == 0
    unknown = token_client(make_user("r")).post("/api/tables/999999/row-history/", {"key": {"id": "1"}}, format="json")
    assert_error(unknown, 404)


def test_a_log_path_outside_the_roots_is_refused_before_spark_reads_it(
    eager,  # noqa: F811
    hostile,  # noqa: F811
    place,  # noqa: F811
    django_capture_on_commit_callbacks,
) -> None:
    hostile_table, _path, _before = hostile
    reader = token_client(make_user("reader"))
    with django_capture_on_commit_callbacks(execute=True):
        r = post(reader, hostile_table, {"key": {"id": "1"}, "from": 0, "to": 1})
    # refused before any job exists: the version's file cannot be opened where its log names it
    assert_error(r, 422, "version_unreadable")
    assert "1 data file its log names cannot be opened" in r.json()["error"]["message"]
    assert str(place["secret"]) not in r.content.decode()
    assert not Job.objects.filter(table=hostile_table, kind="rowhistory").exists()
    assert not was_read(place["secret"])


def test_the_service_keeps_the_key_canonical(table) -> None:  # noqa: F811
    a = data_jobs.start_row_history(table, {"name": "c", "id": "3"}, 0, 3)
    b = data_jobs.start_row_history(table, {"id": "03", "name": "c"}, 0, 3)
    assert a.pk == b.pk and a.params == {"key": {"id": "3", "name": "c"}, "from": 0, "to": 3}
    keep = data_jobs.start_row_history(table, {"name": " c "}, 0, 3)
    assert keep.params["key"] == {"name": " c "}  # a string key is taken as it is


# --- the pages ---------------------------------------------------------------------------------


def test_the_preview_links_each_row_to_its_history(eager, table, client, django_capture_on_commit_callbacks) -> None:  # noqa: F811
    client.force_login(make_user("viewer"))
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(f"/t/{table.slug}/v/3/preview/")
    preview = r["Location"]
    html = client.get(preview).content.decode()
    # a column named id: the key by default, every row linked to its history
    assert 'id="history-keys"' in html and '<input type="checkbox" name="hkey" value="id" checked>' in html
    assert html.count('class="row-history"') == 6  # id 2 was deleted at version 2
    assert f'href="/t/{table.slug}/row/?k.id=3&amp;to=3"' in html
    assert 'aria-label="history of this row: id=3"' in html

    # the reader's choice of key columns, kept across the page's links; none chosen: asked
    chosen = client.get(preview.replace("#rows", "") + "&hkeys=1&hkey=id&hkey=name").content.decode()
    assert f'href="/t/{table.slug}/row/?k.id=3&amp;k.name=C&amp;to=3"' in chosen
    none = client.get(preview.replace("#rows", "") + "&hkeys=1").content.decode()
    assert 'id="history-keys-ask"' in none and 'class="row-history"' not in none


def test_the_page_shows_the_events_newest_first(eager, table, client, django_capture_on_commit_callbacks) -> None:  # noqa: F811
    client.force_login(make_user("viewer"))
    form = client.get(f"/t/{table.slug}/row/?k.id=3&to=3").content.decode()
    assert 'name="k.id" value="3"' in form and 'id="row-from"' in form and 'value="0"' in form
    assert 'id="row-history-start"' in form and "autofocus" in form
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(f"/t/{table.slug}/row/start/", {"k.id": "3", "from": "0", "to": "3"})
    assert r.status_code == 302 and "job=" in r["Location"] and r["Location"].endswith("#events")
    page = client.get(r["Location"])
    html = page.content.decode()
    assert page.status_code == 200 and 'id="events-summary"' in html and "2 events in versions 0–3" in html
    assert html.index('id="event-3"') < html.index('id="event-0"')  # newest first
    update = html[html.index('id="event-3"') : html.index('id="event-0"')]
    assert '<span class="badge change-changed">update</span>' in update and "changed: <code>name</code>" in update
    assert 'class="cell-before">c</td>' in update and 'class="cell-after">C</td>' in update
    assert "Unchanged columns (1)" in update and "user not recorded" in update
    insert = html[html.index('id="event-0"') :]
    assert '<span class="badge change-added">insert</span>' in insert and "≠" not in insert
    assert "data file" in html and "skipped by partition values and statistics" in html
    # the job's page again: the same job, nothing new
    jobs = Job.objects.count()
    with django_capture_on_commit_callbacks(execute=True):
        again = client.post(f"/t/{table.slug}/row/start/", {"k.id": "3", "from": "0", "to": "3"})
    assert Job.objects.count() == jobs and again["Location"] == r["Location"]


def test_a_key_the_form_can_fix_is_said_next_to_it(table, client) -> None:  # noqa: F811
    client.force_login(make_user("viewer"))
    for post, words in [
        ({"k.nope": "1", "from": "0", "to": "3"}, "is not a column"),
        ({"k.id": "x", "from": "0", "to": "3"}, "not a valid long"),
        ({"k.id": "1", "from": "3", "to": "1"}, "must not be after"),
        ({"k.id": "", "from": "0", "to": "3"}, "at least one key column"),
        ({"k.id": "1", "from": "0", "to": "99"}, "version"),
    ]:
        r = client.post(f"/t/{table.slug}/row/start/", post)
        assert r.status_code == 302 and r["Location"].endswith("#key-form"), post
        html = client.get(r["Location"]).content.decode()
        assert 'id="key-form-error"' in html and words in html, (post, words)
    assert Job.objects.count() == 0


def test_values_are_escaped_and_a_table_without_an_id_asks(
    eager,  # noqa: F811
    tmp_path,
    settings,
    client,
    django_capture_on_commit_callbacks,
) -> None:
    from deltalake import DeltaTable

    from tables.services.catalog import registration

    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = tmp_path / "html"
    write_deltalake(str(path), pa.table({"code": ["<b>a</b>", "b"], "v": ["x", "y"]}))
    DeltaTable(str(path)).update(updates={"v": "'<script>alert(1)</script>'"}, predicate="code = 'b'")
    html_table = registration.register_table("html", str(path))
    client.force_login(make_user("viewer"))
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(f"/t/{html_table.slug}/v/1/preview/")
    preview = client.get(r["Location"]).content.decode()
    assert 'id="history-keys-ask"' in preview and 'class="row-history"' not in preview  # no id or key column
    chosen = client.get(r["Location"].replace("#rows", "") + "&hkeys=1&hkey=code").content.decode()
    assert "k.code=%3Cb%3Ea%3C%2Fb%3E" in chosen and "<b>a</b>" not in chosen
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(f"/t/{html_table.slug}/row/start/", {"k.code": "b", "from": "0", "to": "1"})
    html = client.get(r["Location"]).content.decode()
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    add = client.get(f"/t/{html_table.slug}/row/?to=1").content.decode()
    assert 'id="key-ask"' in add and '<option value="code">' in add and 'id="row-history-start" disabled' in add
