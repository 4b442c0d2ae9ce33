"""RESTORE with approvals: the use cases, the REST API, the browser UI and the admin console.

Tables are written by delta-rs in each test; runs use the pure planner (the Spark engine makes
the same plan and is exercised by test_restore_worker.py and the e2e test)."""

from __future__ import annotations

import io
import os
from datetime import timedelta

import pytest
from django.utils import timezone

from tables.delta.restore.plan import plan_restore
from tables.models import Commit, Job, RestoreEvent, RestoreRequest, RestoreStatus, Table
from tables.services import errors
from tables.services.restores import requests as restore_requests
from tables.services.restores import runs as restore_runs
from tables.services.sync import store as sync
from tests.web.restore_tables import log_versions, rows, rs_ids, rs_paths

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

pytestmark = pytest.mark.django_db
S = RestoreStatus


def request(table: Table, user, version: int = 2, **kw) -> RestoreRequest:
    return restore_requests.request_restore(
        table, user, version=version, reason=kw.pop("reason", "bad overwrite"), **kw
    )


def approved(table: Table, users: dict, version: int = 2, **kw) -> RestoreRequest:
    req = request(table, users["analyst"], version, **kw)
    return restore_requests.approve_restore(req, users["approver"], "ok")


def run(req: RestoreRequest, planner=restore_runs.local_planner) -> RestoreRequest:
    restore_runs.run_restore(req.pk, planner)
    req.refresh_from_db()
    return req


def transitions(req: RestoreRequest) -> list[tuple[str, str]]:
    return list(RestoreEvent.objects.filter(request=req).values_list("from_status", "to_status"))


# --- requesting: the dry run --------------------------------------------------------------


def test_request_stores_the_dry_run_plan(table, table_path, users) -> None:
    req = request(table, users["analyst"])
    plan = plan_restore(str(table_path), version=2)
    assert req.status == S.PENDING and req.requested_by == users["analyst"]
    assert req.resolved_version == 2 and req.plan_head_version == 5
    assert req.plan_fingerprint == plan.fingerprint
    p = req.plan
    assert "adds" not in p and "removes" not in p  # bounded: counts, sample and fingerprint only
    assert p["numFilesToAdd"] == len(plan.adds) == 3
    assert p["numFilesToRemove"] == len(plan.removes) == 2
    assert p["metrics"] == plan.metrics
    assert int(p["metrics"]["restoredFilesSize"]) == sum(a["size"] for a in plan.adds) > 0
    assert p["protocolOutcome"] == plan.protocol_outcome
    assert len(p["sample"]["add"]) == 3 and {f["path"] for f in p["sample"]["add"]} == {a["path"] for a in plan.adds}
    compare = p["compare"]
    assert compare["head"]["version"] == 5 and compare["target"]["version"] == 2
    assert compare["head"]["numFiles"] == len(rs_paths(table_path, 5))
    assert compare["after"]["numFiles"] == compare["target"]["numFiles"] == len(rs_paths(table_path, 2))
    assert compare["after"]["sizeBytes"] == compare["target"]["sizeBytes"]
    assert "dataChange=true" in p["warning"]
    assert transitions(req) == [("", S.PENDING)]
    assert "bad overwrite" in req.events.get().note


def test_request_by_timestamp_records_the_resolution(table, users) -> None:
    req = restore_requests.request_restore(table, users["analyst"], timestamp="2023-11-14T22:13:22.500Z", reason="r")
    assert req.resolved_version == 2 and req.target_timestamp == "2023-11-14T22:13:22.500Z"
    assert req.target_version is None
    assert "version" in req.resolution_rule and req.plan["resolution"]["version"] == 2


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"version": 5}, "restore_invalid"),  # not lower than the latest
        ({"version": 9}, "restore_invalid"),
        ({"version": 2, "timestamp": "2024-01-01"}, "invalid_target"),
        ({}, "invalid_target"),
        ({"version": -1}, "invalid_target"),
        ({"timestamp": "not a time"}, "invalid_timestamp"),
        ({"timestamp": "1999-01-01"}, "timestamp_out_of_range"),
        ({"version": 2, "reason": "  "}, "invalid_reason"),
    ],
)
def test_request_refusals_save_nothing(table, users, kwargs, code) -> None:
    kwargs.setdefault("reason", "because")
    with pytest.raises(errors.ServiceError) as exc:
        restore_requests.request_restore(table, users["analyst"], **kwargs)
    assert exc.value.code == code and exc.value.status == 400, exc.value.message
    assert "Traceback" not in exc.value.message
    assert not RestoreRequest.objects.exists() and not RestoreEvent.objects.exists()


