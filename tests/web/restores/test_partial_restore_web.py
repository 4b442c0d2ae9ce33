"""A partial RESTORE through the web app: requested with a predicate in the API and the form
(which lists the partitions it selects first), approved by another approver, run by the
worker's planner; delta-rs reads the result back."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

from tables.models import RestoreRequest, RestoreStatus
from tables.services.catalog import registration
from tables.services.restores import requests as restore_requests
from tables.services.restores import runs as restore_runs
from tables.services.sync import store as sync
from tests.web.restore_tables import people

from ..pages.test_api import assert_error, token_client

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

pytestmark = pytest.mark.django_db


def rows(day: str, region: str, ids: list[int]) -> pa.Table:
    n = len(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "day": [day] * n, "region": [region] * n})


@pytest.fixture
def table(settings, tmp_path):
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = tmp_path / "sales"
    write_deltalake(str(path), rows("2024-05-01", "eu", [1, 2]), partition_by=["day", "region"])  # v0
    write_deltalake(str(path), rows("2024-05-01", "us", [3]), mode="append")  # v1
    write_deltalake(str(path), rows("2024-05-02", "eu", [4]), mode="append")  # v2
    # v3: a bad load replaces one partition; v4: another partition gains rows later
    DeltaTable(str(path)).delete("day = '2024-05-01' AND region = 'eu'")
    write_deltalake(str(path), rows("2024-05-02", "us", [9]), mode="append")
    t = registration.register_table("sales", str(path))
    sync.sync_table(t.pk)
    return t


def ids_by_partition(path: str) -> Counter:
    data = DeltaTable(path).to_pyarrow_table().to_pylist()
    return Counter((r["day"], r["region"], r["id"]) for r in data)


def test_partial_restore_requested_approved_and_run(table) -> None:
    users = people()
    api = token_client(users["analyst"])
    where = "day = '2024-05-01' AND region = 'eu'"
    r = api.post(
        f"/api/tables/{table.pk}/restores/", {"version": 2, "reason": "bad load", "where": where}, format="json"
    )
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["plan"]["predicate"] == where
    impact = body["plan"]["rowImpact"]
    assert impact["rowsAdded"] == 2 and impact["rowsRemoved"] == 0
    req = RestoreRequest.objects.get(pk=body["id"])
    restore_requests.approve_restore(req, users["approver"], "ok")
    restore_runs.run_restore(req.pk, restore_runs.local_planner)
    req.refresh_from_db()
    assert req.status == RestoreStatus.SUCCEEDED, req.error
    got = ids_by_partition(table.location)
    # the selected partition is back as at version 2; the later append elsewhere stays
    assert got == Counter(
        {
            ("2024-05-01", "eu", 1): 1,
            ("2024-05-01", "eu", 2): 1,
            ("2024-05-01", "us", 3): 1,
            ("2024-05-02", "eu", 4): 1,
            ("2024-05-02", "us", 9): 1,
        }
    )
    last = DeltaTable(table.location).history(1)[0]
    assert last["operation"] == "RESTORE" and where in str(last["operationParameters"])


def test_bad_predicates_are_refused_and_save_nothing(table) -> None:
    api = token_client(people()["analyst"])
    base = f"/api/tables/{table.pk}/restores/"
    msg = assert_error(
        api.post(base, {"version": 2, "reason": "x", "where": "id = 1"}, format="json"), 400, "invalid_predicate"
    )
    assert "not a partition column" in msg
    assert_error(
        api.post(base, {"version": 2, "reason": "x", "where": "day = "}, format="json"), 400, "invalid_predicate"
    )
    assert_error(api.post(base, {"version": 2, "reason": "x", "where": "day = '1999-01-01'"}, format="json"), 400)
    assert not RestoreRequest.objects.exists()


def test_the_form_lists_the_partitions_a_predicate_selects(table, client) -> None:
    client.force_login(people()["analyst"])
    url = f"/t/{table.slug}/restore/"
    form = {"version": 2, "reason": "bad load", "where": "region = 'us'", "preview_partitions": "1"}
    html = client.post(url, form).content.decode()
    assert 'id="selected-partitions"' in html and "2 partitions" in html
    assert "day=2024-05-01, region=us" in html and "day=2024-05-02, region=us" in html
    assert not RestoreRequest.objects.exists()  # listing requests nothing
    r = client.post(url, {**form, "where": "nope = 1"})
    assert r.status_code == 400 and "not a partition column" in r.content.decode()
    form.pop("preview_partitions")
    r = client.post(url, form)
    assert r.status_code == 302 and RestoreRequest.objects.get().plan["predicate"] == "region = 'us'"
    html = client.get(r["Location"]).content.decode()
    assert 'id="plan-predicate"' in html and 'id="plan-rows"' in html and 'id="plan-partitions"' in html
