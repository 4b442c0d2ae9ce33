"""Change-driven sync: the probe asks each table's storage one question (is the commit after
the last synced one there?), starts a sync job only for a table that changed, spreads a fleet's
checks over the interval, and backs off from a table that keeps failing; the page says when it
is tried next. On S3 (a real S3-compatible server behind a recording proxy) an unchanged table
costs one request; through a real Celery worker, the beat's tick syncs only the changed table."""

from __future__ import annotations

import shutil
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from django.utils import timezone

from tables.models import Commit, Job, JobKind, SyncState, Table
from tables.services.catalog.registration import register_table
from tables.services.sync import probe
from tables.services.sync.store import sync_table

deltalake = pytest.importorskip("deltalake")
pytestmark = pytest.mark.django_db(transaction=True)


def small_table(path: Path, commits: int = 2) -> Path:
    for i in range(commits):
        deltalake.write_deltalake(str(path), pa.table({"x": [i]}), mode="append")
    return path


def append(path: Path | str, **kwargs) -> None:
    deltalake.write_deltalake(str(path), pa.table({"x": [99]}), mode="append", **kwargs)


@pytest.fixture
def fleet(roots) -> list[Table]:
    tables = []
    for i in range(12):
        t = register_table(f"t{i:02d}", str(small_table(roots / f"t{i:02d}")))
        sync_table(t.pk)
        tables.append(Table.objects.get(pk=t.pk))
    return tables


def test_unchanged_tables_cost_one_request_each_and_no_job(fleet) -> None:
    jobs_before = Job.objects.count()
    result = probe.probe_tables([t.pk for t in fleet])
    assert result.as_dict() == {"unchanged": 12, "changed": 0, "busy": 0, "failed": 0, "requests": 12}
    assert Job.objects.count() == jobs_before
    now = timezone.now()
    for t in Table.objects.all():
        assert t.checked_at is not None and now < t.next_check_at <= now + probe.interval()


def test_a_changed_table_and_only_it_gets_a_sync_job(
    fleet, roots, eager_celery, django_capture_on_commit_callbacks
) -> None:
    append(roots / "t03")
    append(roots / "t07")
    with django_capture_on_commit_callbacks(execute=True):
        result = probe.probe_tables([t.pk for t in fleet])
    changed = {Table.objects.get(pk=pk).name for pk in result.changed}
    assert changed == {"t03", "t07"} and len(result.unchanged) == 10
    new_jobs = Job.objects.filter(kind=JobKind.SYNC, table__name__in=["t03", "t07"]).count()
    assert Job.objects.filter(kind=JobKind.SYNC).count() == new_jobs and new_jobs == 2  # register syncs ran inline
    for name in ("t03", "t07"):
        t = Table.objects.get(name=name)
        assert t.last_synced_version == 2 and Commit.objects.filter(table=t, version=2).exists()
        assert deltalake.DeltaTable(t.location).version() == 2


def test_new_tables_are_spread_over_the_interval_and_claimed_once(fleet, settings) -> None:
    settings.DELTAWEB_SYNC_INTERVAL_SECONDS = 600
    Table.objects.update(next_check_at=None)
    now = timezone.now()
    assert probe.spread_unscheduled(now) == 12
    times = sorted(Table.objects.values_list("next_check_at", flat=True))
    assert all(now <= t <= now + timedelta(seconds=600) for t in times)
    assert len(set(times)) == 12 and times[-1] - times[0] > timedelta(seconds=60)  # not one instant
    halfway = now + timedelta(seconds=300)
    due = probe.claim_due(1000, halfway)
    assert sorted(due) == sorted(
        Table.objects.filter(pk__in=due, next_check_at__gt=halfway).values_list("pk", flat=True)
    )
    assert 0 < len(due) < 12
    assert probe.claim_due(1000, halfway) == []  # claimed: the next tick does not send them again