def test_readers_cannot_request(table, users) -> None:
    with pytest.raises(errors.ServiceError) as exc:
        request(table, users["reader"])
    assert exc.value.status == 403 and not RestoreRequest.objects.exists()


def test_missing_file_refuses_the_request_and_ignoring_it_restores_without_it(table, table_path, users) -> None:
    gone = sorted(rs_paths(table_path, 2) - rs_paths(table_path, 5))[0]
    (table_path / gone).unlink()
    with pytest.raises(errors.ServiceError) as exc:
        request(table, users["analyst"])
    assert exc.value.code == "restore_missing_files" and exc.value.extra["files"] == [gone]
    assert gone in exc.value.message and not RestoreRequest.objects.exists()

    req = approved(table, users, ignore_missing_files=True)
    assert req.plan["missingFiles"] == [gone] and req.plan["numFilesToAdd"] == 2
    req = run(req)
    assert req.status == S.SUCCEEDED, req.error
    assert gone not in rs_paths(table_path) and rs_paths(table_path) == rs_paths(table_path, 2) - {gone}
    assert req.verification["target"]["onlyInTarget"] == 1 and req.verification["verified"]


# --- deciding -----------------------------------------------------------------------------


def test_analysts_cannot_approve_or_reject(table, users) -> None:
    req = request(table, users["approver"])
    for decide in (restore_requests.approve_restore, restore_requests.reject_restore):
        with pytest.raises(errors.ServiceError) as exc:
            decide(req, users["analyst"], "sure")
        assert exc.value.status == 403 and exc.value.code == "permission_denied"
    req.refresh_from_db()
    assert req.status == S.PENDING and req.approver is None


@pytest.mark.parametrize("who", ["approver", "staff"])
def test_requesters_cannot_approve_their_own_request(table, users, who) -> None:
    req = request(table, users[who])
    with pytest.raises(errors.ServiceError) as exc:
        restore_requests.approve_restore(req, users[who], "mine")
    assert exc.value.status == 403 and exc.value.code == "own_request"
    with pytest.raises(errors.ServiceError):
        restore_requests.reject_restore(req, users[who], "mine")
    req.refresh_from_db()
    assert req.status == S.PENDING


def test_approve_queues_the_run_on_commit(table, users, django_capture_on_commit_callbacks) -> None:
    req = request(table, users["analyst"])
    with django_capture_on_commit_callbacks() as callbacks:
        req = restore_requests.approve_restore(req, users["approver"], "go ahead")
    assert len(callbacks) == 1  # the task is enqueued only once the approval is committed
    assert req.status == S.QUEUED and req.approver == users["approver"] and req.approver_comment == "go ahead"
    assert transitions(req) == [("", S.PENDING), (S.PENDING, S.APPROVED), (S.APPROVED, S.QUEUED)]
    assert req.events.get(to_status=S.APPROVED).actor == users["approver"]


def test_decisions_only_from_pending_or_stale(table, users) -> None:
    req = request(table, users["analyst"])
    with pytest.raises(errors.ServiceError) as exc:
        restore_requests.reject_restore(req, users["approver"], "")
    assert exc.value.code == "invalid_comment"  # a rejection says why
    req = restore_requests.reject_restore(req, users["approver"], "not this one")
    assert req.status == S.REJECTED and req.finished_at is not None
    with pytest.raises(errors.ServiceError) as exc:
        restore_requests.approve_restore(req, users["approver2"], "")
    assert exc.value.status == 409 and exc.value.code == "invalid_state"
    other = request(table, users["analyst"])
    with pytest.raises(errors.ServiceError) as exc:
        restore_requests.approve_restore(other, users["approver"], "", fingerprint="0" * 64)
    assert exc.value.code == "plan_changed"


