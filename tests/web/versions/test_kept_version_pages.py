"""A pinned version after a zero-retention VACUUM by delta-rs, as a user meets it: the API's
summary, files and schema of the version are what delta-rs read of it before the VACUUM (now
from the pin), the reachability answer counts it readable from its pin, its page says "kept by
pin NAME" with every action enabled, an unpinned vacuumed version's page says which pin could
have kept it, Compare warns before a diff whose side cannot be read, a diff that needs it is
refused before any job exists, and the Versions tab lists every version with the vacuumed
ones collapsed into ranges."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pyarrow as pa
import pytest

from tables.models import Job, Pin, Table
from tables.services.data import jobs as data_jobs
from tables.services.errors import ServiceError
from tables.services.pins import lifecycle as pins
from tables.services.sync import store as sync
from tests.web.kept_tables import orders_table, pin_place, register

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable  # noqa: E402

pytestmark = pytest.mark.django_db
PINNED = 3  # kept by a pin; its files are removed by the overwrite at version 4
LOST = 1  # no pin: its files are removed by the overwrite at version 2
PIN_NAME = "quarter-end"


def _delta_rs_view(path: Path, version: int) -> dict:
    """What delta-rs reads of a version: its files with their sizes and rows, metadata, schema."""
    dt = DeltaTable(str(path), version=version)
    adds = dt.get_add_actions(flatten=True)
    adds = adds.to_pydict() if hasattr(adds, "to_pydict") else pa.table(adds).to_pydict()
    return {
        "files": {p: (s, n) for p, s, n in zip(adds["path"], adds["size_bytes"], adds["num_records"], strict=True)},
        "id": dt.metadata().id,
        "partitionColumns": list(dt.metadata().partition_columns),
        "fields": [(f["name"], f["type"]) for f in json.loads(dt.schema().to_json())["fields"]],
        "reader": dt.protocol().min_reader_version,
    }


@pytest.fixture
def kept(settings, tmp_path, analyst) -> tuple[Table, dict, Pin, int]:
    """The table pinned at PINNED, vacuumed by delta-rs with retention 0, then synced."""
    path = orders_table(pin_place(settings, tmp_path) / "orders")
    table = register(path)
    before = _delta_rs_view(path, PINNED)
    pin = pins.create_pin(table, PINNED, PIN_NAME, "Q3 close", analyst)
    deleted = DeltaTable(str(path)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    assert set(before["files"]) <= set(deleted)  # the pinned version's files are gone from the table
    from tables.services.versions import read as versions

    versions._SNAPSHOTS.clear()
    sync.sync_table(table.pk)
    table.refresh_from_db()
    return table, before, pin, table.last_synced_version


def test_the_api_reads_a_kept_version_as_delta_rs_did_before_the_vacuum(browser, kept) -> None:
    table, before, pin, latest = kept
    summary = browser.get(f"/api/tables/{table.pk}/versions/{PINNED}/").json()
    assert summary["readFrom"] == {"pin": pin.pk, "name": PIN_NAME} and summary["summaryFrom"] == "pin"
    assert summary["version"] == PINNED and summary["metadata"]["id"] == before["id"]
    assert summary["numFiles"] == len(before["files"])
    assert summary["sizeBytes"] == sum(s for s, _n in before["files"].values())
    assert summary["protocol"]["minReaderVersion"] == before["reader"]
    fields = [(f["name"], f["type"]) for f in summary["metadata"]["schema"]["fields"]]
    assert fields == before["fields"]

    files = browser.get(f"/api/tables/{table.pk}/versions/{PINNED}/files/?limit=1000").json()
    assert {f["path"]: f["size"] for f in files["results"]} == {p: s for p, (s, _n) in before["files"].items()}
    schema = browser.get(f"/api/tables/{table.pk}/schema/?version={PINNED}").json()
    assert schema["pinned"] == PIN_NAME and schema["readFrom"]["pin"] == pin.pk
    assert [c["path"][-1] for c in schema["columns"]] == [name for name, _t in before["fields"]]
    assert str(Path(pin.store_location)) not in schema["ddl"]  # the store's directory is never told

    # Compare's file and row counts: every file of the kept version is gone by the latest
    diff = browser.get(f"/api/tables/{table.pk}/diff/?from={PINNED}&to={latest}&sample=1000").json()
    assert diff["readFrom"]["from"]["name"] == PIN_NAME and diff["readFrom"]["to"] is None
    removed = {f["path"]: (f["size"], f["numRecords"]) for f in diff["filesRemoved"]["sampleFiles"]}
    assert removed == before["files"]

    reach = browser.get(f"/api/tables/{table.pk}/reachability/?limit=100").json()
    by_version = {e["version"]: e for e in reach["results"]}
    assert by_version[PINNED]["readable"] is True
    assert by_version[PINNED]["readFrom"] == {"pin": pin.pk, "name": PIN_NAME}
    assert by_version[PINNED]["reason"] == "files_missing"  # what the table itself lost, still said
    assert by_version[LOST]["readable"] is False and by_version[LOST]["readFrom"] is None
    assert by_version[latest]["readFrom"] is None

    job = data_jobs.start_preview(table, PINNED, None)
    assert Job.objects.get(pk=job.pk).params == {"version": PINNED, "pin": pin.pk}  # read from the pin


def test_the_kept_version_page_says_kept_by_its_pin_with_every_action_enabled(browser, kept) -> None:
    table, _before, _pin, latest = kept
    html = browser.get(f"/t/{table.slug}/v/{PINNED}/").content.decode()
    assert f"kept by pin {PIN_NAME}" in html and 'id="version-kept"' in html
    assert 'id="version-unreadable"' not in html and "cannot be read" not in html
    button = re.search(r'<button type="submit" id="preview-rows"[^>]*>', html).group(0)
    assert "disabled" not in button
    assert f'href="/t/{table.slug}/diff/?from={PINNED}&amp;to={latest}"' in html
    assert 'id="row-history-link"' in html
    restore = re.search(r'<[^>]*id="restore-this"[^>]*>', html).group(0)
    assert restore.startswith("<a ") and "aria-disabled" not in restore
    # the Overview does not count it among the versions that cannot be read
    overview = browser.get(f"/t/{table.slug}/").content.decode()
    assert "kept by a pin" in overview


def test_an_unpinned_vacuumed_version_says_which_pin_could_have_kept_it(browser, kept) -> None:
    table, _before, _pin, latest = kept
    html = browser.get(f"/t/{table.slug}/v/{LOST}/").content.decode()
    assert 'id="version-unreadable"' in html and 'id="version-pin-hint"' in html
    vacuum = re.search(r"a pin made before the VACUUM at version (\d+) would have kept it", html)
    assert vacuum, html[html.index('id="version-unreadable"') :][:800]
    assert LOST < int(vacuum.group(1)) <= latest
    assert "of its data files were removed" in html


def test_compare_warns_before_a_diff_whose_side_cannot_be_read_and_the_start_is_refused(browser, kept) -> None:
    table, _before, _pin, latest = kept
    html = browser.get(f"/t/{table.slug}/diff/?from={LOST}&to={latest}").content.decode()
    warning = html[html.index('id="compare-unreadable-from"') :][:1200]
    assert f"Version {LOST} of orders cannot be read" in warning and "no pin holds it" in warning
    assert 'id="compare-unreadable-to"' not in html
    kept_side = browser.get(f"/t/{table.slug}/diff/?from={PINNED}&to={latest}").content.decode()
    assert 'id="compare-unreadable-from"' not in kept_side and f"kept by pin {PIN_NAME}" in kept_side

    for start in (
        lambda: data_jobs.start_row_diff(table, LOST, latest, "id"),
        lambda: data_jobs.start_changes(table, LOST, latest),
        lambda: data_jobs.start_row_history(table, {"id": "100"}, LOST, latest),
    ):
        with pytest.raises(ServiceError) as refused:
            start()
        assert refused.value.code == "version_unreadable" and refused.value.status == 422
        message = refused.value.message
        assert f"Version {LOST} of orders cannot be read" in message and "data file" in message
        assert f"Fix: choose a readable version (the oldest after it is version {PINNED})" in message  # its pin's
    assert not Job.objects.filter(kind__in=("rowdiff", "changes", "rowhistory")).exists()
    r = browser.post(f"/api/tables/{table.pk}/diff/rows/?from={LOST}&to={latest}&keys=id")
    assert r.status_code == 422 and r.json()["error"]["code"] == "version_unreadable", r.content
    # a side kept by a pin is not refused
    assert data_jobs.start_row_diff(table, PINNED, latest, "id").params["from"] == PINNED


def test_the_versions_tab_lists_every_version_with_vacuumed_ones_as_ranges(browser, kept, settings) -> None:
    table, _before, _pin, latest = kept
    html = browser.get(f"/t/{table.slug}/versions/").content.decode()
    listed = html[html.index('id="version-list"') :]
    listed = listed[: listed.index("</table>")]
    # versions 0-2 lost their files and no pin holds them: one row; 3 is kept by its pin
    assert 'id="range-0-2"' in listed and "versions 0–2: files removed by VACUUM at version" in listed
    assert "not restorable" in listed or "a restore is still possible" in listed
    assert f"kept by pin {PIN_NAME}" in listed
    for v in range(4, latest + 1):
        assert f'id="version-{v}"' in listed
    assert f'id="version-{PINNED}"' in listed and 'id="version-1"' not in listed

    from tables.web.tabs import versions as tab

    settings_page = tab.VERSIONS_PAGE
    try:
        tab.VERSIONS_PAGE = 3
        first = browser.get(f"/t/{table.slug}/versions/").content.decode()
        last = browser.get(f"/t/{table.slug}/versions/?page=2").content.decode()
    finally:
        tab.VERSIONS_PAGE = settings_page
    assert 'aria-label="Pages of versions"' in first and f'id="version-{latest}"' in first
    assert 'id="range-0-2"' not in first and 'id="range-0-2"' in last


@pytest.fixture
def cleaned(settings, tmp_path, analyst) -> tuple[Table, dict, Pin]:
    """The table pinned at PINNED, checkpointed, its log aged past its retention, then VACUUM
    (retention 0) and log cleanup by delta-rs: the table lost versions 0-4 whole; a sync."""
    import os

    path = orders_table(pin_place(settings, tmp_path) / "orders")
    table = register(path)
    before = _delta_rs_view(path, PINNED)
    pin = pins.create_pin(table, PINNED, PIN_NAME, "Q3 close", analyst)
    dt = DeltaTable(str(path))
    dt.create_checkpoint()
    for name in os.listdir(path / "_delta_log"):
        os.utime(path / "_delta_log" / name, (time.time() - 90 * 86_400,) * 2)
    dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    dt.cleanup_metadata()
    assert not (path / "_delta_log" / f"{PINNED:020d}.json").exists()
    from tables.services.versions import read as versions

    versions._SNAPSHOTS.clear()
    sync.sync_table(table.pk)
    table.refresh_from_db()
    return table, before, pin


def test_after_log_cleanup_the_kept_version_still_reads_and_a_lost_one_says_why(browser, cleaned) -> None:
    table, before, pin = cleaned
    summary = browser.get(f"/api/tables/{table.pk}/versions/{PINNED}/").json()
    assert summary["readFrom"] == {"pin": pin.pk, "name": PIN_NAME} and summary["metadata"]["id"] == before["id"]
    assert summary["numFiles"] == len(before["files"])
    reach = browser.get(f"/api/tables/{table.pk}/reachability/?limit=100").json()
    entry = next(e for e in reach["results"] if e["version"] == PINNED)
    assert entry["readable"] is True and entry["readFrom"]["name"] == PIN_NAME and entry["reason"] == "log_expired"
    html = browser.get(f"/t/{table.slug}/v/{PINNED}/").content.decode()
    assert f"kept by pin {PIN_NAME}" in html
    lost = browser.get(f"/t/{table.slug}/v/{LOST}/")
    assert lost.status_code == 404
    text = lost.content.decode()
    assert "log cleanup removed the commits needed to rebuild it, and no pin holds it" in text
    assert "a pin made before the log cleanup" in text
    versions_tab = browser.get(f"/t/{table.slug}/versions/").content.decode()
    assert 'id="range-0-2"' in versions_tab and f'id="version-{PINNED}"' in versions_tab
    # Compare: the kept side reads from its pin; a lost one says why instead of a bare "not found"
    latest = table.last_synced_version
    schema_diff = browser.get(f"/api/tables/{table.pk}/schema/diff/?from={PINNED}&to={latest}")
    assert schema_diff.status_code == 200, schema_diff.content
    assert schema_diff.json()["readFrom"]["from"]["name"] == PIN_NAME and schema_diff.json()["readFrom"]["to"] is None
    assert str(Path(pin.store_location)) not in schema_diff.content.decode()
    kept_side = browser.get(f"/t/{table.slug}/diff/?from={PINNED}&to={latest}")
    assert kept_side.status_code == 200 and f"kept by pin {PIN_NAME}" in kept_side.content.decode()
    lost_side = browser.get(f"/t/{table.slug}/diff/?from={LOST}&to={latest}")
    assert lost_side.status_code == 404
    assert f"Version {LOST} of orders cannot be read: log cleanup removed" in lost_side.content.decode()
