"""Cancelling a data job from its progress box: a Cancel button while a data job has not ended,
posting to the same service as the API's cancel (who may: the user who started it, an approver
or staff), then back to the page it was pressed on with what happened said there."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.template.loader import render_to_string
from django.test import RequestFactory

from tables.models import Job, JobKind, JobStatus
from tables.services.access import roles
from tables.services.catalog import registration
from tests.web.ui_tables import ict_table

pytestmark = pytest.mark.django_db


@pytest.fixture
def preview_job(settings, tmp_path, analyst) -> Job:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    table = registration.register_table("clock", str(ict_table(tmp_path / "clock")))
    return Job.objects.create(kind=JobKind.PREVIEW, table=table, params={"version": 1}, created_by=analyst)


def _box(job: Job) -> str:
    request = RequestFactory().get("/t/clock/v/1/?job=1")
    return render_to_string("tables/_job.html", {"job": job, "request": request}, request=request)


def test_a_data_job_not_ended_offers_cancel_and_others_do_not(preview_job) -> None:
    assert f'action="/jobs/{preview_job.pk}/cancel/"' in _box(preview_job)
    sync = Job.objects.create(kind=JobKind.SYNC, table=preview_job.table)
    assert "/cancel/" not in _box(sync)
    Job.objects.filter(pk=preview_job.pk).update(status=JobStatus.SUCCEEDED)
    preview_job.refresh_from_db()
    assert "/cancel/" not in _box(preview_job)


def test_the_starter_cancels_a_queued_job_and_lands_back(browser, preview_job) -> None:
    back = f"/t/clock/v/1/?job={preview_job.pk}"
    r = browser.post(f"/jobs/{preview_job.pk}/cancel/", {"next": back})
    assert r.status_code == 302 and r["Location"] == back
    preview_job.refresh_from_db()
    assert (preview_job.status, preview_job.stage) == (JobStatus.FAILED, "cancelled")
    assert preview_job.result["cancelledBy"] == "ana"
    landed = browser.get("/").content.decode()
    assert f"Job #{preview_job.pk}: cancelled." in landed
    again = browser.post(f"/jobs/{preview_job.pk}/cancel/", {"next": back}, follow=True).content.decode()
    assert "there is nothing to cancel" in again


def test_someone_else_cannot_and_nothing_changes(client, django_user_model, preview_job) -> None:
    other = django_user_model.objects.create_user("otto", password="secret-pass-2")
    other.groups.add(Group.objects.get_or_create(name=roles.ANALYST)[0])
    client.force_login(other)
    page = client.post(f"/jobs/{preview_job.pk}/cancel/", {"next": "https://evil.example/"}, follow=True)
    assert page.redirect_chain[0][0] == "/"  # never to another site
    assert "Only the user who started a job" in page.content.decode()
    preview_job.refresh_from_db()
    assert preview_job.status == JobStatus.QUEUED
    assert client.get(f"/jobs/{preview_job.pk}/cancel/").status_code == 405
    assert client.post("/jobs/999999/cancel/").status_code == 404
