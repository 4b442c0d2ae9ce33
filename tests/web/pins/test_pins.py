"""Pins: a version pinned through the API survives delta-rs's VACUUM (retention 0) and log
cleanup of the table; deltaweb then reads it from the pin store (its summary, files and schema,
the preview's parameters) and delta-rs reads the kept table with the same rows. Removing a pin
before its expiry needs an approver, the audit trail says who did what; the pages show pins on
the version page, History, Versions (with the bytes each pin alone keeps in the forecast) and
the Overview's map of what can be read; `manage.py pin` makes one and expires due ones."""

from __future__ import annotations

import io
import json
import os
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from tables.delta.snapshot.state import load_snapshot
from tables.models import Pin, PinEvent, PinState, Table
from tables.services.access.roles import ANALYST, APPROVER
from tables.services.catalog import registration
from tables.services.pins import lifecycle as pins
from tables.services.pins import queries as pin_queries
from tables.services.pins import store as pin_store
from tables.services.sync import store as sync
from tests.core.builders import writable
from tests.web.kept_tables import pin_place

deltalake = pytest.importorskip("deltalake")

pytestmark = pytest.mark.django_db
VERSION = 5
OLD = 90 * 86_400


def rows(path: str | Path, version: int | None = None) -> list[tuple]:
    import pyarrow as pa

    table = deltalake.DeltaTable(str(path), version=version)
    batches = deltalake.QueryBuilder().register("t", table).execute("select * from t").read_all()
    return sorted((tuple(sorted(r.items())) for r in pa.table(batches).to_pylist()), key=repr)


def vacuum_and_clean(path: Path) -> None:
    for name in os.listdir(path / "_delta_log"):
        os.utime(path / "_delta_log" / name, (time.time() - OLD,) * 2)
    dt = deltalake.DeltaTable(str(path))
    assert dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    dt.cleanup_metadata()


@pytest.fixture
def users(django_user_model) -> dict:
    """Users signed in with force_login: no password, so no hashing (a fifth of a second each)."""
    from django.contrib.auth.models import Group

    def user(name: str, group: str | None = None):
        u = django_user_model.objects.create_user(name)
        if group:
            u.groups.add(Group.objects.get_or_create(name=group)[0])
        return u

    return {
        "analyst": user("ana", ANALYST),
        "approver": user("appro", APPROVER),
        "approver2": user("appro2", APPROVER),
        "reader": user("reader"),
    }


@pytest.fixture
def table(settings, tmp_path, golden_copy) -> Table:
    src = pin_place(settings, tmp_path)
    path = writable(golden_copy("basic-with-inserts-deletes-checkpoint"))
    path = path.rename(src / "events")
    t = registration.register_table("events", str(path))
    sync.sync_table(t.pk)
    t.refresh_from_db()
    return t


def api(client, user, method: str, url: str, body: dict | None = None):
    client.force_login(user)
    call = getattr(client, method)
    return call(url, data=json.dumps(body or {}), content_type="application/json") if method == "post" else call(url)


def test_a_pin_keeps_its_version_through_vacuum_and_log_cleanup(client, users, table, settings):
    src = Path(table.location)
    expected = rows(src, VERSION)
    r = api(client, users["analyst"], "post", f"/api/tables/{table.pk}/pins/",
            {"version": VERSION, "name": "quarter-end", "reason": "Q3 close"})  # fmt: skip
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["state"] == "active" and body["protection"] == "hard links" and body["bytesCopied"] == 0
    assert body["events"][0]["actor"] == "ana"
    pin = Pin.objects.get(pk=body["id"])
    assert pin.store_location.startswith(settings.DELTAWEB_PIN_STORE)
    assert "store" not in json.dumps(body).lower()  # the server's directories are not told
    # the same name again: refused, nothing kept twice
    again = api(client, users["analyst"], "post", f"/api/tables/{table.pk}/pins/",
                {"version": 3, "name": "quarter-end", "reason": "again"})  # fmt: skip
    assert again.status_code == 409 and again.json()["error"]["code"] == "pin_exists"

    vacuum_and_clean(src)
    # the sync that follows: the reachability answer the refused pin above made holds until then
    sync.sync_table(table.pk)
    table.refresh_from_db()
    with pytest.raises(deltalake.exceptions.DeltaError):
        rows(src, VERSION)  # the table itself lost the version
    assert rows(pin.store_location) == expected  # delta-rs reads the kept table

    from tables.services.versions import read as versions

    versions._SNAPSHOTS.clear()
    got = api(client, users["analyst"], "get", f"/api/tables/{table.pk}/versions/{VERSION}/")
    assert got.status_code == 200, got.content
    assert got.json()["version"] == VERSION and got.json()["numFiles"] == body["files"]
    schema = api(client, users["analyst"], "get", f"/api/tables/{table.pk}/schema/?version={VERSION}")
    assert schema.status_code == 200 and schema.json()["pinned"] == "quarter-end"
    fields = [f["name"] for f in load_snapshot(pin.store_location, 0).metadata.schema["fields"]]
    assert [c["path"][-1] for c in schema.json()["columns"]] == fields and fields
    page = client.get(f"/t/{table.slug}/v/{VERSION}/")
    assert page.status_code == 200 and b"quarter-end" in page.content and b'id="pins"' in page.content

    from tables.models import Job
    from tables.services.data import jobs as data_jobs

    job = data_jobs.start_preview(table, VERSION, users["analyst"])
    assert Job.objects.get(pk=job.pk).params["pin"] == pin.pk  # the preview reads the pin store


