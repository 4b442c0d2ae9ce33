"""A data job's page of rows answers its keys in one order, the one clients have always read,
for every kind: a version's preview (and its cached page), change data, a keyed row diff, a
row's history and a SQL query. Each job runs on the real local Spark session of test_rows.py
(eagerly, when its request commits) on the same small table written by delta-rs."""

from __future__ import annotations

import pytest

from tables.models import Job, JobKind, JobStatus
from tables.services.sync import store as sync

from .test_rows import api, eager, spark, table  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db

PAGE = ["job", "kind", "columns", "rows", "total", "offset", "limit"]
KEYS = {
    JobKind.PREVIEW: [*PAGE, "version", "cached"],
    JobKind.CHANGES: [*PAGE, "counts", "versions", "start", "end"],
    JobKind.ROWDIFF: [*PAGE, "counts", "compared", "keys", "from", "to"],
    JobKind.ROWHISTORY: [*PAGE, "counts", "key", "files", "from", "to"],
    JobKind.QUERY: PAGE,
}
PREVIEW_PAGE = ["job", "columns", "rows", "total", "offset", "limit", "cached", "version", "reused"]


def test_each_kinds_page_answers_its_keys_in_one_order(eager, table, api, django_capture_on_commit_callbacks) -> None:  # noqa: F811
    assert sorted(KEYS) == sorted(JobKind.data_kinds())  # every kind is pinned
    sync.sync_table(table.pk)  # a query reads the latest synced version
    base = f"/api/tables/{table.pk}"
    with django_capture_on_commit_callbacks(execute=True):
        started = [
            api.post(f"{base}/versions/1/rows/"),
            api.post(f"{base}/changes/?from=0&to=3"),
            api.post(f"{base}/diff/rows/?from=0&to=3&keys=id"),
            api.post(f"{base}/row-history/", {"key": {"id": "3"}, "from": 0, "to": 3}, format="json"),
            api.post(f"{base}/query/", {"sql": "SELECT id, name FROM people VERSION AS OF 1"}, format="json"),
        ]
    jobs = [Job.objects.get(pk=r.json()["id"]) for r in started]
    assert [j.kind for j in jobs] == list(KEYS)
    for job in jobs:
        assert job.status == JobStatus.SUCCEEDED, job.error
        for query in ("", "?offset=2&limit=1", "?offset=1000"):
            r = api.get(f"/api/jobs/{job.pk}/results/{query}")
            assert r.status_code == 200, r.content
            assert list(r.json()) == KEYS[job.kind], job.kind
    page = api.get(f"{base}/versions/1/rows/?limit=2").json()
    assert list(page) == PREVIEW_PAGE
    assert (page["version"], page["cached"], page["total"], page["reused"]) == (1, 7, 7, False)
    reused = api.post(f"{base}/versions/1/rows/")
    assert reused.status_code == 200 and list(reused.json()) == PREVIEW_PAGE and reused.json()["reused"] is True
