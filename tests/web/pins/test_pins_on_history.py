"""The History tab's Readable column follows the pins, with no new reachability window: a
version pinned (written by a worker, as on an object store) reads plain readable while the table
gives it, "kept by pin NAME" once a VACUUM took its files, still so while its removal awaits an
approver, and "N files vacuumed" as soon as the removal is approved, with no sync between."""

from __future__ import annotations

import re

import pytest

from tables.models import PinState
from tables.services.pins import lifecycle as pins
from tables.services.pins import store as pin_store
from tables.services.sync import store as sync
from tables.services.versions import read as versions
from tests.web.pins.test_pins import VERSION, table, users  # noqa: F401 (fixtures)

deltalake = pytest.importorskip("deltalake")

pytestmark = pytest.mark.django_db


def _readable(client, table, version: int) -> str:  # noqa: F811
    """The Readable cell of `version`'s row on the History tab, as its text."""
    html = client.get(f"/t/{table.slug}/history/?cols=readable&size=100").content.decode()
    rows = re.findall(r"<tr[^>]*>.*?</tr>", html, re.S)
    row = next((r for r in rows if re.search(rf"/v/{version}/\">{version}</a>", r)), None)
    assert row, f"no row for version {version}"
    cell = re.search(r'<td class="nowrap reach">(.*?)</td>', row, re.S)
    assert cell, row
    return " ".join(re.sub(r"<[^>]+>", " ", cell.group(1)).split())


def test_the_readable_column_follows_a_pin_made_and_removed(client, users, table):  # noqa: F811
    client.force_login(users["analyst"])
    assert _readable(client, table, VERSION) == "✓"
    # a pin the worker writes (as on an object store)
    pin = pins.create_pin(table, VERSION, "quarter end", "Q3", users["analyst"], background=True)
    assert pin_store.write_pin(pin.pk)["state"] == PinState.ACTIVE
    dt = deltalake.DeltaTable(table.location)
    assert dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    sync.sync_table(table.pk)
    versions._SNAPSHOTS.clear()
    assert _readable(client, table, VERSION) == "✓ kept by pin quarter end"
    pins.request_unpin(pin, users["analyst"], "closed")
    assert _readable(client, table, VERSION) == "✓ kept by pin quarter end"  # awaiting an approver: still kept
    pins.approve_unpin(pin, users["approver"], "ok")
    after = _readable(client, table, VERSION)
    assert re.fullmatch(r"\d+ files? vacuumed", after), after
