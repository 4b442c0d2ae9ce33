"""GET /api/tables/{id}/reachability/: the core's answer per version, paged, newest first, for
a table whose old data files were deleted as VACUUM would."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from rest_framework.test import APIClient

from tables.delta.history.reachability.compute import reachability
from tables.models import Table

from ..pages.test_api import assert_error, make_user, token_client

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

pytestmark = pytest.mark.django_db


@pytest.fixture
def vacuumed(settings, tmp_path) -> Table:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = tmp_path / "events"
    for i in range(4):
        write_deltalake(
            str(path), pa.table({"id": pa.array([i], pa.int64())}), mode="overwrite" if i == 2 else "append"
        )
    DeltaTable(str(path)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    return Table.objects.create(name="events", slug="events", location=str(path))


def test_reachability_pages_match_the_core(vacuumed) -> None:
    api = token_client(make_user("reader"))
    first = api.get(f"/api/tables/{vacuumed.pk}/reachability/?limit=3")
    assert first.status_code == 200, first.content
    body = first.json()
    core = reachability(vacuumed.location, int(time.time() * 1000)).to_dict()
    assert body["latestVersion"] == core["latestVersion"] == 5  # 4 writes, vacuum start and end
    assert body["count"] == 6 and body["next"] and body["deletedFileRetentionMs"] == 7 * 86_400_000
    rest = api.get(f"/api/tables/{vacuumed.pk}/reachability/?limit=3&offset=3").json()["results"]
    got = body["results"] + rest
    assert [v["version"] for v in got] == [5, 4, 3, 2, 1, 0]
    for ours, theirs in zip(got, core["versions"], strict=True):
        assert ours["readable"] == theirs["readable"] and ours["reason"] == theirs["reason"]
        assert ours["missingFiles"] == theirs["missingFiles"]
    assert got[0]["readable"] and not got[-1]["readable"] and got[-1]["reason"] == "files_missing"
    assert got[-1]["missingFiles"]["count"] == 1 and got[-1]["missingFiles"]["paths"][0].endswith(".parquet")


def test_reachability_needs_sign_in(vacuumed) -> None:
    assert_error(APIClient().get(f"/api/tables/{vacuumed.pk}/reachability/"), 401, "not_authenticated")


def test_time_travel_says_when_the_version_cannot_be_read(vacuumed, client) -> None:
    from tables.delta.history.timestamps import commit_times

    t0 = commit_times(vacuumed.location).timestamp(0)[0]
    body = token_client(make_user("reader")).get(f"/api/tables/{vacuumed.pk}/resolve/?timestamp={t0}").json()
    assert body["version"] == 0
    assert body["reachability"]["readable"] is False and body["reachability"]["reason"] == "files_missing"
    client.force_login(make_user("viewer"))
    html = client.get(f"/t/{vacuumed.slug}/versions/?as_of={t0}").content.decode()
    assert 'id="tt-unreachable"' in html and "1 of its files was deleted" in html
    latest = commit_times(vacuumed.location).timestamp(5)[0]
    html = client.get(f"/t/{vacuumed.slug}/versions/?as_of={latest}").content.decode()
    assert 'id="tt-answer"' in html and 'id="tt-unreachable"' not in html


def test_a_checkpoint_that_disagrees_with_its_commits_is_named_in_the_api_and_the_history(
    settings, tmp_path, client
) -> None:
    """A checkpoint at 3 listing a file no commit added (a sound one at 6 after it): versions
    3..5, read from it, are unreadable with the reason, in the API and on the history page."""
    import pyarrow.parquet as pq

    from tables.services.sync import store as sync

    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = tmp_path / "events"
    for i in range(8):
        write_deltalake(str(path), pa.table({"id": pa.array([i], pa.int64())}), mode="append")
        if i in (3, 6):
            DeltaTable(str(path)).create_checkpoint()
    checkpoint = path / "_delta_log" / f"{3:020d}.checkpoint.parquet"
    table = pq.read_table(checkpoint)
    rows = table.to_pylist()
    add = next(r for r in rows if r.get("add"))
    rows.append({**{k: None for k in add}, "add": {**add["add"], "path": "ghost.parquet"}})
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), checkpoint)
    t = Table.objects.create(name="events", slug="events", location=str(path))
    sync.sync_table(t.pk)

    api = token_client(make_user("ana"))
    entries = {e["version"]: e for e in api.get(f"/api/tables/{t.pk}/reachability/?limit=100").json()["results"]}
    assert [v for v, e in sorted(entries.items()) if not e["readable"]] == [3, 4, 5]
    assert {entries[v]["reason"] for v in (3, 4, 5)} == {"checkpoint_mismatch"}
    client.force_login(make_user("bob"))
    assert "checkpoint disagrees" in client.get("/t/events/history/").content.decode()