# --- running --------------------------------------------------------------------------------


def test_run_commits_the_restore_and_starts_a_sync(table, table_path, users) -> None:
    req = run(approved(table, users))
    assert req.status == S.SUCCEEDED, req.error
    assert req.result_version == 6 and log_versions(table_path)[-1] == 6
    assert rs_ids(table_path) == rs_ids(table_path, 2) and rs_paths(table_path) == rs_paths(table_path, 2)
    assert req.verification["verified"] and req.verification["target"]["filesEqualTarget"]
    assert req.verification["commit"]["verified"]
    assert req.result["metrics"] == req.plan["metrics"] and req.result["txnId"] == req.txn
    assert req.stage == "done" and req.finished_at and req.attempts == 1 and req.error == ""
    assert transitions(req)[-2:] == [(S.QUEUED, S.RUNNING), (S.RUNNING, S.SUCCEEDED)]
    sync_job = Job.objects.get(pk=req.result["syncJob"])
    sync.sync_table(table.pk, sync_job.pk)
    restore = Commit.objects.get(table=table, version=6)
    assert restore.operation == "RESTORE" and restore.operation_parameters == {
        "version": 2,
        "timestamp": None,
        "requestId": str(req.pk),
        "requestedBy": "ana",
        "approvedBy": "appro",
    }
    assert restore.commit_info["txnId"] == req.txn


def test_a_second_run_of_the_same_request_is_a_no_op(table, table_path, users) -> None:
    req = run(approved(table, users))
    out = restore_runs.run_restore(req.pk, restore_runs.local_planner)
    assert out["skipped"] and "succeeded" in out["reason"]
    assert log_versions(table_path)[-1] == 6


def test_a_retry_after_a_commit_finds_it_instead_of_committing_twice(table, table_path, users) -> None:
    """The worker committed, then died before it could say so; requeued, the run finds its txnId."""
    req = approved(table, users)
    restore_runs.claim_restore(req)
    restore_runs.apply_approved_plan(str(table_path), req.plan, req.txn, restore_runs.local_planner, lambda *a: None)
    assert log_versions(table_path)[-1] == 6
    RestoreRequest.objects.filter(pk=req.pk).update(progress_at=timezone.now() - timedelta(hours=1))
    assert restore_runs.requeue_stuck_restores() == [req.pk]
    req = run(req)
    assert req.status == S.SUCCEEDED and req.result_version == 6 and req.result["alreadyCommitted"]
    assert req.attempts == 2 and log_versions(table_path)[-1] == 6
    assert req.verification["target"]["filesEqualTarget"]
    assert (S.RUNNING, S.QUEUED) in transitions(req)


def test_stale_when_another_writer_changes_the_plans_files_before_the_run(table, table_path, users) -> None:
    req = approved(table, users)
    old_fingerprint = req.plan_fingerprint
    DeltaTable(str(table_path)).delete("id = 104")  # rewrites a file the plan removes: version 6
    req = run(req)
    assert req.status == S.STALE, req.error
    assert log_versions(table_path)[-1] == 6  # nothing committed
    assert req.plan_head_version == 6 and req.plan["readVersion"] == 6 and req.plan_fingerprint != old_fingerprint
    assert req.plan["firstReadVersion"] == 5 and req.plan["compare"]["head"]["version"] == 6
    assert req.approver is None and req.approver_comment == ""  # it needs an approval again
    assert (S.RUNNING, S.STALE) in transitions(req)
    # the same approver may approve the new plan; then it runs
    req = restore_requests.approve_restore(req, users["approver"], "new plan ok", fingerprint=req.plan_fingerprint)
    req = run(req)
    assert req.status == S.SUCCEEDED and req.result_version == 7
    assert rs_ids(table_path) == rs_ids(table_path, 2)


