"""A table's pin list (GET /api/tables/{id}/pins/, up to 500 pins) costs the same few queries
however many pins it lists, each pin's audit trail and its approver's last decision included."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tables.services.pins import lifecycle as pins
from tests.web.pins.test_pins import api, table, users  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


def _listed(client, users, table) -> tuple[int, list[dict]]:  # noqa: F811
    client.force_login(users["reader"])
    client.get("/api/tables/")  # the session's first queries are not the list's
    with CaptureQueriesContext(connection) as queries:
        r = api(client, users["reader"], "get", f"/api/tables/{table.pk}/pins/")
    assert r.status_code == 200, r.content
    return len(queries), r.json()["pins"]


def test_the_pin_list_costs_the_same_queries_for_2_pins_and_for_20(client, users, table):  # noqa: F811
    made = []
    for i in range(20):
        made.append(pins.create_pin(table, i % 6, f"pin {i}", f"why {i}", users["analyst"]))
        if len(made) == 2:
            few, listed = _listed(client, users, table)
            assert len(listed) == 2
    # removals decided: rejected (a comment), approved, and one still awaiting a decision
    for pin in made[:6]:
        pins.request_unpin(pin, users["analyst"], "done")
    pins.reject_unpin(made[0], users["approver"], "the audit still needs it")
    pins.request_unpin(made[0], users["analyst"], "done now")
    pins.approve_unpin(made[0], users["approver"], "confirmed")
    pins.reject_unpin(made[1], users["approver"], "keep it")
    pins.approve_unpin(made[2], users["approver"])
    many, listed = _listed(client, users, table)
    assert len(listed) == 20
    assert many == few, f"{few} queries for 2 pins, {many} for 20"
    assert many <= 12
    by_name = {p["name"]: p for p in listed}
    # what each pin says is what it said one query at a time
    assert by_name["pin 0"]["decisionComment"] == "removal approved: confirmed"
    assert by_name["pin 0"]["state"] == "removed" and by_name["pin 0"]["decidedBy"] == "appro"
    assert by_name["pin 1"]["decisionComment"] == "removal rejected: keep it"
    assert by_name["pin 2"]["decisionComment"] == "removal approved"
    assert by_name["pin 3"]["decisionComment"] is None and by_name["pin 3"]["state"] == "unpin_requested"
    assert by_name["pin 3"]["removalRequestedBy"] == "ana"
    trail = [(e["actor"], e["from"], e["to"]) for e in by_name["pin 0"]["events"]]
    assert trail == [
        ("ana", None, "writing"),
        ("ana", "writing", "active"),
        ("ana", "active", "unpin_requested"),
        ("appro", "unpin_requested", "active"),
        ("ana", "active", "unpin_requested"),
        ("appro", "unpin_requested", "removed"),
    ]
    for p in listed:  # each pin's trail is its own
        assert p["events"][0]["note"].startswith(f"pin version {p['version']}: why {p['name'].split()[1]}")
    one = api(client, users["reader"], "get", f"/api/pins/{made[1].pk}/").json()
    assert one == by_name["pin 1"]