def test_pins_on_history_versions_forecast_and_overview(client, users, table):
    pin = pins.create_pin(table, VERSION, "training set", "model v2", users["analyst"])
    vacuum_and_clean(Path(table.location))
    sync.sync_table(table.pk)
    client.force_login(users["analyst"])
    history = client.get(f"/t/{table.slug}/history/").content.decode()
    assert 'class="badge pinned"' in history and "training set" in history
    versions = client.get(f"/t/{table.slug}/versions/?vacuum_retention=0+hours").content.decode()
    assert 'id="table-pins"' in versions and "training set" in versions
    held = pin_queries.held_bytes(table, [pin], load_snapshot(table.location))[pin.pk]
    assert held > 0 and f"({held} bytes)" in versions
    overview = client.get(f"/t/{table.slug}/").content.decode()
    assert 'id="reach-pinned"' in overview
    reach = api(client, users["analyst"], "get", f"/api/tables/{table.pk}/reachability/").json()
    assert reach["pinnedVersions"] == [VERSION]


def test_removing_a_pin_needs_an_approver_and_is_audited(client, users, table):
    pin = pins.create_pin(table, VERSION, "legal hold", "case 42", users["analyst"])
    kept = Path(pin.store_location)
    r = api(client, users["analyst"], "post", f"/api/pins/{pin.pk}/unpin/", {"reason": "case closed"})
    assert r.status_code == 200 and r.json()["state"] == "unpin_requested"
    assert kept.is_dir()  # nothing deleted before an approver accepts
    assert api(client, users["analyst"], "post", f"/api/pins/{pin.pk}/approve/").status_code == 403
    # an approver who asked cannot accept their own removal
    other = pins.create_pin(table, 3, "other", "why", users["analyst"])
    pins.request_unpin(other, users["approver"], "mine")
    refused = api(client, users["approver"], "post", f"/api/pins/{other.pk}/approve/")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "own_request"
    ok = api(client, users["approver"], "post", f"/api/pins/{pin.pk}/approve/", {"comment": "confirmed"})
    assert ok.status_code == 200 and ok.json()["state"] == "removed" and ok.json()["decidedBy"] == "appro"
    assert not any(p.is_file() for p in kept.rglob("*"))
    assert os.path.exists(Path(table.location) / "_delta_log")  # the table's own files stay
    trail = [(e.actor.username if e.actor else None, e.to_state) for e in PinEvent.objects.filter(pin=pin)]
    assert trail == [("ana", "writing"), ("ana", "active"), ("ana", "unpin_requested"), ("appro", "removed")]
    # a rejection keeps the pin and says why
    kept_pin = api(client, users["approver2"], "post", f"/api/pins/{other.pk}/reject/", {"comment": "still needed"})
    assert kept_pin.status_code == 200 and kept_pin.json()["state"] == "active"
    assert api(client, users["reader"], "post", f"/api/tables/{table.pk}/pins/",
               {"version": 1, "name": "x", "reason": "y"}).status_code == 403  # fmt: skip


def test_removals_in_the_admin_console(client, users, table):
    from django.core.management import call_command as cc

    cc("create_roles")
    pin = pins.create_pin(table, VERSION, "audit", "keep", users["analyst"])
    pins.request_unpin(pin, users["analyst"], "done")
    users["approver"].is_staff = True
    users["approver"].save()
    client.force_login(users["approver"])
    r = client.post(
        "/admin/tables/pin/",
        {"action": "approve_removal", "_selected_action": [pin.pk], "apply": "1", "comment": "ok"},
    )
    assert r.status_code == 302
    pin.refresh_from_db()
    assert pin.state == PinState.REMOVED and pin.decided_by == users["approver"]