def test_an_append_before_the_run_is_kept_and_the_restore_rebases(table, table_path, users) -> None:
    req = approved(table, users)
    write_deltalake(str(table_path), rows([999]), mode="append")  # version 6, elsewhere
    appended = rs_paths(table_path) - rs_paths(table_path, 5)
    req = run(req)
    assert req.status == S.SUCCEEDED, req.error
    assert req.result_version == 7 and req.result["rebasedOver"] == [6] and req.result["readVersion"] == 6
    assert rs_paths(table_path) == rs_paths(table_path, 2) | appended
    assert rs_ids(table_path) == sorted([*rs_ids(table_path, 2), 999])
    assert req.verification["verified"] and req.verification["target"]["onlyInResult"] == 1
    assert req.result["fingerprint"] == req.plan_fingerprint  # the approved change, rebased
    assert log_versions(table_path) == list(range(8))


@pytest.fixture
def writer_during_commit(monkeypatch):
    """Let another writer commit after the run planned, just before the restore commits."""

    def install(action):
        real = restore_runs.commit_restore

        def commit_after_a_competitor(*args, **kwargs):
            action()
            return real(*args, **kwargs)

        monkeypatch.setattr(restore_runs, "commit_restore", commit_after_a_competitor)

    return install


def test_an_append_during_the_run_is_rebased_over(table, table_path, users, writer_during_commit) -> None:
    req = approved(table, users)
    writer_during_commit(lambda: write_deltalake(str(table_path), rows([7]), mode="append"))
    req = run(req)
    assert req.status == S.SUCCEEDED, req.error
    assert req.result_version == 7 and req.result["rebasedOver"] == [6]
    assert 7 in rs_ids(table_path) and log_versions(table_path) == list(range(8))


def test_a_delete_of_the_same_files_during_the_run_is_a_conflict(
    table, table_path, users, writer_during_commit
) -> None:
    req = approved(table, users)
    writer_during_commit(lambda: DeltaTable(str(table_path)).delete("id = 104"))
    req = run(req)
    assert req.status == S.CONFLICT
    assert "version 6" in req.error and req.result == {"competingVersions": [6]}
    assert log_versions(table_path) == list(range(7))  # no restore commit, nothing lost
    assert transitions(req)[-1] == (S.RUNNING, S.CONFLICT)


def test_files_gone_since_approval_fail_the_run_listing_them(table, table_path, users) -> None:
    req = approved(table, users)
    gone = sorted(rs_paths(table_path, 2) - rs_paths(table_path, 5))
    for f in gone:
        (table_path / f).unlink()
    req = run(req)
    assert req.status == S.FAILED
    assert all(f in req.error for f in gone) and sorted(req.result["missingFiles"]) == gone
    assert log_versions(table_path)[-1] == 5


def test_an_unexpected_error_is_one_line(table, users) -> None:
    def broken(location, **kw):
        raise RuntimeError("py4j said no\nTraceback (most recent call last):\n  at org.apache.spark...")

    req = run(approved(table, users), broken)
    assert req.status == S.FAILED
    assert req.error == "the restore failed unexpectedly (RuntimeError: py4j said no)"


def test_requeue_stuck_restores(table, users, django_capture_on_commit_callbacks) -> None:
    old = timezone.now() - timedelta(minutes=30)

    def queued() -> RestoreRequest:
        # several in flight on one table at once: no longer possible through approvals (one
        # at a time per table), but rows left from before, or put there by hand, are requeued alike
        req = request(table, users["analyst"])
        RestoreRequest.objects.filter(pk=req.pk).update(status=S.QUEUED, progress_at=timezone.now())
        return req

    silent = queued()
    restore_runs.claim_restore(silent)
    alive = queued()
    restore_runs.claim_restore(alive)
    worn = queued()
    restore_runs.claim_restore(worn)
    lost = queued()
    RestoreRequest.objects.filter(pk__in=[silent.pk, lost.pk]).update(progress_at=old)
    RestoreRequest.objects.filter(pk=worn.pk).update(progress_at=old, attempts=restore_runs.MAX_RESTORE_ATTEMPTS)
    with django_capture_on_commit_callbacks() as callbacks:
        acted = restore_runs.requeue_stuck_restores()
    assert sorted(acted) == sorted([silent.pk, worn.pk, lost.pk]) and len(callbacks) == 2  # silent and lost sent
    statuses = dict(RestoreRequest.objects.values_list("pk", "status"))
    assert statuses[silent.pk] == S.QUEUED and statuses[alive.pk] == S.RUNNING
    assert statuses[worn.pk] == S.FAILED and statuses[lost.pk] == S.QUEUED
    assert "stopped 3 times" in RestoreRequest.objects.get(pk=worn.pk).error
    assert restore_runs.requeue_stuck_restores() == []  # they showed life just now


