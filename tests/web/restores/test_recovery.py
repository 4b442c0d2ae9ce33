"""Recovery from a versioned bucket, end to end on a real S3-compatible server (moto, server
mode): a table written by delta-rs, VACUUMed by delta-rs; reachability marks the versions the
noncurrent object versions would make readable again; a restore that recovers files first is
requested, approved and run; afterwards the copies equal the noncurrent versions byte for
byte, no object version was deleted or replaced, and delta-rs reads the restored table as
the target version. The independent answer throughout is delta-rs itself."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from tables.models import RecoveredObject, RestoreRequest, RestoreStatus, Table
from tables.services.restores import runs as restore_runs
from tables.services.sync.store import sync_table
from tests.conftest import s3_buckets

from ..pages.test_api import assert_error, token_client

deltalake = pytest.importorskip("deltalake")
pytest.importorskip("obstore")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

pytestmark = pytest.mark.django_db
VERSIONED = "recovery-versioned"
PLAIN = "recovery-plain"


@pytest.fixture
def s3(s3_server, monkeypatch, settings):
    client = s3_buckets(s3_server, monkeypatch, settings, VERSIONED, PLAIN)
    client.put_bucket_versioning(Bucket=VERSIONED, VersioningConfiguration={"Status": "Enabled"})
    return s3_server


def _rows(uri: str, opts: dict, version: int | None = None) -> list[dict]:
    dt = DeltaTable(uri, version=version, storage_options=opts)
    return sorted(dt.to_pyarrow_table().to_pylist(), key=lambda r: r["id"])


def _readable(uri: str, opts: dict, version: int) -> bool:
    try:
        _rows(uri, opts, version)
    except Exception:  # delta-rs: the object is gone
        return False
    return True


def vacuumed_table(s3, bucket: str) -> tuple[str, dict[int, list[dict]]]:
    """Four versions, each overwriting the last (one file each), then VACUUM with no retention
    (versions 4 and 5: its start and end): the files of versions 0 to 2 are deleted. Returns
    the location and every version's rows as delta-rs read them before the VACUUM."""
    uri = f"s3://{bucket}/allowed/t-{uuid.uuid4().hex[:8]}"
    opts = s3.storage_options()
    for i in range(4):
        data = pa.table({"id": pa.array([i, 10 + i], pa.int64()), "name": pa.array([f"v{i}", "x"])})
        write_deltalake(uri, data, mode="overwrite", storage_options=opts)
    before = {v: _rows(uri, opts, v) for v in range(4)}
    DeltaTable(uri, storage_options=opts).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    return uri, before


def object_versions(s3, bucket: str, uri: str) -> dict[str, list[dict]]:
    """Every version and delete marker under the table, by key."""
    prefix = uri.split(f"{bucket}/", 1)[1] + "/"
    out: dict[str, list[dict]] = {}
    for page in s3.boto3().get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix):
        for v in page.get("Versions") or []:
            out.setdefault(v["Key"], []).append({**v, "marker": False})
        for d in page.get("DeleteMarkers") or []:
            out.setdefault(d["Key"], []).append({**d, "marker": True})
    return out


@pytest.fixture
def api(users) -> dict:
    """An API client for each of the people (one token each)."""
    return {name: token_client(user) for name, user in users.items()}


def register(uri: str, name: str, api: dict) -> Table:
    r = api["analyst"].post("/api/tables/", {"name": name, "location": uri}, format="json")
    assert r.status_code == 201, r.content
    table = Table.objects.get(name=name)
    sync_table(table.pk)
    table.refresh_from_db()
    return table


def reachability(table: Table, api: dict) -> dict[int, dict]:
    body = api["reader"].get(f"/api/tables/{table.pk}/reachability/?limit=100").json()
    return {v["version"]: v for v in body["results"]}