def test_a_failing_table_backs_off_and_its_page_says_when(fleet, roots, settings, browser) -> None:
    settings.DELTAWEB_SYNC_INTERVAL_SECONDS = 60
    settings.DELTAWEB_SYNC_BACKOFF_MAX_SECONDS = 200
    t = Table.objects.get(name="t05")
    settings.DELTAWEB_ALLOWED_ROOTS = [str(roots / "elsewhere")]  # its storage now refuses it
    waits = []
    for _ in range(4):
        now = timezone.now()
        result = probe.probe_tables([t.pk])
        assert list(result.failed) == [t.pk] and "outside the allowed roots" in result.failed[t.pk]
        t.refresh_from_db()
        waits.append((t.next_check_at - now).total_seconds())
    # the interval doubled per failure (a tenth of jitter), up to the longest backoff
    assert 54 <= waits[0] <= 61 and 108 <= waits[1] <= 121 and all(180 <= w <= 201 for w in waits[2:]), waits
    assert t.failures == 4
    page = browser.get("/t/t05/").content.decode()
    assert "4 failures in a row; tried again at" in page and 'id="next-try"' in page

    # back under the roots, a probe finds it calm again; a sync that fails counts too
    settings.DELTAWEB_ALLOWED_ROOTS = [str(roots)]
    assert probe.probe_tables([t.pk]).unchanged == [t.pk]
    t.refresh_from_db()
    assert t.failures == 0
    shutil.rmtree(roots / "t05" / "_delta_log")
    now = timezone.now()
    sync_table(t.pk)
    t.refresh_from_db()
    assert t.sync_state == SyncState.ERROR and t.failures == 1
    assert 54 <= (t.next_check_at - now).total_seconds() <= 61
    small_table(roots / "t05", 1)
    sync_table(t.pk)
    t.refresh_from_db()
    assert t.failures == 0 and t.sync_state == SyncState.OK


def test_a_table_deltaweb_owns_is_answered_from_the_database(fleet, monkeypatch) -> None:
    from tables.models import ManagedTable, OwnerState

    t = fleet[0]
    ManagedTable.objects.create(
        table=t, owner_table_id="x-1", state=OwnerState.ACTIVE, latest_version=t.last_synced_version
    )
    monkeypatch.setattr(probe, "has_new_commit", lambda table: pytest.fail("asked the storage"))
    assert probe.probe_tables([t.pk]).as_dict()["requests"] == 0
    ManagedTable.objects.filter(table=t).update(latest_version=t.last_synced_version + 1)
    monkeypatch.setattr("tables.services.sync.probe._start_syncs", lambda ids: None)
    assert probe.probe_tables([t.pk]).changed == [t.pk]


def test_an_unchanged_s3_table_costs_one_request(s3_server, monkeypatch, settings) -> None:
    from tests.conftest import use_store_environment
    from tests.faults.proxy import FaultProxy

    bucket = "probe-tables"
    client = s3_server.boto3()
    if bucket not in [b["Name"] for b in client.list_buckets()["Buckets"]]:
        client.create_bucket(Bucket=bucket)
    settings.DELTAWEB_ALLOWED_ROOTS = [f"s3://{bucket}/"]
    with FaultProxy(s3_server.endpoint) as px:
        use_store_environment(monkeypatch, {**s3_server.env(), "AWS_ENDPOINT_URL": px.url})
        uris = [f"s3://{bucket}/{i}-{time.time_ns()}" for i in range(3)]
        for uri in uris:
            for _ in range(2):
                append(uri, storage_options={**s3_server.storage_options(), "AWS_ENDPOINT_URL": px.url})
        ids = []
        for i, uri in enumerate(uris):
            t = register_table(f"s3-{i}", uri)
            sync_table(t.pk)
            ids.append(t.pk)
        px.clear_record()
        result = probe.probe_tables(ids)
        assert result.as_dict()["unchanged"] == 3 and len(px.seen()) == 3, [(s.method, s.path) for s in px.seen()]
        append(uris[1], storage_options={**s3_server.storage_options(), "AWS_ENDPOINT_URL": px.url})
        monkeypatch.setattr("tables.services.sync.probe._start_syncs", lambda ids: None)
        px.clear_record()
        assert probe.probe_tables(ids).changed == [ids[1]] and len(px.seen()) == 3


