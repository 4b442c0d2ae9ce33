"""The restore approval flow's rough edges: the txnId is the request's own UUID, one approved
restore per table at a time, withdrawing a request, who asked and approved in the commit, the
history row's link to its request, and admin links an approver can follow."""

from __future__ import annotations

import io
import uuid

import pytest
from django.core.management import call_command
from django.test import Client

from tables.models import RestoreEvent, RestoreRequest, RestoreStatus, Table
from tables.services.catalog import registration
from tables.services.errors import ServiceError
from tables.services.restores import requests as restore_requests
from tables.services.restores import runs as restore_runs
from tables.services.sync import store as sync
from tests.web.restore_tables import restore_table
from tests.web.restores.test_restores import api_client, assert_error

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable  # noqa: E402

pytestmark = pytest.mark.django_db
S = RestoreStatus


def request(table: Table, user, version: int = 2) -> RestoreRequest:
    return restore_requests.request_restore(table, user, version=version, reason="bad overwrite")


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


# --- 6. the txnId is a UUID of the request's own ------------------------------------------------


def test_txn_id_is_a_stored_uuid_and_the_commit_carries_it(table, table_path, users) -> None:
    a, b = request(table, users["analyst"]), request(table, users["analyst"])
    assert isinstance(a.txn_id, uuid.UUID) and a.txn_id != b.txn_id
    assert RestoreRequest.objects.get(pk=a.pk).txn_id == a.txn_id  # stored, not derived
    restore_requests.approve_restore(a, users["approver"], "ok")
    restore_runs.run_restore(a.pk, restore_runs.local_planner)
    a.refresh_from_db()
    assert a.status == S.SUCCEEDED
    assert DeltaTable(str(table_path)).history(1)[0]["txnId"] == str(a.txn_id) == a.result["txnId"]
    # a retry finds its own commit by the stored id
    assert restore_runs.restore_commit_version(a) == a.result_version


# --- 5. one approved restore per table at a time ------------------------------------------------


def test_a_second_approval_of_the_same_table_is_refused_up_front(table, users) -> None:
    first, second = request(table, users["analyst"]), request(table, users["analyst"], version=1)
    restore_requests.approve_restore(first, users["approver"], "ok")
    with pytest.raises(ServiceError) as exc:
        restore_requests.approve_restore(second, users["approver"], "ok")
    assert exc.value.status == 409 and exc.value.code == "restore_in_flight"
    assert f"restore #{first.pk} of this table is queued; approve this one after it finishes" in (
        exc.value.message.lower()
    )
    assert RestoreRequest.objects.get(pk=second.pk).status == S.PENDING  # nothing changed
    # the API
    body = assert_error(
        api_client(users["approver2"]).post(f"/api/restores/{second.pk}/approve/", {"comment": "x"}),
        409,
        "restore_in_flight",
    )
    assert f"#{first.pk}" in body["message"]
    # the page: the message, nothing approved
    r = browser(users["approver2"]).post(f"/restores/{second.pk}/approve/", {"comment": "x"}, follow=True)
    assert f"Restore #{first.pk} of this table is queued" in r.content.decode()
    # the admin action
    call_command("create_roles", stdout=io.StringIO())
    users["approver2"].is_staff = True
    users["approver2"].save()
    data = {"action": "approve_selected", "_selected_action": [second.pk], "apply": "1", "comment": ""}
    r = browser(users["approver2"]).post("/admin/tables/restorerequest/", data, follow=True)
    assert f"Restore #{first.pk} of this table is queued" in r.content.decode()
    assert RestoreRequest.objects.get(pk=second.pk).status == S.PENDING
    # once the first has finished, the second can be approved
    restore_runs.run_restore(first.pk, restore_runs.local_planner)
    assert restore_requests.approve_restore(second, users["approver"], "now").status == S.QUEUED


def test_another_tables_restore_does_not_block(table, table_path, users) -> None:
    other = registration.register_table("events2", str(restore_table(table_path.parent / "events2")))
    sync.sync_table(other.pk)
    restore_requests.approve_restore(request(table, users["analyst"]), users["approver"], "ok")
    assert restore_requests.approve_restore(request(other, users["analyst"]), users["approver"]).status == S.QUEUED


