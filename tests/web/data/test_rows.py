"""Data on Spark through the API and the UI: previews, change data and keyed row diffs.

The Celery app runs eagerly (the task runs when the request's transaction commits) on a real
local Spark session, shared by the module; the tables are tiny and written by delta-rs, and
the answers are compared with delta-rs itself (`to_pyarrow_table()` for a version,
`load_cdf` for change data).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from tables.models import Job, JobStatus, Table
from tables.services.catalog import registration
from tables.services.data import jobs as data_jobs
from tables.services.sync import store as sync
from tables.services.versions import read as versions
from tests.spark.conftest import java_executable

from ..pages.test_api import assert_error, make_user, token_client

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def spark():
    if java_executable() is None:
        pytest.skip("Java is not installed (PySpark needs a JVM; set JAVA_HOME or put java on PATH)")
    pytest.importorskip("pyspark", reason="PySpark is not installed")
    from django.conf import settings

    from tables.spark.session import get_spark

    # the session the worker's task will get (same master): started once for the module
    return get_spark(settings.SPARK_MASTER)


@pytest.fixture
def eager(spark, settings, tmp_path):
    from deltaweb.celery import app

    settings.DELTAWEB_RESULTS_DIR = str(tmp_path / "results")
    old = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = old


def write_cdf_table(path: Path) -> Path:
    """v0 ids 1..5, v1 append 6..7, v2 delete id 2, v3 update id 3; change data feed on."""
    data = pa.table({"id": pa.array([1, 2, 3, 4, 5], pa.int64()), "name": ["a", "b", "c", "d", "e"]})
    write_deltalake(str(path), data, configuration={"delta.enableChangeDataFeed": "true"})
    write_deltalake(str(path), pa.table({"id": pa.array([6, 7], pa.int64()), "name": ["f", "g"]}), mode="append")
    dt = DeltaTable(str(path))
    dt.delete("id = 2")
    dt.update(updates={"name": "'C'"}, predicate="id = 3")
    return path


@pytest.fixture
def table(tmp_path, settings) -> Table:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = write_cdf_table(tmp_path / "people")
    return registration.register_table("people", str(path))


@pytest.fixture
def api() -> APIClient:
    return token_client(make_user("reader"))


def run(client, capture, method: str, url: str):
    """One request; the jobs it enqueues on commit run (eagerly) before this returns."""
    with capture(execute=True):
        r = getattr(client, method)(url)
    return r


def rows_multiset(rows: list[dict]) -> Counter:
    return Counter(tuple(sorted(r.items())) for r in rows)


def test_preview_equals_delta_rs_and_is_cached(eager, table, api, django_capture_on_commit_callbacks) -> None:
    url = f"/api/tables/{table.pk}/versions/1/rows/"
    r = run(api, django_capture_on_commit_callbacks, "post", url)
    assert r.status_code == 202, r.content
    job = Job.objects.get(pk=r.json()["id"])
    assert job.kind == "preview" and job.status == JobStatus.SUCCEEDED, job.error
    assert job.stage == "done" and job.done == job.total == 3

    r = api.get(url)
    assert r.status_code == 200, r.content
    body = r.json()
    expected = DeltaTable(table.location, version=1).to_pyarrow_table().to_pylist()
    assert body["total"] == len(expected) == 7 and body["job"] == job.pk and body["version"] == 1
    assert [c["name"] for c in body["columns"]] == ["id", "name"]
    assert rows_multiset(body["rows"]) == rows_multiset(expected)

    # paging the cached rows; no new job for the same (table, version)
    jobs = Job.objects.count()
    page = api.get(url + "?offset=5&limit=5").json()
    assert page["offset"] == 5 and page["limit"] == 5 and page["rows"] == body["rows"][5:7]
    assert data_jobs.start_preview(table, 1).pk == job.pk
    assert Job.objects.count() == jobs
    assert_error(api.get(url + "?limit=0"), 400, "invalid")
    assert_error(api.get(f"/api/tables/{table.pk}/versions/9/rows/"), 404, "version_not_found")
    assert Job.objects.count() == jobs


def test_change_data_equals_delta_rs_load_cdf(eager, table, api, django_capture_on_commit_callbacks) -> None:
    r = run(api, django_capture_on_commit_callbacks, "post", f"/api/tables/{table.pk}/changes/?from=0&to=3")
    assert r.status_code == 202, r.content
    job = Job.objects.get(pk=r.json()["id"])
    assert job.kind == "changes" and job.status == JobStatus.SUCCEEDED, job.error

    cdf = pa.table(DeltaTable(table.location).load_cdf(starting_version=0, ending_version=3).read_all())
    want = Counter(zip(cdf.column("_commit_version").to_pylist(), cdf.column("_change_type").to_pylist(), strict=True))
    body = api.get(f"/api/jobs/{job.pk}/results/?limit=1000").json()
    assert body["total"] == cdf.num_rows
    got = Counter({(c["version"], c["changeType"]): c["rows"] for c in body["counts"]})
    assert got == want
    delta_rows = rows_multiset(cdf.select(["id", "name", "_change_type", "_commit_version"]).to_pylist())
    keep = ("id", "name", "_change_type", "_commit_version")
    assert rows_multiset([{k: row[k] for k in keep} for row in body["rows"]]) == delta_rows

    # paging: consecutive pages put together are the whole result, in its order
    pages = [api.get(f"/api/jobs/{job.pk}/results/?offset={o}&limit=3").json() for o in range(0, body["total"], 3)]
    assert [row for p in pages for row in p["rows"]] == body["rows"]
    assert all(p["total"] == body["total"] and p["counts"] == body["counts"] for p in pages)
    assert api.get(f"/api/jobs/{job.pk}/results/?offset=1000").json()["rows"] == []


def test_keyed_row_diff_counts(eager, table, api, django_capture_on_commit_callbacks) -> None:
    r = run(api, django_capture_on_commit_callbacks, "post", f"/api/tables/{table.pk}/diff/rows/?from=0&to=3&keys=id")
    assert r.status_code == 202, r.content
    job = Job.objects.get(pk=r.json()["id"])
    assert job.kind == "rowdiff" and job.status == JobStatus.SUCCEEDED, job.error
    assert job.result["counts"] == {"added": 2, "removed": 1, "changed": 1}
    body = api.get(f"/api/jobs/{job.pk}/results/?limit=2").json()
    assert body["total"] == 4 and len(body["rows"]) == 2 and body["counts"] == job.result["counts"]
    rest = api.get(f"/api/jobs/{job.pk}/results/?offset=2&limit=2").json()["rows"]
    by_id = {row["id"]: row for row in body["rows"] + rest}
    assert {k: v["_diff"] for k, v in by_id.items()} == {2: "removed", 3: "changed", 6: "added", 7: "added"}
    assert by_id[3]["_changed_columns"] == ["name"] and by_id[3]["_after"] == {"name": "C"}


def test_a_failed_job_says_why_in_one_line(eager, table, api, django_capture_on_commit_callbacks) -> None:
    # duplicate keys are found by the Spark job: the job fails with the message
    write_deltalake(table.location, pa.table({"id": pa.array([1], pa.int64()), "name": ["again"]}), mode="append")
    versions.snapshot_at(table, 4)
    r = run(api, django_capture_on_commit_callbacks, "post", f"/api/tables/{table.pk}/diff/rows/?from=3&to=4&keys=id")
    job = Job.objects.get(pk=r.json()["id"])
    assert job.status == JobStatus.FAILED and "not unique in version 4" in job.error and "\n" not in job.error
    assert_error(api.get(f"/api/jobs/{job.pk}/results/"), 409, "job_failed")


def test_bad_input_creates_no_job(table, api) -> None:
    before = Job.objects.count()
    base = f"/api/tables/{table.pk}"
    assert_error(api.post(f"{base}/changes/?from=3&to=1"), 400, "invalid_range")
    assert_error(api.post(f"{base}/changes/?from=0"), 400, "invalid")
    assert_error(api.post(f"{base}/changes/?from=0&to=99"), 404, "version_not_found")
    assert_error(api.post(f"{base}/diff/rows/?from=3&to=1&keys=id"), 400, "invalid_range")
    assert "nope" in assert_error(api.post(f"{base}/diff/rows/?from=0&to=3&keys=id,nope"), 400, "invalid_keys")
    assert_error(api.post(f"{base}/diff/rows/?from=0&to=3&keys=,"), 400, "invalid_keys")
    assert_error(api.post(f"{base}/diff/rows/?from=0&to=3"), 400, "invalid")
    assert_error(api.get(f"{base}/versions/x/rows/"), 400, "invalid")
    assert Job.objects.count() == before
    sync_job = sync.start_sync(table)
    assert_error(api.get(f"/api/jobs/{sync_job.pk}/results/"), 404, "no_results")
    queued = data_jobs.start_changes(table, 0, 1)
    assert_error(api.get(f"/api/jobs/{queued.pk}/results/"), 409, "not_ready")


def test_sign_in_required(table, client) -> None:
    anon = APIClient()
    base = f"/api/tables/{table.pk}"
    for method, url in [
        ("get", f"{base}/versions/0/rows/"),
        ("post", f"{base}/changes/?from=0&to=1"),
        ("post", f"{base}/versions/0/rows/"),
        ("post", f"{base}/diff/rows/?from=0&to=1&keys=id"),
        ("get", "/api/jobs/1/results/"),
    ]:
        assert_error(getattr(anon, method)(url), 401, "not_authenticated")
    assert Job.objects.count() == 0
    r = client.get(f"/t/{table.slug}/v/1/")
    assert r.status_code == 302 and "login" in r["Location"]


def test_ui_preview_and_row_diff(eager, table, client, django_capture_on_commit_callbacks) -> None:
    user: User = make_user("viewer")
    client.force_login(user)
    page = client.get(f"/t/{table.slug}/v/1/")
    assert page.status_code == 200 and b'id="rows"' in page.content and b"Preview rows" in page.content
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(f"/t/{table.slug}/v/1/preview/")
    assert r.status_code == 302
    page = client.get(r["Location"])
    html = page.content.decode()
    assert "7 rows" in html and "<td" in html and "&lt;" not in html
    for name in "abcdefg":
        assert f">{name}<" in html

    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(f"/t/{table.slug}/diff/rows/", {"from": 0, "to": 3, "keys": "id", "kind": "rowdiff"})
    assert r.status_code == 302 and "rowjob=" in r["Location"]
    diff_url = r["Location"]
    html = client.get(diff_url).content.decode()
    assert 'id="row-counts"' in html and "added" in html and "changed" in html
    # side by side: a changed row shows the columns that differ, before and after
    assert 'class="grid compact side-by-side"' in html and "Before (version 0)" in html
    assert '<tbody class="diff-changed">' in html and 'class="cell-after"' in html
    job = Job.objects.filter(kind="rowdiff").latest("pk")
    for kind in ("added", "removed", "changed"):
        page = client.get(diff_url.replace("#rows", f"&change={kind}"))
        pairs = page.context["rows_pairs"]
        assert len(pairs) == min(job.result["counts"][kind], 25) and {p["kind"] for p in pairs} <= {kind}

    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(f"/t/{table.slug}/diff/rows/", {"from": 0, "to": 3, "kind": "changes"})
    html = client.get(r["Location"]).content.decode()
    assert 'id="row-counts"' in html and "update_postimage" in html

    before = Job.objects.count()
    r = client.post(f"/t/{table.slug}/diff/rows/", {"from": 0, "to": 3, "keys": "nope", "kind": "rowdiff"})
    assert r.status_code == 302 and Job.objects.count() == before  # back to the form, not an error page
    html = client.get(r["Location"]).content.decode()
    assert 'id="row-keys-error"' in html and "nope" in html and 'aria-invalid="true"' in html
    assert 'value="nope"' in html and '<option value="id">' in html  # what was typed, and the columns


def test_long_values_are_escaped_and_truncated(eager, tmp_path, settings, client, django_capture_on_commit_callbacks):
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = tmp_path / "html"
    write_deltalake(str(path), pa.table({"id": pa.array([1], pa.int64()), "v": ["<script>x</script>" + "y" * 500]}))
    table = registration.register_table("html", str(path))
    client.force_login(make_user("viewer"))
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/t/{table.slug}/v/0/preview/")
    html = client.get(f"/t/{table.slug}/v/0/").content.decode()
    assert "<script>x" not in html and "&lt;script&gt;x" in html
    # the cell shows the first characters; the whole value (escaped) is only in its title
    assert "…</td>" in html and html.count("y" * 500) == 1 and 'title="&lt;script&gt;' in html
    assert os.path.isdir(settings.DELTAWEB_RESULTS_DIR)


@pytest.mark.django_db(transaction=True)
def test_the_form_that_starts_a_job_waits_a_moment_for_it(spark, table, client, settings, tmp_path, monkeypatch):
    """The view that starts a preview waits (up to DELTAWEB_JOB_SETTLE_SECONDS) for its job to
    end, so the page it sends the user to shows the rows at once, not a progress box: here the
    job runs in a thread of this process, as a worker would run it, while the view waits."""
    import threading

    from django.db import connection

    from deltaweb.celery import app
    from tables.services.jobs import lifecycle as jobs

    settings.DELTAWEB_RESULTS_DIR = str(tmp_path / "results")
    settings.DELTAWEB_JOB_SETTLE_SECONDS = 300
    sync.sync_table(table.pk)
    app.loader.import_default_modules()
    threads = []

    def worker(name: str, args: tuple) -> None:
        try:
            app.tasks[name](*args)
        finally:
            connection.close()  # the thread's own connection

    def send(name: str, *args, **_kw) -> None:  # the message goes to a thread instead of a broker
        threads.append(threading.Thread(target=worker, args=(name, args)))
        threads[-1].start()

    monkeypatch.setattr(jobs, "send", send)
    client.force_login(make_user("viewer"))
    r = client.post(f"/t/{table.slug}/v/1/preview/")
    assert r.status_code == 302 and threads
    assert Job.objects.get(kind="preview").status == JobStatus.SUCCEEDED  # ended before the answer
    html = client.get(r["Location"]).content.decode()
    assert 'id="rows-table"' in html and 'id="job-progress"' not in html and "7 rows" in html
    for t in threads:
        t.join(60)