def test_a_worker_that_lost_its_claim_stops_without_writing(table, table_path, users) -> None:
    req = approved(table, users)

    def planner(location, *, progress, **kw):
        # meanwhile this run was taken for dead and requeued: its next progress report stops it
        RestoreRequest.objects.filter(pk=req.pk).update(status=S.QUEUED)
        return restore_runs.local_planner(location, progress=progress, **kw)

    out = restore_runs.run_restore(req.pk, planner)
    assert out["skipped"] and log_versions(table_path)[-1] == 5
    assert os.path.isdir(table_path)


# --- the REST API -----------------------------------------------------------------------------


def api_client(user=None):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    client = APIClient()
    if user is not None:
        client.credentials(HTTP_AUTHORIZATION="Token " + Token.objects.create(user=user).key)
    return client


@pytest.fixture
def clients(users) -> dict:
    return {name: api_client(user) for name, user in users.items()} | {"anonymous": api_client()}


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    assert body["error"]["message"] and "Traceback" not in body["error"]["message"]
    return body["error"]


def test_api_request_get_approve_and_follow(table, table_path, clients, users) -> None:
    url = f"/api/tables/{table.pk}/restores/"
    r = clients["analyst"].post(url, {"version": 2, "reason": "undo the overwrite"}, format="json")
    assert r.status_code == 201, r.content
    body = r.json()
    assert r["Location"].endswith(f"/api/restores/{body['id']}/")
    assert body["status"] == "pending" and body["awaitingApproval"] and body["requestedBy"] == "ana"
    assert body["resolvedVersion"] == 2 and body["planHeadVersion"] == 5
    assert body["plan"]["numFilesToAdd"] == 3 and body["plan"]["numFilesToRemove"] == 2
    assert body["plan"]["metrics"]["numOfFilesAfterRestore"] == str(len(rs_paths(table_path, 2)))
    assert "dataChange=true" in body["plan"]["warning"]
    assert [e["toStatus"] for e in body["events"]] == ["pending"]

    listed = clients["reader"].get(url).json()
    assert listed["count"] == 1 and "plan" not in listed["results"][0]
    assert clients["reader"].get(url + "?status=stale").json()["count"] == 0
    assert_error(clients["reader"].get(url + "?status=bogus"), 400, "invalid")
    assert clients["reader"].get("/api/restores/?status=pending,stale").json()["count"] == 1

    detail = f"/api/restores/{body['id']}/"
    r = clients["approver"].post(detail + "approve/", {"comment": "ok", "fingerprint": body["planFingerprint"]})
    assert r.status_code == 202, r.content
    assert r.json()["status"] == "queued" and r.json()["approver"] == "appro"
    run(RestoreRequest.objects.get(pk=body["id"]))
    got = clients["reader"].get(detail).json()
    assert got["status"] == "succeeded" and got["resultVersion"] == 6 and got["isTerminal"]
    assert got["verification"]["verified"] and got["result"]["metrics"] == body["plan"]["metrics"]
    assert [e["toStatus"] for e in got["events"]] == ["pending", "approved", "queued", "running", "succeeded"]
    assert got["events"][3]["actor"] is None and got["events"][1]["actor"] == "appro"


