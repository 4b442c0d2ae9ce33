"""A pin's own lifecycle beyond keeping it: the requester withdraws their removal request (page,
API), the approver decides on the pin's own admin page with a comment the pin's pages then
show, a removed pin no longer says what held it, and a pin the queue never delivered is
resumed by the sweep, then failed as "not protected" with the reason."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from tables.models import Pin, PinEvent, PinState
from tables.services.errors import ServiceError
from tables.services.pins import lifecycle as pins
from tests.web.pins.test_pins import VERSION, api, table, users  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


def test_the_requester_withdraws_their_removal_request(client, users, table):  # noqa: F811
    pin = pins.create_pin(table, VERSION, "quarter end", "close", users["analyst"])
    pins.request_unpin(pin, users["analyst"], "not needed")
    # only the requester: another analyst or an approver cannot withdraw it
    refused = api(client, users["approver"], "post", f"/api/pins/{pin.pk}/withdraw/")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "permission_denied"
    client.force_login(users["analyst"])
    page = client.get(f"/t/{table.slug}/v/{VERSION}/").content.decode()
    assert f'id="withdraw-{pin.pk}"' in page
    r = client.post(f"/pins/{pin.pk}/withdraw/", follow=True)
    assert "your removal request is withdrawn" in r.content.decode()
    pin.refresh_from_db()
    assert pin.state == PinState.ACTIVE and pin.removal_requested_by is None and pin.removal_reason == ""
    trail = list(PinEvent.objects.filter(pin=pin).values_list("to_state", "note"))
    assert trail[-1] == (PinState.ACTIVE, "removal request withdrawn by its requester")
    again = api(client, users["analyst"], "post", f"/api/pins/{pin.pk}/withdraw/")  # nothing to withdraw now
    assert again.status_code == 409 and again.json()["error"]["code"] == "invalid_state"
    # through the API, after a new request
    pins.request_unpin(pin, users["analyst"], "really not needed")
    r = api(client, users["analyst"], "post", f"/api/pins/{pin.pk}/withdraw/")
    assert r.status_code == 200 and r.json()["state"] == "active" and r.json()["removalRequestedBy"] is None
    schema = client.get("/api/schema/").content.decode()
    assert "/api/pins/{id}/withdraw/" in schema


def test_the_approver_decides_on_the_pins_own_admin_page(client, users, table):  # noqa: F811
    call_command("create_roles")
    users["approver"].is_staff = True
    users["approver"].save()
    kept = pins.create_pin(table, VERSION, "kept", "close", users["analyst"])
    gone = pins.create_pin(table, VERSION, "gone", "close", users["analyst"])
    for pin in (kept, gone):
        pins.request_unpin(pin, users["analyst"], "done with it")
    client.force_login(users["approver"])
    page = client.get(f"/admin/tables/pin/{kept.pk}/change/").content.decode()
    assert 'id="pin-approve"' in page and 'id="pin-reject"' in page and 'name="_save"' not in page
    r = client.post(f"/admin/tables/pin/{kept.pk}/reject/", {"comment": "the audit still needs it"})
    assert r.status_code == 302
    r = client.post(f"/admin/tables/pin/{gone.pk}/approve/", {"comment": "confirmed with finance"})
    assert r.status_code == 302
    kept.refresh_from_db()
    gone.refresh_from_db()
    assert kept.state == PinState.ACTIVE and gone.state == PinState.REMOVED
    page = client.get(f"/admin/tables/pin/{gone.pk}/change/").content.decode()
    assert "appro: removal approved: confirmed with finance" in page and 'id="pin-approve"' not in page
    # the version page: the comments shown, the removed pin holds nothing any more
    client.force_login(users["analyst"])
    page = client.get(f"/t/{table.slug}/v/{VERSION}/").content.decode()
    assert "removal rejected: the audit still needs it" in page and "removal approved: confirmed with finance" in page
    removed_row = page.split(f'id="pin-{gone.pk}"', 1)[1].split("</tr>", 1)[0]
    assert "released, its kept files deleted" in removed_row and "hard links" not in removed_row
    held_cell = removed_row.split('class="pin-held">', 1)[1].split("</td>", 1)[0]
    assert held_cell == "nothing: released, its kept files deleted", held_cell
    body = api(client, users["analyst"], "get", f"/api/pins/{gone.pk}/").json()
    assert body["decisionComment"] == "removal approved: confirmed with finance"
    assert body["heldBy"].startswith("nothing")
    # the requester cannot decide on their own page either: no buttons, a word why
    client.force_login(users["analyst"])


def test_a_pin_the_queue_never_delivered_is_resumed_then_failed_not_protected(users, table, monkeypatch):  # noqa: F811
    from django.conf import settings

    from deltaweb.celery import app
    from tables.services.jobs import lifecycle as jobs

    # the beat runs the sweep as a registered task
    assert settings.CELERY_BEAT_SCHEDULE["sweep-pins"]["task"] == "tables.sweep_pins"
    import tables.tasks  # noqa: F401 (registers the tasks)

    assert "tables.sweep_pins" in app.tasks

    def down(*_a, **_k):
        raise ConnectionError("the broker is down")

    monkeypatch.setattr(jobs, "send", down)  # an injected failure: the queue is unreachable
    pin = pins.create_pin(table, VERSION, "nightly", "why", users["analyst"], background=True)
    pins._send(pin.pk)  # (on_commit does not run inside the test's transaction)
    pin.refresh_from_db()
    assert pin.state == PinState.WRITING and "the task queue is unreachable" in pin.error
    assert pins.sweep_pins()["resumed"] == []  # not silent for long yet
    PinEvent.objects.filter(pin=pin).update(at=timezone.now() - timedelta(hours=1))
    assert pins.sweep_pins()["resumed"] == [pin.pk]
    PinEvent.objects.filter(pin=pin).update(at=timezone.now() - timedelta(hours=1))
    out = io.StringIO()
    call_command("pin", "--sweep", stdout=out)
    assert json.loads(out.getvalue())["resumed"] == [pin.pk]
    PinEvent.objects.filter(pin=pin).update(at=timezone.now() - timedelta(hours=1))
    assert pins.sweep_pins()["failed"] == [pin.pk]
    pin.refresh_from_db()
    assert pin.state == PinState.FAILED and pin.protection == pins.NOT_PROTECTED
    assert "no worker finished writing it" in pin.error and "resumed 2 times, given up" in pin.error
    notes = list(PinEvent.objects.filter(pin=pin).order_by("pk").values_list("note", flat=True))
    assert notes[1].startswith("resumed by the sweep (1/2)") and notes[-1].startswith("not protected:")
    assert pins.held_by(pin) == "not protected"
    with pytest.raises(ServiceError):
        pins.request_unpin(pin, users["analyst"], "x")
    assert Pin.objects.get(pk=pin.pk).state == PinState.FAILED
