"""A pin's worker SIGKILLed while it writes the version into the pin store (the files placed, the
kept log not yet written: the `pin-placed` point of tables/services/jobs/faults.py), with a real
Celery worker on a real redis-server, SQLite shared with it.

The promise: the pin is never left "writing". The beat's sweep sees no sign of life (the
worker's heartbeat stopped with it), deletes what the dead worker left, says why in the pin's
audit trail and sends it again; a healthy worker then keeps the version, which delta-rs reads
from the kept table as it read the table's version. A pin given up on (its resumes spent) is
failed, "not protected", with the reason."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest

from tables.models import Pin, PinEvent, PinState, Table
from tables.services.access.roles import ANALYST
from tables.services.catalog import registration
from tables.services.pins import lifecycle as pins
from tables.services.sync import store as sync
from tests.core.builders import writable
from tests.faults import RUNS, wait_until
from tests.faults.test_worker_kills import fault_env, kill_at

deltalake = pytest.importorskip("deltalake")
pytestmark = pytest.mark.slow
VERSION = 5


def rows(path: str | Path, version: int | None = None) -> list[dict]:
    import pyarrow as pa

    table = deltalake.DeltaTable(str(path), version=version)
    return sorted(pa.table(table.to_pyarrow_table()).to_pylist(), key=repr)


@pytest.fixture
def pinned_table(settings, tmp_path, golden_copy) -> Table:
    src = tmp_path / "tables"
    src.mkdir()
    settings.DELTAWEB_ALLOWED_ROOTS = [str(src)]
    settings.DELTAWEB_PIN_STORE = str(tmp_path / "pins")
    path = writable(golden_copy("basic-with-inserts-deletes-checkpoint")).rename(src / "events")
    t = registration.register_table("events", str(path))
    sync.sync_table(t.pk)
    t.refresh_from_db()
    return t


def analyst(django_user_model):
    from django.contrib.auth.models import Group

    user = django_user_model.objects.create_user("ana")
    user.groups.add(Group.objects.get_or_create(name=ANALYST)[0])
    return user


def notes(pin: Pin) -> list[str]:
    return list(PinEvent.objects.filter(pin=pin).order_by("at", "pk").values_list("note", flat=True))


@RUNS
def test_a_pin_whose_worker_is_killed_is_resumed_by_the_sweep_then_failed_with_a_reason(
    celery_worker_factory, pinned_table, django_user_model, settings, tmp_path, run
) -> None:
    env = {**fault_env(tmp_path, "pin-placed"), "DELTAWEB_PIN_STORE": settings.DELTAWEB_PIN_STORE}
    user = analyst(django_user_model)
    expected = rows(pinned_table.location, VERSION)

    # killed with its files placed and no kept log: the sweep resumes it, saying why
    doomed = celery_worker_factory("doomed", env)
    pin = pins.create_pin(pinned_table, VERSION, "quarter end", "close", user, background=True)
    kill_at(doomed, tmp_path / "pin-placed")
    store = Path(pin.store_location)
    assert any(store.rglob("*.parquet")) and not (store / "_delta_log" / "00000000000000000000.json").exists()
    assert pins.sweep_pins(older_than=timedelta(seconds=60))["resumed"] == []  # its heartbeat was fresh
    time.sleep(1.5)
    assert pins.sweep_pins(older_than=timedelta(seconds=1))["resumed"] == [pin.pk]
    pin.refresh_from_db()
    assert pin.state == PinState.WRITING
    resumed = notes(pin)[-1]
    assert resumed.startswith("resumed by the sweep (1/2): no worker finished writing it") and "killed" in resumed
    assert not any(store.rglob("*.parquet"))  # what the dead worker left was deleted

    # killed again: its resumes spent, the sweep fails it, "not protected", with the reason
    (tmp_path / "pin-placed").unlink()
    doomed = celery_worker_factory("doomed-again", env)
    kill_at(doomed, tmp_path / "pin-placed")
    time.sleep(1.5)
    assert pins.sweep_pins(older_than=timedelta(seconds=1), resumes=1)["failed"] == [pin.pk]
    pin.refresh_from_db()
    assert pin.state == PinState.FAILED and pin.protection == pins.NOT_PROTECTED
    assert "no worker finished writing it" in pin.error and "given up" in pin.error
    assert notes(pin)[-1].startswith("not protected: no worker finished writing it")
    assert not any(store.rglob("*.parquet"))

    # a pin of the same version with a healthy worker: kept, and delta-rs reads it as the table's version
    celery_worker_factory("healthy", {"DELTAWEB_PIN_STORE": settings.DELTAWEB_PIN_STORE})
    again = pins.create_pin(pinned_table, VERSION, "quarter end, again", "close", user, background=True)
    again = wait_until(lambda: Pin.objects.filter(pk=again.pk).exclude(state=PinState.WRITING).first(), "the pin")
    assert again.state == PinState.ACTIVE, again.error
    assert rows(again.store_location) == expected