def test_api_permissions(table, clients, users) -> None:
    url = f"/api/tables/{table.pk}/restores/"
    for method in ("get", "post"):
        assert_error(getattr(clients["anonymous"], method)(url), 401, "not_authenticated")
    assert_error(clients["reader"].post(url, {"version": 2, "reason": "x"}, format="json"), 403, "permission_denied")
    req = request(table, users["approver"])
    detail = f"/api/restores/{req.pk}/"
    assert_error(clients["anonymous"].get(detail), 401, "not_authenticated")
    assert_error(clients["anonymous"].post(detail + "approve/"), 401, "not_authenticated")
    assert_error(clients["analyst"].post(detail + "approve/", {"comment": "me"}), 403, "permission_denied")
    assert_error(clients["analyst"].post(detail + "reject/", {"comment": "me"}), 403, "permission_denied")
    assert_error(clients["approver"].post(detail + "approve/"), 403, "own_request")
    own = request(table, users["staff"])
    assert_error(clients["staff"].post(f"/api/restores/{own.pk}/approve/"), 403, "own_request")
    assert_error(clients["staff"].post(detail + "reject/", {"comment": ""}), 400, "invalid_comment")
    r = clients["staff"].post(detail + "reject/", {"comment": "wrong version"})
    assert r.status_code == 200 and r.json()["status"] == "rejected"
    assert_error(clients["approver2"].post(detail + "approve/"), 409, "invalid_state")
    assert_error(clients["approver2"].post(f"/api/restores/{own.pk}/approve/", {"fingerprint": "x"}), 400, "invalid")
    assert_error(clients["reader"].get("/api/restores/999999/"), 404, "not_found")
    assert_error(clients["reader"].get("/api/restores/abc/"), 404, "not_found")
    req.refresh_from_db()
    assert req.status == S.REJECTED


def test_api_refusals(table, table_path, clients) -> None:
    url = f"/api/tables/{table.pk}/restores/"
    post = clients["analyst"].post
    assert_error(post(url, {"version": 5, "reason": "x"}, format="json"), 400, "restore_invalid")
    assert_error(post(url, {"reason": "x"}, format="json"), 400, "invalid_target")
    assert_error(
        post(url, {"version": 1, "timestamp": "2024-01-01", "reason": "x"}, format="json"), 400, "invalid_target"
    )
    assert_error(post(url, {"version": 2}, format="json"), 400, "invalid")
    assert_error(post(url, {"version": -3, "reason": "x"}, format="json"), 400, "invalid")
    assert_error(post("/api/tables/nope/restores/", {"version": 2, "reason": "x"}, format="json"), 404, "not_found")
    gone = sorted(rs_paths(table_path, 2) - rs_paths(table_path, 5))
    for f in gone:
        (table_path / f).unlink()
    err = assert_error(post(url, {"version": 2, "reason": "x"}, format="json"), 400, "restore_missing_files")
    assert sorted(err["files"]) == gone and err["missingCount"] == len(gone)
    assert not RestoreRequest.objects.exists()
    r = post(url, {"version": 2, "reason": "x", "ignoreMissingFiles": True}, format="json")
    assert r.status_code == 201 and r.json()["plan"]["numMissingFiles"] == len(gone)


# --- the browser UI ---------------------------------------------------------------------------


def browser(user):
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


def test_ui_request_form_on_the_table_page_and_the_request_page(table, table_path, users) -> None:
    ana = browser(users["analyst"])
    page = ana.get(f"/t/{table.slug}/restores/").content.decode()
    assert 'id="request-restore"' in page and f'action="/t/{table.slug}/restore/"' in page
    assert 'id="request-restore"' not in browser(users["reader"]).get(f"/t/{table.slug}/restores/").content.decode()

    evil = "<script>alert(1)</script>"
    r = ana.post(f"/t/{table.slug}/restore/", {"version": "2", "reason": f"undo {evil}"})
    req = RestoreRequest.objects.get()
    assert r.status_code == 302 and r["Location"] == f"/restores/{req.pk}/"
    page = ana.get(r["Location"]).content.decode()
    assert evil not in page and "undo &lt;script&gt;" in page
    assert 'id="files-to-add">3<' in page and 'id="files-to-remove">2<' in page
    assert "re-emits its files with dataChange=true" in page
    assert "Now (version 5)" in page and "After the restore" in page and "Version 2" in page
    assert "numOfFilesAfterRestore" in page and 'id="decision"' not in page
    listed = ana.get(f"/t/{table.slug}/restores/").content.decode()
    assert f'href="/restores/{req.pk}/"' in listed
    assert f"/restores/{req.pk}/" in ana.get("/restores/?waiting=1").content.decode()
    status = ana.get(f"/restores/{req.pk}.json").json()
    assert status["status"] == "pending" and status["awaitingApproval"] and not status["terminal"]
    assert ana.get("/restores/987654.json").status_code == 404
    assert ana.get("/restores/987654/").status_code == 404