def test_a_vacuumed_table_is_recovered_then_restored(s3, client, users, api) -> None:
    uri, before = vacuumed_table(s3, VERSIONED)
    opts = s3.storage_options()
    latest = DeltaTable(uri, storage_options=opts).version()
    readable_after = {v: _readable(uri, opts, v) for v in range(latest + 1)}
    assert [v for v, ok in readable_after.items() if not ok] == [0, 1, 2]  # delta-rs: VACUUM broke them

    # version 1's file is deleted for good (its noncurrent version too): not recoverable
    lost = _file_of(s3, uri, 1)
    for v in object_versions(s3, VERSIONED, uri)[lost]:
        s3.boto3().delete_object(Bucket=VERSIONED, Key=lost, VersionId=v["VersionId"])

    table = register(uri, "vacuumed", api)
    reach = reachability(table, api)
    assert {v: e["readable"] for v, e in reach.items()} == readable_after
    assert {v for v, e in reach.items() if e["recoverable"]} == {0, 2}
    assert all(e["recoverable"] is False for e in reach.values() if e["version"] not in (0, 2))

    analyst, approver = api["analyst"], api["approver"]
    body = {"version": 1, "reason": "undo", "recoverFilesFirst": True}
    assert_error(analyst.post(f"/api/tables/{table.pk}/restores/", body, format="json"), 400, "version_not_recoverable")
    body = {"version": 3, "reason": "undo", "recoverFilesFirst": True}
    assert_error(analyst.post(f"/api/tables/{table.pk}/restores/", body, format="json"), 400, "version_not_recoverable")

    # the request: planned on the table as it will be once the objects are back
    r = analyst.post(f"/api/tables/{table.pk}/restores/", {"version": 2, "reason": "undo", "recoverFilesFirst": True})
    assert r.status_code == 201, r.content
    req = r.json()
    target_file = _file_of(s3, uri, 2)
    assert req["recoverFilesFirst"] is True
    assert [(o["path"], o["outcome"]) for o in req["recoveredObjects"]] == [(target_file.split("/")[-1], "planned")]
    assert req["plan"]["recovery"]["count"] == 1 and req["plan"]["recovery"]["logFiles"] == 0
    [planned] = req["plan"]["recovery"]["sample"]
    noncurrent = next(v for v in object_versions(s3, VERSIONED, uri)[target_file] if not v["marker"])
    assert planned["path"] == target_file.split("/")[-1] and planned["versionId"] == noncurrent["VersionId"]

    snapshot = {k: sorted(v["VersionId"] for v in vs) for k, vs in object_versions(s3, VERSIONED, uri).items()}
    current = {
        k: next(v["VersionId"] for v in vs if v["IsLatest"]) for k, vs in object_versions(s3, VERSIONED, uri).items()
    }
    r = approver.post(f"/api/restores/{req['id']}/approve/", {"comment": "ok"}, format="json")
    assert r.status_code == 202, r.content
    restore_runs.run_restore(req["id"], restore_runs.local_planner)
    done = RestoreRequest.objects.get(pk=req["id"])
    assert done.status == RestoreStatus.SUCCEEDED, done.error
    assert done.result["recovery"]["copied"] == 1

    # the audit: what was copied, from which version, to which, by this request
    [row] = RecoveredObject.objects.filter(request=done)
    assert (row.path, row.source_version_id, row.outcome) == (planned["path"], noncurrent["VersionId"], "copied")
    after = object_versions(s3, VERSIONED, uri)
    assert row.version_id == next(v["VersionId"] for v in after[target_file] if v["IsLatest"])
    got = s3.boto3().get_object(Bucket=VERSIONED, Key=target_file)["Body"].read()
    old = s3.boto3().get_object(Bucket=VERSIONED, Key=target_file, VersionId=noncurrent["VersionId"])["Body"].read()
    assert got == old and len(got) == noncurrent["Size"] and row.sha256

    # nothing deleted, nothing replaced: every version listed before is there, every key that
    # had a current object still has it; the new ones are the copy and the RESTORE commit
    assert all(set(ids) <= {v["VersionId"] for v in after[k]} for k, ids in snapshot.items())
    still = {k: next(v["VersionId"] for v in after[k] if v["IsLatest"]) for k in current}
    changed = {k for k in current if still[k] != current[k]}
    assert changed == {target_file}
    # (the commit's own check that the store honours put-if-absent writes and deletes a probe)
    new_keys = {k for k in set(after) - set(snapshot) if ".put-if-absent-probe-" not in k}
    assert new_keys == {f"{uri.split(VERSIONED + '/', 1)[1]}/_delta_log/{done.result_version:020d}.json"}

    # delta-rs reads the restored table as version 2 was
    assert _rows(uri, opts) == before[2]
    assert _rows(uri, opts, 2) == before[2]  # version 2 itself is readable again
    detail = api["reader"].get(f"/api/restores/{req['id']}/").json()
    assert [o["sourceVersionId"] for o in detail["recoveredObjects"]] == [noncurrent["VersionId"]]
    client.force_login(users["reader"])
    page = client.get(f"/restores/{req['id']}/").content.decode()
    assert 'id="recovered-objects"' in page and noncurrent["VersionId"][:20] in page


