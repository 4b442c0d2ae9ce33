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
from tables.services import data_jobs, versions

from .test_api import assert_error, make_user, token_client
from .test_confinement import assert_refused, hostile, place, was_read  # noqa: F401  (fixtures)
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
    job = start(reader, django_capture_on_commit_callbacks, hostile_table, {"key": {"id": "1"}, "from": 0, "to": 1})
    assert job.status == JobStatus.FAILED
    assert_refused(job.error, place)
    assert not was_read(place["secret"])


def test_the_service_keeps_the_key_canonical(table) -> None:  # noqa: F811
    a = data_jobs.start_row_history(table, {"name": "c", "id": "3"}, 0, 3)
    b = data_jobs.start_row_history(table, {"id": "03", "name": "c"}, 0, 3)
    assert a.pk == b.pk and a.params == {"key": {"id": "3", "name": "c"}, "from": 0, "to": 3}
    keep = data_jobs.start_row_history(table, {"name": " c "}, 0, 3)
    assert keep.params["key"] == {"name": " c "}  # a string key is taken as it is