def test_ui_refusals_show_on_the_form(table, table_path, users) -> None:
    ana = browser(users["analyst"])
    r = ana.post(f"/t/{table.slug}/restore/", {"version": "5", "reason": "x"})
    assert r.status_code == 400 and "not lower than the latest version 5" in r.content.decode()
    r = ana.post(f"/t/{table.slug}/restore/", {"version": "2", "reason": ""})
    assert r.status_code == 400 and 'class="field invalid"' in r.content.decode()
    gone = sorted(rs_paths(table_path, 2) - rs_paths(table_path, 5))[0]
    (table_path / gone).unlink()
    r = ana.post(f"/t/{table.slug}/restore/", {"version": "2", "reason": "x"})
    page = r.content.decode()
    assert r.status_code == 400 and 'id="missing-files"' in page and gone in page and "Ignore missing files" in page
    assert not RestoreRequest.objects.exists()
    r = ana.post(f"/t/{table.slug}/restore/", {"version": "2", "reason": "x", "ignore_missing_files": "on"})
    assert r.status_code == 302
    assert (
        browser(users["reader"]).post(f"/t/{table.slug}/restore/", {"version": "2", "reason": "x"}).status_code == 403
    )
    assert ana.get(f"/t/{table.slug}/v/2/").content.decode().count(f"/t/{table.slug}/restore/?version=2") == 1


def test_ui_decisions_follow_the_server_rules(table, users) -> None:
    req = request(table, users["approver"])
    url = f"/restores/{req.pk}/"
    ana, own, other = browser(users["analyst"]), browser(users["approver"]), browser(users["approver2"])
    assert ana.post(url + "approve/", {"comment": "ok"}).status_code == 403
    assert ana.post(url + "reject/", {"comment": "no"}).status_code == 403
    page = own.get(url).content.decode()
    assert 'id="decision"' not in page and 'id="own-request"' in page
    r = own.post(url + "approve/", {"comment": "mine"})
    assert r.status_code == 403 and "another approver" in r.content.decode()
    page = other.get(url).content.decode()
    assert 'id="decision"' in page and req.plan_fingerprint in page
    assert page.index('id="plan"') < page.index('id="decision"')  # the plan, then the decision
    r = other.post(url + "reject/", {"comment": ""}, follow=True)  # a rejection needs a comment
    assert "Give a comment" in r.content.decode()
    req.refresh_from_db()
    assert req.status == S.PENDING
    r = other.post(url + "approve/", {"comment": "fine", "fingerprint": req.plan_fingerprint})
    assert r.status_code == 302
    req.refresh_from_db()
    assert req.status == S.QUEUED and req.approver == users["approver2"]
    page = other.get(url).content.decode()
    assert 'id="decision"' not in page and "fine" in page
    r = other.post(url + "approve/", {"comment": "again"}, follow=True)
    assert "only pending or stale requests can be approved" in r.content.decode()
    run(req)
    page = ana.get(url).content.decode()
    assert "committed as" in page and f"/t/{table.slug}/v/6/" in page
    assert "equal version 2" in page


# --- the admin console ------------------------------------------------------------------------


@pytest.fixture
def console(users):
    """Approvers as the deployment sets them up: the group's permissions, plus staff status."""
    from django.core.management import call_command

    call_command("create_roles", stdout=io.StringIO())
    for name in ("approver", "approver2"):
        users[name].is_staff = True
        users[name].save()
    return {name: browser(users[name]) for name in ("approver", "approver2", "analyst")}


