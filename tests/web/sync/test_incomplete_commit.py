"""A table mid-write stays readable: a newest commit cut off in its last line (a writer still
writing it, or one that stopped half-way) leaves the history shown up to the commit before,
names the incomplete version and why, and is read again at the next sync; on local disk and
on S3 (moto in server mode). A commit cut off in the middle of the log stays corruption."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tables.delta.log.listing import commit_name
from tables.models import Commit, SyncState, Table
from tables.services.catalog import registration
from tables.services.chain import seen as seen_store
from tables.services.sync.probe import probe_tables
from tables.services.sync.store import sync_table
from tests.conftest import s3_buckets

from ..pages.test_api import make_user, token_client

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

pytestmark = pytest.mark.django_db
CUT = 150  # bytes of version 10's commit left: its first line cut off
BUCKET = "incomplete-tables"


def write_versions(uri: str, count: int = 11, storage_options: dict[str, str] | None = None) -> None:
    for i in range(count):
        write_deltalake(
            uri, pa.table({"id": pa.array([i], pa.int64())}), mode="append", storage_options=storage_options
        )


def peer_history(uri: str, storage_options: dict[str, str] | None = None) -> list[tuple[int, str, dict]]:
    """(version, operation, its parameters) of versions 0..9 as delta-rs reads them."""
    rows = DeltaTable(uri, storage_options=storage_options).history()
    return sorted((h["version"], h["operation"], h["operationParameters"]) for h in rows if 0 <= h["version"] <= 9)


def history_versions(api, table: Table) -> list[int]:
    rows = api.get(f"/api/tables/{table.pk}/history/?limit=100").json()["results"]
    return sorted(r["version"] for r in rows)


def history_rows(api, table: Table) -> list[tuple[int, str, dict]]:
    rows = api.get(f"/api/tables/{table.pk}/history/?limit=100").json()["results"]
    return sorted((r["version"], r["operation"], r["operationParameters"]) for r in rows)


def assert_shown_up_to_nine(api, client, table: Table, expected: list[tuple[int, str, dict]]) -> None:
    table.refresh_from_db()
    assert table.sync_state == SyncState.OK and table.last_synced_version == 9, table.last_error
    assert table.last_error == ""
    assert history_rows(api, table) == expected and [v for v, _o, _t in expected] == list(range(10))
    # nothing of version 10 is kept: no history row, no first-seen digest
    assert not Commit.objects.filter(table=table, version=10).exists()
    assert not seen_store.seen_commits(table, 10, 10)
    detail = api.get(f"/api/tables/{table.pk}/").json()
    notice = detail["incompleteCommit"]
    assert notice["version"] == 10 and notice["shownUpTo"] == 9
    assert notice["file"] == commit_name(10)
    assert notice["reason"] == f"line 1 is not valid JSON at char {CUT}"
    assert notice["message"] == (
        f"version 10's commit file is incomplete: line 1 is not valid JSON at char {CUT}; "
        "shown up to version 9; retried on the next sync"
    )
    for page in (f"/t/{table.slug}/", f"/t/{table.slug}/history/"):
        html = client.get(page).content.decode()
        assert 'id="incomplete-commit"' in html, page
        assert "Version 10 is not shown yet" in html and f"not valid JSON at char {CUT}" in html
        assert "has not been synced yet" not in html and "Last sync failed" not in html


def assert_version_ten_after_completion(api, table: Table, expected: list[int]) -> None:
    table.refresh_from_db()
    assert table.sync_state == SyncState.OK and table.last_synced_version == 10, table.last_error
    assert history_versions(api, table) == expected == list(range(11))
    assert api.get(f"/api/tables/{table.pk}/").json()["incompleteCommit"] is None


def test_a_local_table_mid_write_shows_up_to_its_last_complete_commit(settings, tmp_path, client) -> None:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = tmp_path / "events"
    write_versions(str(path))
    expected = peer_history(str(path))  # delta-rs reads no version of a cut-off log: asked before
    tip = path / "_delta_log" / "00000000000000000010.json"
    whole = tip.read_bytes()
    tip.write_bytes(whole[:CUT])

    table = registration.register_table("events", str(path))
    result = sync_table(table.pk)
    assert result["latestVersion"] == 9 and result["incompleteCommit"]["version"] == 10
    api = token_client(make_user("ana", group="analyst"))
    client.force_login(make_user("viewer"))
    assert_shown_up_to_nine(api, client, table, expected)

    # the probe does not start a sync for the same cut-off file at every tick...
    table.refresh_from_db()
    assert probe_tables([table.pk]).unchanged == [table.pk]
    # ...but does once the writer finished it, and that sync stores version 10
    tip.write_bytes(whole)
    assert probe_tables([table.pk]).changed == [table.pk]
    sync_table(table.pk)
    assert_version_ten_after_completion(api, table, sorted(h["version"] for h in DeltaTable(str(path)).history()))


def test_a_cut_off_commit_in_the_middle_of_the_log_is_still_corruption(settings, tmp_path, client) -> None:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = tmp_path / "holed"
    write_versions(str(path))
    middle = path / "_delta_log" / "00000000000000000005.json"
    middle.write_bytes(middle.read_bytes()[:CUT])

    table = registration.register_table("holed", str(path))
    sync_table(table.pk)
    table.refresh_from_db()
    assert table.sync_state == SyncState.ERROR
    assert "00000000000000000005.json: line 1 is not valid JSON" in table.last_error
    api = token_client(make_user("ana", group="analyst"))
    assert api.get(f"/api/tables/{table.pk}/").json()["incompleteCommit"] is None


def test_a_newest_commit_broken_before_its_last_line_is_still_corruption(settings, tmp_path) -> None:
    """Only a cut in the last line is a writer not done: a broken earlier line is not."""
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = tmp_path / "broken"
    write_versions(str(path), count=3)
    tip = path / "_delta_log" / "00000000000000000002.json"
    lines = tip.read_bytes().split(b"\n")
    tip.write_bytes(b"\n".join([lines[0][:40], *lines[1:]]))

    table = registration.register_table("broken", str(path))
    sync_table(table.pk)
    table.refresh_from_db()
    assert table.sync_state == SyncState.ERROR
    assert "00000000000000000002.json: line 1 is not valid JSON" in table.last_error


@pytest.fixture
def s3(s3_server, monkeypatch, settings):
    return s3_buckets(s3_server, monkeypatch, settings, BUCKET)


def test_an_s3_table_mid_write_shows_up_to_its_last_complete_commit(s3_server, s3, client) -> None:
    uri = f"s3://{BUCKET}/allowed/events"
    write_versions(uri, storage_options=s3_server.storage_options())
    key = f"allowed/events/{commit_name(10)}"
    expected = peer_history(uri, s3_server.storage_options())
    whole = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    s3.put_object(Bucket=BUCKET, Key=key, Body=whole[:CUT])

    table = registration.register_table("s3-events", uri)
    sync_table(table.pk)
    api = token_client(make_user("ana", group="analyst"))
    client.force_login(make_user("viewer"))
    assert_shown_up_to_nine(api, client, table, expected)

    s3.put_object(Bucket=BUCKET, Key=key, Body=whole)
    sync_table(table.pk)
    full = DeltaTable(uri, storage_options=s3_server.storage_options()).history()
    assert_version_ten_after_completion(api, table, sorted(h["version"] for h in full))