def _file_of(s3, uri: str, version: int) -> str:
    """The object key of the one data file version `version` added (from its commit)."""
    import json

    prefix = uri.split(f"{VERSIONED}/", 1)[1] if VERSIONED in uri else uri.split(f"{PLAIN}/", 1)[1]
    bucket = VERSIONED if VERSIONED in uri else PLAIN
    body = s3.boto3().get_object(Bucket=bucket, Key=f"{prefix}/_delta_log/{version:020d}.json")["Body"].read()
    adds = [json.loads(line)["add"]["path"] for line in body.splitlines() if b'"add"' in line]
    assert len(adds) == 1
    return f"{prefix}/{adds[0]}"


def test_pages_mark_recoverable_versions_and_offer_the_box(s3, client, users, api) -> None:
    uri, _before = vacuumed_table(s3, VERSIONED)
    table = register(uri, "marked", api)
    client.force_login(users["analyst"])
    tab = client.get(f"/t/{table.slug}/versions/").content.decode()
    assert 'id="recoverable-versions"' in tab
    assert f"/t/{table.slug}/restore/?version=2" in tab
    form = client.get(f"/t/{table.slug}/restore/?version=2").content.decode()
    assert 'id="recover-first"' in form
    form = client.get(f"/t/{table.slug}/restore/?version=3").content.decode()
    assert 'id="recover-first"' not in form
    # the form's request, recovered first: pending with the recovery in its plan
    r = client.post(f"/t/{table.slug}/restore/", {"version": "1", "reason": "undo", "recover_files_first": "on"})
    assert r.status_code == 302, r.content.decode()[:2000]
    req = RestoreRequest.objects.get(table=table)
    assert req.recover_files_first and req.plan["recovery"]["count"] == 1


def test_a_bucket_without_versioning_refuses_recovery(s3, api) -> None:
    uri, _before = vacuumed_table(s3, PLAIN)
    table = register(uri, "plain", api)
    reach = reachability(table, api)
    assert not reach[1]["readable"] and reach[1]["recoverable"] is None
    analyst = api["analyst"]
    body = {"version": 2, "reason": "undo", "recoverFilesFirst": True}
    message = assert_error(
        analyst.post(f"/api/tables/{table.pk}/restores/", body, format="json"), 422, "store_not_versioned"
    )
    assert "versioning is off" in message and "s3://" not in message
    assert not RestoreRequest.objects.exists()