def test_admin_lists_requests_awaiting_a_decision(table, users, console) -> None:
    waiting = request(table, users["analyst"])
    done = restore_requests.reject_restore(request(table, users["analyst"]), users["approver"], "no")
    page = console["approver"].get("/admin/tables/restorerequest/").content.decode()
    assert f"/admin/tables/restorerequest/{waiting.pk}/change/" in page
    assert f"/admin/tables/restorerequest/{done.pk}/change/" not in page
    assert "version 2" in page and "+3 (" in page and "ana" in page
    page = console["approver"].get("/admin/tables/restorerequest/?status=all").content.decode()
    assert f"/admin/tables/restorerequest/{done.pk}/change/" in page
    assert console["analyst"].get("/admin/tables/restorerequest/").status_code == 302  # no console for analysts


def test_admin_change_page_approves_through_the_service(table, table_path, users, console) -> None:
    req = request(table, users["approver"])
    url = f"/admin/tables/restorerequest/{req.pk}/change/"
    page = console["approver"].get(url).content.decode()
    assert 'id="own-request"' in page and "Approve and run" not in page
    assert "dataChange=true; streaming and change-data readers will see them again" in page
    assert "Files to add:</strong> 3" in page and "numOfFilesAfterRestore" in page
    # the requester posts anyway: the service refuses, the request stays pending
    r = console["approver"].post(f"/admin/tables/restorerequest/{req.pk}/approve/", {"comment": "mine"}, follow=True)
    assert "another approver must approve or reject it" in r.content.decode()
    req.refresh_from_db()
    assert req.status == S.PENDING
    assert console["approver2"].get(f"/admin/tables/restorerequest/{req.pk}/approve/").status_code == 405
    page = console["approver2"].get(url).content.decode()
    assert "Approve and run" in page and 'name="_save"' not in page
    assert page.index("Files to add:</strong> 3") < page.index("Approve and run")  # the plan, then the buttons
    RestoreRequest.objects.filter(pk=req.pk).update(stage="written meanwhile")
    console["approver2"].post(url, {"_save": "Save", "events-TOTAL_FORMS": "0", "events-INITIAL_FORMS": "0"})
    assert RestoreRequest.objects.get(pk=req.pk).stage == "written meanwhile"  # the change page saves nothing
    r = console["approver2"].post(
        f"/admin/tables/restorerequest/{req.pk}/approve/", {"comment": "checked", "fingerprint": req.plan_fingerprint}
    )
    assert r.status_code == 302 and r["Location"] == url
    req.refresh_from_db()
    assert req.status == S.QUEUED and req.approver == users["approver2"] and req.approver_comment == "checked"
    page = console["approver2"].get(url).content.decode()
    assert "Approve and run" not in page and "audit trail" in page.lower() and "queued for a worker" in page


def test_admin_bulk_decisions_ask_for_a_comment_and_apply_the_rules(table, users, console) -> None:
    mine = request(table, users["approver"])
    theirs = request(table, users["analyst"])
    data = {"action": "reject_selected", "_selected_action": [mine.pk, theirs.pk]}
    r = console["approver"].post("/admin/tables/restorerequest/", data)
    page = r.content.decode()
    assert r.status_code == 200 and "Reject these restore requests?" in page and 'name="apply"' in page
    r = console["approver"].post(
        "/admin/tables/restorerequest/", {**data, "apply": "1", "comment": "duplicate"}, follow=True
    )
    page = r.content.decode()
    assert f"#{theirs.pk} rejected" in page and "another approver must approve or reject it" in page
    assert RestoreRequest.objects.get(pk=theirs.pk).status == S.REJECTED
    assert RestoreRequest.objects.get(pk=mine.pk).status == S.PENDING
    data = {"action": "approve_selected", "_selected_action": [mine.pk], "apply": "1", "comment": ""}
    console["approver2"].post("/admin/tables/restorerequest/", data)
    assert RestoreRequest.objects.get(pk=mine.pk).status == S.QUEUED
