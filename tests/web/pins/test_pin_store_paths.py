"""Where a pin's kept table lives: after the database lost its pins (reset, restored from an
older backup) the ids start again, and a new pin must neither be refused by the kept table a
lost row left behind nor be written onto it; pins made before keep reading their stored path."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management.color import no_style
from django.db import connection

from tables.models import Pin, PinEvent, PinState
from tables.services.pins import lifecycle as pins
from tables.services.pins import queries as pin_queries
from tests.web.pins.test_pins import VERSION, api, rows, table, users  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


def _lose_the_pins() -> None:
    """What a database reset does to the pins: their rows gone, their ids given again from 1
    (the kept tables in the pin store stay: the database never owned those bytes)."""
    tables = [PinEvent._meta.db_table, Pin._meta.db_table]
    connection.ops.execute_sql_flush(connection.ops.sql_flush(no_style(), tables, reset_sequences=True))


def test_a_pin_after_a_database_reset_never_meets_what_an_old_one_left(client, users, table):  # noqa: F811
    _lose_the_pins()  # this pin's id is then the first one too
    old = pins.create_pin(table, VERSION, "quarter end", "Q3", users["analyst"])
    left = Path(old.store_location)
    expected = rows(left)  # delta-rs reads the kept table
    _lose_the_pins()
    r = api(client, users["analyst"], "post", f"/api/tables/{table.pk}/pins/",
            {"version": VERSION, "name": "quarter end", "reason": "Q3 again"})  # fmt: skip
    assert r.status_code == 201, r.content
    new = Pin.objects.get(pk=r.json()["id"])
    assert new.pk == old.pk  # the same id: only the path tells the two apart
    assert new.state == PinState.ACTIVE and Path(new.store_location) != left
    assert rows(new.store_location) == expected
    assert rows(left) == expected  # the leftover is untouched


def test_a_pin_reads_the_path_it_stored(client, users, table, settings):  # noqa: F811
    """A pin made before the paths had their random part (<store>/<table>/<pin>-v<version>) is
    still read where it was written: the path is the pin's, never derived again."""
    pin = pins.create_pin(table, VERSION, "older", "kept the old way", users["analyst"])
    before = Path(pin.store_location)
    old_style = Path(settings.DELTAWEB_PIN_STORE) / str(table.pk) / f"{pin.pk}-v{pin.version}"
    before.rename(old_style)
    Pin.objects.filter(pk=pin.pk).update(store_location=str(old_style))
    snap = pin_queries.pinned_snapshot(table, VERSION)
    assert snap is not None and snap.version == VERSION and snap.location.rstrip("/").endswith(old_style.name)
    assert pin_queries.kept_location(pin.pk) == str(old_style)