def test_a_version_whose_commits_were_cleaned_up_is_recovered_then_restored(s3, users, api) -> None:
    """Log cleanup (commits 0 to 2 deleted behind a checkpoint at 3): a restore to version 1
    copies commits 0 and 1 back first, then restores; delta-rs reads it as version 1 was."""
    uri = f"s3://{VERSIONED}/allowed/log-{uuid.uuid4().hex[:8]}"
    opts = s3.storage_options()
    for i in range(4):
        write_deltalake(uri, pa.table({"id": pa.array([i], pa.int64())}), mode="overwrite", storage_options=opts)
    before = {v: _rows(uri, opts, v) for v in range(4)}
    DeltaTable(uri, storage_options=opts).create_checkpoint()
    prefix = uri.split(f"{VERSIONED}/", 1)[1]
    for v in range(3):
        s3.boto3().delete_object(Bucket=VERSIONED, Key=f"{prefix}/_delta_log/{v:020d}.json")
    assert not _readable(uri, opts, 1)
    table = register(uri, "cleaned", api)
    reach = reachability(table, api)
    assert {v for v, e in reach.items() if e["recoverable"]} == {0, 1, 2}
    assert reach[1]["reason"] == "log_expired"

    r = api["analyst"].post(
        f"/api/tables/{table.pk}/restores/", {"version": 1, "reason": "undo", "recoverFilesFirst": True}, format="json"
    )
    assert r.status_code == 201, r.content
    recovery = r.json()["plan"]["recovery"]
    assert recovery["count"] == recovery["logFiles"] == 2 and recovery["notes"]  # file times change
    assert api["approver"].post(f"/api/restores/{r.json()['id']}/approve/", {}, format="json").status_code == 202
    restore_runs.run_restore(r.json()["id"], restore_runs.local_planner)
    done = RestoreRequest.objects.get(pk=r.json()["id"])
    assert done.status == RestoreStatus.SUCCEEDED, done.error
    rows = RecoveredObject.objects.filter(request=done).order_by("path")
    assert [(o.path, o.outcome) for o in rows] == [(f"_delta_log/{v:020d}.json", "copied") for v in (0, 1)]
    assert _rows(uri, opts) == before[1] and _rows(uri, opts, 1) == before[1]
    assert not _readable(uri, opts, 2)  # commit 2 was not needed, and stays gone


def _approved(table: Table, api: dict, version: int) -> int:
    r = api["analyst"].post(
        f"/api/tables/{table.pk}/restores/",
        {"version": version, "reason": "undo", "recoverFilesFirst": True},
        format="json",
    )
    assert r.status_code == 201, r.content
    assert api["approver"].post(f"/api/restores/{r.json()['id']}/approve/", {}, format="json").status_code == 202
    return r.json()["id"]


def test_an_object_written_meanwhile_fails_the_run_and_is_kept(s3, api) -> None:
    uri, _before = vacuumed_table(s3, VERSIONED)
    table = register(uri, "meanwhile", api)
    pk = _approved(table, api, 2)
    key = _file_of(s3, uri, 2)
    s3.boto3().put_object(Bucket=VERSIONED, Key=key, Body=b"someone else's bytes")
    restore_runs.run_restore(pk, restore_runs.local_planner)
    done = RestoreRequest.objects.get(pk=pk)
    assert done.status == RestoreStatus.FAILED and "other bytes" in done.error and "s3://" not in done.error
    [row] = RecoveredObject.objects.filter(request=done)
    assert row.outcome == "failed" and "other bytes" in row.error
    assert s3.boto3().get_object(Bucket=VERSIONED, Key=key)["Body"].read() == b"someone else's bytes"
    assert done.result_version is None


def test_a_copy_a_stopped_worker_left_unrecorded_is_checked_again(s3, api) -> None:
    """The worker stopped after its PUT and before recording it: the next attempt finds the
    object there with the version's bytes, records it as present, and restores."""
    uri, before = vacuumed_table(s3, VERSIONED)
    table = register(uri, "stopped", api)
    pk = _approved(table, api, 2)
    key = _file_of(s3, uri, 2)
    source = next(v for v in object_versions(s3, VERSIONED, uri)[key] if not v["marker"])
    body = s3.boto3().get_object(Bucket=VERSIONED, Key=key, VersionId=source["VersionId"])["Body"].read()
    [row] = RecoveredObject.objects.filter(request_id=pk)
    assert (row.path, row.source_version_id, row.outcome) == (key.rsplit("/", 1)[-1], source["VersionId"], "planned")
    row.outcome = "copying"
    row.save()
    s3.boto3().put_object(Bucket=VERSIONED, Key=key, Body=body, IfNoneMatch="*")
    restore_runs.run_restore(pk, restore_runs.local_planner)
    done = RestoreRequest.objects.get(pk=pk)
    assert done.status == RestoreStatus.SUCCEEDED, done.error
    assert list(RecoveredObject.objects.filter(request=done).values_list("outcome", flat=True)) == ["present"]
    assert _rows(uri, s3.storage_options()) == before[2]
