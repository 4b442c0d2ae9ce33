"""A version whose files delta-rs's VACUUM removed, and that no pin keeps, cannot be pinned: a
pin copies the version from the table, and time travel to it is impossible. Its page offers no
pin and says why; the API and the page's form refuse one before anything is written. A version
a pin already keeps (the table lost it) cannot be pinned a second time; the latest version
still can."""

from __future__ import annotations

from pathlib import Path

import pytest

from tables.models import Pin
from tables.services.pins import lifecycle as pins
from tables.services.sync import store as sync
from tables.services.versions import read as versions
from tests.web.pins.test_pins import api, table, users  # noqa: F401 (fixtures)

deltalake = pytest.importorskip("deltalake")

pytestmark = pytest.mark.django_db
KEPT = 5  # pinned before the VACUUM


def _vacuum(table) -> None:  # noqa: F811
    dt = deltalake.DeltaTable(table.location)
    assert dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    sync.sync_table(table.pk)
    table.refresh_from_db()
    versions._SNAPSHOTS.clear()


def test_a_vacuumed_version_offers_no_pin_and_says_why(client, users, table, settings):  # noqa: F811
    keeper = pins.create_pin(table, KEPT, "kept", "before the vacuum", users["analyst"])
    _vacuum(table)
    client.force_login(users["analyst"])
    reach = client.get(f"/api/tables/{table.pk}/reachability/?limit=100").json()["results"]
    gone = next(e["version"] for e in reach if not e["readable"])  # files removed, no pin keeps it
    assert gone != KEPT
    peer = deltalake.DeltaTable(table.location, version=gone)
    with pytest.raises(Exception, match=r"(?i)not found|no such file|missing|does not exist"):
        peer.to_pyarrow_table()  # delta-rs cannot time travel to it either

    page = client.get(f"/t/{table.slug}/v/{gone}/").content.decode()
    assert 'id="pin-form"' not in page and "Pin this version…" not in page
    assert 'id="pin-refused"' in page and "Pin this version: not possible" in page
    assert f"Version {gone} of {table.name} cannot be pinned" in page
    assert "time travel to it is impossible" in page and "removed" in page

    store = Path(settings.DELTAWEB_PIN_STORE)
    before = sorted(store.rglob("*"))
    r = api(client, users["analyst"], "post", f"/api/tables/{table.pk}/pins/",
            {"version": gone, "name": "too late", "reason": "after the vacuum"})  # fmt: skip
    assert r.status_code == 422, r.content
    error = r.json()["error"]
    assert error["code"] == "version_unreadable"
    assert f"Version {gone} of {table.name} cannot be pinned" in error["message"]
    assert "time travel to it is impossible" in error["message"]
    assert str(store) not in error["message"] and table.location not in error["message"]
    # the page's form (posted all the same) is refused with the same words, nothing made
    r = client.post(f"/t/{table.slug}/v/{gone}/pin/", {"name": "too late", "reason": "x"}, follow=True)
    assert f"Version {gone} of {table.name} cannot be pinned" in r.content.decode()
    assert list(Pin.objects.filter(table=table)) == [keeper]
    assert sorted(store.rglob("*")) == before

    # the version a pin keeps: readable from it, but not pinned again
    page = client.get(f"/t/{table.slug}/v/{KEPT}/").content.decode()
    assert 'id="version-kept"' in page and 'id="pin-form"' not in page
    assert "pin kept already keeps it" in page
    again = api(client, users["analyst"], "post", f"/api/tables/{table.pk}/pins/",
                {"version": KEPT, "name": "twice", "reason": "again"})  # fmt: skip
    assert again.status_code == 422 and again.json()["error"]["code"] == "version_unreadable"

    # the latest version is still offered, and pinned
    latest = table.last_synced_version
    page = client.get(f"/t/{table.slug}/v/{latest}/").content.decode()
    assert 'id="pin-form"' in page and 'id="pin-refused"' not in page
    ok = api(client, users["analyst"], "post", f"/api/tables/{table.pk}/pins/",
             {"version": latest, "name": "latest", "reason": "now"})  # fmt: skip
    assert ok.status_code == 201 and ok.json()["state"] == "active"