# --- 1. withdrawing ----------------------------------------------------------------------------


def test_the_requester_withdraws_and_it_can_no_longer_be_approved(table, users) -> None:
    req = request(table, users["analyst"])
    with pytest.raises(ServiceError) as exc:
        restore_requests.withdraw_restore(req, users["approver"])
    assert exc.value.status == 403
    req = restore_requests.withdraw_restore(req, users["analyst"], "not needed")
    assert req.status == S.WITHDRAWN and req.is_terminal
    assert RestoreEvent.objects.filter(request=req, to_status=S.WITHDRAWN, actor=users["analyst"]).exists()
    with pytest.raises(ServiceError) as exc:
        restore_requests.approve_restore(req, users["approver"], "ok")
    assert exc.value.status == 409 and RestoreRequest.objects.get(pk=req.pk).status == S.WITHDRAWN
    with pytest.raises(ServiceError) as exc:
        restore_requests.withdraw_restore(req, users["analyst"])
    assert exc.value.status == 409


def test_api_withdraw(table, users) -> None:
    req = request(table, users["analyst"])
    url = f"/api/restores/{req.pk}/withdraw/"
    c = {name: api_client(user) for name, user in users.items()}
    assert_error(api_client().post(url), 401, "not_authenticated")
    assert_error(c["approver"].post(url), 403, "permission_denied")
    assert_error(c["analyst"].post(url, {"comment": "x" * 5001}), 400, "invalid")
    assert RestoreRequest.objects.get(pk=req.pk).status == S.PENDING
    r = c["analyst"].post(url, {"comment": "duplicate"})
    assert r.status_code == 200 and r.json()["status"] == S.WITHDRAWN
    assert_error(c["analyst"].post(url), 409, "invalid_state")
    # staff may withdraw anyone's; an approved one is no longer withdrawable
    other = request(table, users["analyst"])
    assert c["staff"].post(f"/api/restores/{other.pk}/withdraw/").status_code == 200
    queued = restore_requests.approve_restore(request(table, users["analyst"]), users["approver"], "ok")
    assert_error(c["analyst"].post(f"/api/restores/{queued.pk}/withdraw/"), 409, "invalid_state")
    assert_error(c["analyst"].post("/api/restores/999999/withdraw/"), 404, "not_found")


def test_page_withdraw_button_for_the_requester_only(table, users) -> None:
    req = request(table, users["analyst"])
    url = f"/restores/{req.pk}/"
    assert 'id="withdraw"' in browser(users["analyst"]).get(url).content.decode()
    assert 'id="withdraw"' not in browser(users["approver"]).get(url).content.decode()
    assert browser(users["approver"]).post(f"/restores/{req.pk}/withdraw/").status_code == 403
    assert RestoreRequest.objects.get(pk=req.pk).status == S.PENDING
    r = browser(users["analyst"]).post(f"/restores/{req.pk}/withdraw/", follow=True)
    page = r.content.decode()
    assert r.status_code == 200 and f"Restore #{req.pk} withdrawn." in page and 'id="withdraw"' not in page
    assert RestoreRequest.objects.get(pk=req.pk).status == S.WITHDRAWN


# --- 2. who asked and who approved is in the commit ---------------------------------------------


def test_the_restore_commit_names_the_requester_and_the_approver(table, table_path, users) -> None:
    req = restore_requests.approve_restore(request(table, users["analyst"]), users["approver"], "ok")
    fingerprint = req.plan_fingerprint
    restore_runs.run_restore(req.pk, restore_runs.local_planner)
    req.refresh_from_db()
    assert req.status == S.SUCCEEDED and req.verification["verified"]
    info = DeltaTable(str(table_path)).history(1)[0]
    assert info["operation"] == "RESTORE" and info["userName"] == "appro"
    params = info["operationParameters"]
    assert params["requestedBy"] == "ana" and params["approvedBy"] == "appro"
    assert params["requestId"] == str(req.pk) and str(params["version"]) == "2"
    # commitInfo only: the approved plan's fingerprint is what the run committed
    assert req.result["fingerprint"] == fingerprint