def test_the_pin_command_and_expiry(users, table):
    out = io.StringIO()
    call_command("pin", table.slug, "3", "--name", "nightly", "--reason", "audit", "--as", "ana",
                 "--expires", (timezone.now() + timedelta(days=1)).isoformat(), stdout=out)  # fmt: skip
    made = json.loads(out.getvalue())
    assert made["version"] == 3 and made["createdBy"] == "ana"
    Pin.objects.filter(pk=made["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    out = io.StringIO()
    call_command("pin", "--expire", stdout=out)
    assert json.loads(out.getvalue()) == {"expired": 1}
    assert Pin.objects.get(pk=made["id"]).state == PinState.EXPIRED


def test_a_vacuum_that_meets_a_pin_is_an_alert(users, table, django_capture_on_commit_callbacks):
    """The sync's look finds the files delta-rs's VACUUM deleted; the rule names the VACUUM's
    commit, the pin and the bytes the pin alone now keeps (the kept files gone from the table)."""
    from alerts.models import Alert
    from tables.models import Commit

    src = Path(table.location)
    pin = pins.create_pin(table, VERSION, "close", "Q3", users["analyst"])
    kept = load_snapshot(pin.store_location, 0)
    sizes = dict(zip(kept.file_paths(), kept.files.column("size").to_pylist(), strict=True))
    dt = deltalake.DeltaTable(str(src))
    deleted = dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    gone = sum(sizes[p] for p in deleted if p in sizes)
    assert gone > 0
    with django_capture_on_commit_callbacks(execute=True):
        sync.sync_table(table.pk)
    alert = Alert.objects.get(table=table, rule="pinned_vacuum")
    end = Commit.objects.get(table=table, operation="VACUUM END")
    assert alert.version == end.version
    assert f"VACUUM END at version {end.version}" in alert.explanation
    assert f"pin close (version {VERSION}) alone now keeps {gone} bytes" in alert.explanation


def test_pinning_and_asking_to_remove_from_the_version_page(client, users, table):
    client.force_login(users["analyst"])
    r = client.post(f"/t/{table.slug}/v/3/pin/", {"name": "audit 2024", "reason": "the auditors", "expires": ""})
    assert r.status_code == 302 and r["Location"].endswith(f"/t/{table.slug}/v/3/")
    pin = Pin.objects.get(table=table, name="audit 2024")
    assert (pin.version, pin.created_by, pin.protection) == (3, users["analyst"], "hard links")
    page = client.get(r["Location"]).content.decode()
    assert f'id="pin-{pin.pk}"' in page and "Ask to remove" in page
    # a bad form changes nothing and says why
    client.post(f"/t/{table.slug}/v/3/pin/", {"name": "", "reason": "x"})
    assert Pin.objects.filter(table=table).count() == 1
    client.post(f"/pins/{pin.pk}/unpin/", {"text": "audit over"})
    pin.refresh_from_db()
    assert pin.state == PinState.UNPIN_REQUESTED
    client.force_login(users["approver"])
    page = client.get(f"/t/{table.slug}/v/3/").content.decode()
    assert "Approve removal" in page
    client.post(f"/pins/{pin.pk}/approve/", {"text": ""})
    pin.refresh_from_db()
    assert pin.state == PinState.REMOVED and pin.decided_by == users["approver"]


@pytest.mark.parametrize("locked", [False, True], ids=["copies", "object-lock"])
def test_a_pin_of_an_s3_table(s3_server, monkeypatch, settings, users, locked, django_capture_on_commit_callbacks):
    """On moto: a pin store prefix in the table's bucket gets server-side copies; a bucket with
    Object Lock gets legal holds instead. After delta-rs's VACUUM (and, with holds, the sync
    that notices it and copies the held versions into the pin store), delta-rs reads the kept
    table as version 1 was, and so does deltaweb."""
    import uuid

    from tests.conftest import s3_buckets
    from tests.core.test_keep_s3 import rows as s3_rows
    from tests.core.test_keep_s3 import write_table

    bucket = "pins-app-locked" if locked else "pins-app"
    client = s3_buckets(s3_server, monkeypatch, settings)
    if bucket not in {b["Name"] for b in client.list_buckets()["Buckets"]}:
        client.create_bucket(Bucket=bucket, **({"ObjectLockEnabledForBucket": True} if locked else {}))
    settings.DELTAWEB_ALLOWED_ROOTS = [f"s3://{bucket}/allowed"]
    settings.DELTAWEB_PIN_STORE = f"s3://{bucket}/allowed/pins"
    location = f"s3://{bucket}/allowed/t-{uuid.uuid4().hex[:8]}"
    write_table(s3_server, location)
    expected = s3_rows(s3_server, location, 1)
    table = registration.register_table(f"s3-{uuid.uuid4().hex[:6]}", location)
    sync.sync_table(table.pk)
    pin = pins.create_pin(table, 1, "s3 pin", "why", users["analyst"])
    assert pin.state == PinState.WRITING  # an object store: a worker keeps it (as the task does here)
    assert pin_store.write_pin(pin.pk)["state"] == PinState.ACTIVE
    pin.refresh_from_db()
    assert pin.protection == ("legal holds" if locked else "server-side copies") and pin.bytes_copied == 0
    dt = deltalake.DeltaTable(location, storage_options=s3_server.storage_options())
    assert dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    if locked:  # the held objects are gone from the table: the sync's look copies their held versions
        with django_capture_on_commit_callbacks(execute=True):
            sync.sync_table(table.pk)
        note = PinEvent.objects.filter(pin=pin).order_by("-pk").values_list("note", flat=True).first()
        assert "held versions copied into the pin store" in note
        held = json.loads(
            client.get_object(Bucket=bucket, Key=pin.store_location.split("/", 3)[3] + "/_kept/holds.json")[
                "Body"
            ].read()
        )
        for h in held["objects"]:  # still held: the copies do not release them
            legal = client.get_object_legal_hold(Bucket=bucket, Key=h["key"], VersionId=h["versionId"])
            assert legal["LegalHold"]["Status"] == "ON"
    assert s3_rows(s3_server, pin.store_location) == expected
    kept = pin_queries.pinned_snapshot(table, 1)  # what deltaweb reads of the version now
    assert kept.version == 1 and kept.num_files == len(
        deltalake.DeltaTable(pin.store_location, storage_options=s3_server.storage_options()).file_uris()
    )


def test_a_pin_written_by_a_worker_fails_clearly(users, table):
    """In the background (as on an object store), a version that cannot be kept makes the pin
    failed, saying why; nothing is left in the store."""
    pin = pins.create_pin(table, 999, "too far", "why", users["analyst"], background=True)
    assert pin.state == PinState.WRITING
    assert "failed" in pin_store.write_pin(pin.pk)
    pin.refresh_from_db()
    assert pin.state == PinState.FAILED and "999" in pin.error
    assert not Path(pin.store_location).exists() or not any(Path(pin.store_location).rglob("*.json"))
    assert pin_store.write_pin(pin.pk) == {"skipped": True}  # claimed once: a failed pin is not written again


def test_pins_are_never_written_where_they_may_not_be(client, users, table, settings, tmp_path, golden_copy):
    """A pin store inside a registered table, at the allowed root itself, or under /etc: the
    pin is refused with one line saying what to do, no pin row is left and nothing is written
    there. The app refuses to start with such a store."""
    import subprocess
    import sys

    root = settings.DELTAWEB_ALLOWED_ROOTS[0]
    src = writable(golden_copy("table-with-columnmapping-mode-name")).rename(Path(root) / "other")
    registration.register_table("other", str(src))  # another registered table
    before = sorted(p.relative_to(src) for p in src.rglob("*"))
    (tmp_path / "alias").symlink_to(src, target_is_directory=True)
    for store in (str(src / "pins"), str(tmp_path / "alias" / "pins"), root, "/etc/pins"):
        settings.DELTAWEB_PIN_STORE = store
        r = api(client, users["analyst"], "post", f"/api/tables/{table.pk}/pins/",
                {"version": VERSION, "name": f"p{len(store)}", "reason": "why"})  # fmt: skip
        assert r.status_code == 503, (store, r.content)
        error = r.json()["error"]
        assert error["code"] == "pin_store_refused", error
        assert "an administrator must set DELTAWEB_PIN_STORE" in error["message"] and store not in error["message"]
        assert not Pin.objects.exists()
    assert sorted(p.relative_to(src) for p in src.rglob("*")) == before
    assert not os.path.exists("/etc/pins") and not (Path(root) / "_delta_log").exists()

    env = {**os.environ, "DELTAWEB_PIN_STORE": "/etc/pins", "DELTAWEB_ALLOWED_ROOTS": root}
    started = subprocess.run(
        [sys.executable, "manage.py", "check"], env=env, capture_output=True, text=True, timeout=120
    )
    assert started.returncode != 0
    assert (
        "ImproperlyConfigured: the pin store /etc/pins is a system directory; set DELTAWEB_PIN_STORE" in started.stderr
    )
    env["DELTAWEB_PIN_STORE"] = str(src / "pins")
    started = subprocess.run(
        [sys.executable, "manage.py", "check"], env=env, capture_output=True, text=True, timeout=120
    )
    assert f"lies inside the Delta table {src}" in started.stderr
