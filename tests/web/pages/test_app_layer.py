"""The app layer's shared rules: the job lifecycle (enqueue, claim), the admin's table form,
the commit-owner as every use case builds it, and one error-status map for API and pages."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from tables import tasks
from tables.delta.errors import DeltaError, NotADeltaTableError, PathOutsideRootsError
from tables.models import Job, JobKind, JobStatus, ManagedTable, OwnerState, SyncState, Table
from tables.services import errors
from tables.services.access import roles
from tables.services.catalog import registration
from tables.services.data import jobs as data_jobs
from tables.services.jobs import lifecycle as jobs
from tables.services.owner import access as owner_access
from tables.services.sync import store as sync
from tests.web.ui_tables import history_table

pytest.importorskip("deltalake")

pytestmark = pytest.mark.django_db


@pytest.fixture
def table(settings, tmp_path) -> Table:
    """'Sales', synced (its state is "ok")."""
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    t = registration.register_table("Sales", str(history_table(tmp_path / "sales")))
    sync.sync_table(t.pk)
    t.refresh_from_db()
    assert t.sync_state == SyncState.OK
    return t


@pytest.fixture
def broker_down(monkeypatch):
    """Every task send fails as kombu does when Redis is not there."""

    def unreachable(*args, **kwargs):
        raise ConnectionRefusedError("no broker")

    for task in (tasks.sync_table, tasks.run_data_job):
        monkeypatch.setattr(task, "apply_async", unreachable)


# --- (a) an unreachable broker marks the job only -------------------------------------------------


def test_broker_down_leaves_a_synced_tables_state_as_it_was(
    table, broker_down, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        job = sync.start_sync(table)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and "the task queue is unreachable" in job.error
    table.refresh_from_db()
    assert table.sync_state == SyncState.OK  # not "never": it was synced, and still is
    assert table.last_synced_version == 3


def test_broker_down_for_a_data_job_does_not_touch_the_tables_state(
    table, broker_down, django_capture_on_commit_callbacks
) -> None:
    Table.objects.filter(pk=table.pk).update(sync_state=SyncState.QUEUED)  # its own sync is queued
    with django_capture_on_commit_callbacks(execute=True):
        job = data_jobs.start_preview(table, 1)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and "the task queue is unreachable" in job.error
    assert job.kind == JobKind.PREVIEW and job.params == {"version": 1}
    table.refresh_from_db()
    assert table.sync_state == SyncState.QUEUED


def test_a_sent_job_is_sent_by_task_name(table, monkeypatch, django_capture_on_commit_callbacks) -> None:
    sent = []
    monkeypatch.setattr(jobs, "send", lambda name, *args, **_kw: sent.append((name, args)))
    with django_capture_on_commit_callbacks(execute=True):
        job = sync.start_sync(table)
    assert sent == [("tables.sync_table", (job.pk,))]
    assert Table.objects.get(pk=table.pk).sync_state == SyncState.QUEUED


# --- (b) a sync job is claimed: queued -> running, once ------------------------------------------


def test_a_sync_job_runs_once(table) -> None:
    job = sync.start_sync(table)  # not sent: on_commit never runs inside the test's transaction
    first = sync.sync_table(table.pk, job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED and first["latestVersion"] == 3
    finished = job.finished_at

    again = sync.sync_table(table.pk, job.pk)  # a redelivered message
    assert again["skipped"] and "not queued" in again["reason"]
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED and job.finished_at == finished and job.result == first


def test_a_sync_job_taken_by_another_worker_is_left_alone(table) -> None:
    job = sync.start_sync(table)
    Job.objects.filter(pk=job.pk).update(status=JobStatus.RUNNING, stage="replaying commits for growth")
    out = sync.sync_table(table.pk, job.pk)
    assert out["skipped"]
    job.refresh_from_db()
    assert (job.status, job.stage) == (JobStatus.RUNNING, "replaying commits for growth")
    table.refresh_from_db()
    assert table.sync_state == SyncState.QUEUED and table.sync_lease_until is None  # no lease taken


# --- (c) the admin cannot move a registered table -----------------------------------------------


def test_the_admin_shows_a_tables_location_read_only(table, client, django_user_model, tmp_path) -> None:
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "secret-pass-1")
    client.force_login(admin)
    url = f"/admin/tables/table/{table.pk}/change/"
    page = client.get(url).content.decode()
    assert 'name="location"' not in page and table.location in page
    other = history_table(tmp_path / "other")
    r = client.post(url, {"name": "Sales", "location": str(other), "description": "moved?"})
    assert r.status_code == 302
    table.refresh_from_db()
    assert table.location != str(other) and table.description == "moved?"
    # adding a table still takes a location, checked as registration does
    page = client.get("/admin/tables/table/add/").content.decode()
    assert 'name="location"' in page


# --- (d) the owner as every use case builds it ------------------------------------------------------


def test_owner_of_builds_the_owner_with_its_backfill_hook(table) -> None:
    assert owner_access.owner_of(table) is None  # a filesystem table
    ManagedTable.objects.create(table=table, owner_table_id="t-1", state=OwnerState.ACTIVE)
    owner = owner_access.owner_of(table)
    assert owner is not None and owner.on_ratified is not None
    assert owner.on_ratified == owner_access.database_owner().on_ratified


# --- one map of error statuses ---------------------------------------------------------------------


def test_one_status_per_error_code_for_api_and_pages() -> None:
    assert errors.http_status(NotADeltaTableError("gone")) == 422
    assert errors.http_status(PathOutsideRootsError("out")) == 403
    assert errors.http_status(DeltaError("other")) == 400
    assert errors.http_status(errors.ServiceError("dup", "duplicate", 409)) == 409


def test_a_broken_table_has_the_same_status_in_the_api_and_on_a_page(table, client, django_user_model) -> None:
    import shutil

    from rest_framework.test import APIClient

    user = django_user_model.objects.create_user("ana", password="secret-pass-1")
    user.groups.add(Group.objects.get_or_create(name=roles.ANALYST)[0])
    shutil.rmtree(table.location + "/_delta_log")
    api = APIClient()
    api.force_authenticate(user)
    client.force_login(user)
    r_api = api.get(f"/api/tables/{table.pk}/versions/1/")
    r_page = client.get(f"/t/{table.slug}/v/1/")
    assert r_api.status_code == r_page.status_code == 422
    assert r_api.json()["error"]["code"] == "not_a_delta_table"


def test_tables_runs_without_the_alerts_app(tmp_path) -> None:
    """alerts plugs in through a signal and optional templates: with DELTAWEB_ALERTS=0 (not
    installed) a table registers, syncs and shows its pages and API, and nothing of alerts is
    imported or routed."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    table = history_table(tmp_path / "tables" / "sales")
    script = f"""
import django, sys
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.apps import apps
from django.contrib.auth.models import User
from django.test import Client
from tables.services.catalog import registration
from tables.services.sync import store as sync
assert not apps.is_installed("alerts")
t = registration.register_table("Sales", {str(table)!r})
sync.sync_table(t.pk)
c = Client()
c.force_login(User.objects.create_user("ana", password="x-ana"))
for url in ("/", "/t/sales/", "/t/sales/history/", "/api/tables/", "/api/tables/sales/history/"):
    r = c.get(url)
    assert r.status_code == 200, (url, r.status_code)
    assert b"Activity" not in r.content, url
assert c.get("/activity/").status_code == 404 and c.get("/api/alerts/").status_code == 404
assert not [m for m in sys.modules if m == "alerts" or m.startswith("alerts.")], "alerts was imported"
print("OK")
"""
    env = {
        **os.environ,
        "DELTAWEB_ALERTS": "0",
        "DJANGO_SETTINGS_MODULE": "deltaweb.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'noalerts.sqlite3'}",
        "DELTAWEB_ALLOWED_ROOTS": str(tmp_path / "tables"),
        "DELTAWEB_ALLOWED_HOSTS": "testserver",
    }
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr[-3000:]