# --- 3. the history row links to its request -----------------------------------------------------


def test_history_links_the_restore_commit_to_its_request(table, table_path, users) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    req = restore_requests.approve_restore(request(table, users["analyst"]), users["approver"], "ok")
    restore_runs.run_restore(req.pk, restore_runs.local_planner)
    sync.sync_table(table.pk)
    req.refresh_from_db()
    assert req.result_version == 6
    page = browser(users["reader"]).get(f"/t/{table.slug}/history/").content.decode()
    assert f'href="/restores/{req.pk}/"' in page and f"request #{req.pk}" in page
    # a RESTORE not made by deltaweb is not linked; the lookup is one query whatever the rows
    from deltalake import write_deltalake

    from tests.web.restore_tables import rows

    write_deltalake(str(table_path), rows([999]), mode="append")
    DeltaTable(str(table_path)).restore(1)
    sync.sync_table(table.pk)
    commits = list(table.commits.order_by("-version").defer("commit_info"))
    with CaptureQueriesContext(connection) as queries:
        links = restore_requests.restore_ids_by_version(table, commits)
    assert links == {6: req.pk} and len(queries) == 1


# --- 4. admin links an approver can follow --------------------------------------------------------


def test_every_link_of_the_admin_change_page_opens_for_an_approver(table, users) -> None:
    import re

    call_command("create_roles", stdout=io.StringIO())
    for name in ("approver", "approver2"):
        users[name].is_staff = True
        users[name].save()
    req = restore_requests.approve_restore(request(table, users["analyst"]), users["approver"], "ok")
    console = browser(users["approver2"])
    page = console.get(f"/admin/tables/restorerequest/{req.pk}/change/").content.decode()
    assert f'href="/t/{table.slug}/"' in page  # the table: the app's page
    assert "/admin/auth/user/" not in page and "/admin/tables/table/" not in page
    assert "ana" in page and "appro" in page  # requester and approver, as text
    links = {h for h in re.findall(r'href="(/[^"#]*)', page) if not h.startswith("/static/")}
    assert links
    for href in sorted(links):
        assert console.get(href.replace("&amp;", "&")).status_code == 200, href


def test_a_retry_finds_a_commit_made_with_the_former_pk_derived_txn_id(table, table_path, users) -> None:
    from tables.delta.restore.commit import commit_restore
    from tables.delta.restore.plan import plan_restore

    req = restore_requests.approve_restore(request(table, users["analyst"]), users["approver"], "ok")
    # an attempt before txn_id existed committed with "deltaweb-restore-<pk>", then its worker died
    version = commit_restore(
        str(table_path), plan_restore(str(table_path), version=2), txn_id=f"deltaweb-restore-{req.pk}"
    )["version"]
    RestoreRequest.objects.filter(pk=req.pk).update(attempts=1)
    restore_runs.run_restore(req.pk, restore_runs.local_planner)
    req.refresh_from_db()
    assert req.status == S.SUCCEEDED and req.result_version == version and req.result["alreadyCommitted"]


def test_the_admin_approval_page_shows_the_plans_rows(table, users) -> None:
    import re

    call_command("create_roles", stdout=io.StringIO())
    users["approver2"].is_staff = True
    users["approver2"].save()
    req = request(table, users["analyst"])
    rows = req.plan["rowImpact"]
    page = browser(users["approver2"]).get(f"/admin/tables/restorerequest/{req.pk}/change/").content.decode()
    found = re.search(
        r'id="plan-rows".*?<th>whole table</th><td>(\d+)</td><td>(\d+)</td><td>(\d+)</td><td>(\d+)</td>', page, re.S
    )
    assert found, page[:2000]
    assert [int(x) for x in found.groups()] == [
        rows["rowsNow"],
        rows["rowsAfter"],
        rows["rowsAdded"],
        rows["rowsRemoved"],
    ]