def test_the_beats_tick_syncs_only_the_changed_table_through_a_real_worker(fleet, roots, celery_worker_process) -> None:
    append(roots / "t09")
    Table.objects.update(next_check_at=timezone.now() - timedelta(seconds=1))
    jobs_before = Job.objects.count()
    from tables.tasks import probe_due

    assert probe_due.apply().get() == {"spread": 0, "due": 12, "batches": 1}
    deadline = time.monotonic() + 120
    t = Table.objects.get(name="t09")
    while time.monotonic() < deadline and t.last_synced_version != 2:
        time.sleep(0.5)
        t.refresh_from_db()
    assert t.last_synced_version == 2 and t.sync_state == SyncState.OK
    while time.monotonic() < deadline and Table.objects.filter(checked_at__isnull=True).exists():
        time.sleep(0.5)
    assert not Table.objects.filter(checked_at__isnull=True).exists()
    assert Job.objects.count() == jobs_before + 1  # the changed table's sync, nothing for the other 11


def _swap_log_for_a_link_out_of_the_roots(path: Path, outside: Path) -> None:
    """The table's log replaced by a symbolic link to a copy of it outside the allowed roots:
    the same commits, so nothing looks changed."""
    shutil.copytree(path / "_delta_log", outside / "_delta_log")
    shutil.rmtree(path / "_delta_log")
    (path / "_delta_log").symlink_to(outside / "_delta_log", target_is_directory=True)


def test_a_log_swapped_for_a_link_out_of_the_roots_fails_the_next_sync_with_path_outside_roots(
    roots, tmp_path_factory, browser
) -> None:
    from tables.services.jobs import lifecycle as jobs
    from tests.web.pages.test_api import make_user, token_client

    path = small_table(roots / "swapped")
    t = register_table("swapped", str(path))
    sync_table(t.pk)  # this process keeps its state: the next sync would continue from it
    outside = tmp_path_factory.mktemp("outside")
    _swap_log_for_a_link_out_of_the_roots(path, outside)

    result = probe.probe_tables([t.pk])
    assert list(result.failed) == [t.pk] and "outside the allowed roots" in result.failed[t.pk]
    job, _ = jobs.create_or_join(JobKind.SYNC, Table.objects.get(pk=t.pk))
    sync_table(t.pk, job.pk)  # as the worker runs it
    api = token_client(make_user("reader"))
    body = api.get(f"/api/jobs/{job.pk}/").json()
    assert body["status"] == "failed" and body["result"]["errorCode"] == "path_outside_roots", body
    assert "outside the allowed roots" in body["error"] and str(outside) not in body["error"]
    shown = api.get(f"/api/tables/{t.pk}/").json()
    assert shown["syncState"] == "error" and "outside the allowed roots" in shown["lastError"]
    assert "outside the allowed roots" in browser.get("/t/swapped/").content.decode()
    assert Commit.objects.filter(table=t).count() == 2  # what was synced before stays


def test_a_table_deltaweb_owns_is_refused_by_the_probe_when_its_log_leads_out_of_the_roots(
    roots, tmp_path_factory, settings
) -> None:
    """The probe answers an owned table from the database, without a request; the confinement
    of its log is still checked first (a resolve, no request), not only at its next commit."""
    from tables.services.managed import use_cases as owner_services

    settings.DELTAWEB_OWNER_AUTO_BACKFILL = False
    path = small_table(roots / "owned")
    t = register_table("owned", str(path))
    owner_services.take_over(t)
    sync_table(t.pk)
    t = Table.objects.get(pk=t.pk)
    assert t.sync_state == SyncState.OK
    calm = probe.probe_tables([t.pk])
    assert calm.unchanged == [t.pk] and calm.requests == 0
    _swap_log_for_a_link_out_of_the_roots(path, tmp_path_factory.mktemp("outside"))

    result = probe.probe_tables([t.pk])
    assert list(result.failed) == [t.pk] and "outside the allowed roots" in result.failed[t.pk], result
    t.refresh_from_db()
    assert t.failures == 1 and "outside the allowed roots" in t.last_error
