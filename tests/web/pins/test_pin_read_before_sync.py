"""A pinned version whose commits a log cleanup took after the reachability answer was made
(no sync since): its schema is still read from its pin, as its summary is, not refused as a
version the log does not have."""

from __future__ import annotations

from pathlib import Path

import pytest

from tables.services.pins import lifecycle as pins
from tables.services.versions import read as versions
from tests.web.pins.test_pins import VERSION, api, table, users, vacuum_and_clean  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


def test_a_pinned_versions_schema_after_a_log_cleanup_no_sync_has_seen(client, users, table):  # noqa: F811
    pin = pins.create_pin(table, VERSION, "quarter-end", "Q3 close", users["analyst"])
    client.force_login(users["analyst"])
    assert client.get(f"/t/{table.slug}/history/").status_code == 200  # the answer made before the cleanup
    vacuum_and_clean(Path(table.location))
    versions._SNAPSHOTS.clear()
    got = api(client, users["analyst"], "get", f"/api/tables/{table.pk}/versions/{VERSION}/")
    assert got.status_code == 200 and got.json()["readFrom"] == {"pin": pin.pk, "name": "quarter-end"}
    schema = api(client, users["analyst"], "get", f"/api/tables/{table.pk}/schema/?version={VERSION}")
    assert schema.status_code == 200, schema.content
    assert schema.json()["pinned"] == "quarter-end" and schema.json()["columns"]
