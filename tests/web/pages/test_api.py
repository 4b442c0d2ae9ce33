"""The REST API end to end: real tables written by delta-rs, the cache filled by a real sync.

Answers are checked against delta-rs itself (history operations and versions, files per
version) and against the Delta core (resolve, timeline). Every endpoint is also driven with
bad input, and every error must come back as {"error": {"code", "message"}}.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from django.contrib.auth.models import Group, User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tables.delta.history.timeline import timeline as core_timeline
from tables.delta.history.timestamps import commit_times, parse_timestamp, resolve_timestamp
from tables.delta.write.commit import commit, enable_ict
from tables.models import Commit, Job, JobStatus, Table
from tables.services.access.roles import ANALYST
from tables.services.catalog import registration
from tables.services.sync import store as sync
from tables.services.versions import read as versions
from tests.web.kept_tables import register
from tests.web.ui_tables import DESCRIBE_HISTORY_DETAILS

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

pytestmark = pytest.mark.django_db

T0 = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp() * 1000)
STEP = 60_000  # one minute between commits


# --- fixtures --------------------------------------------------------------------------


@pytest.fixture
def roots(settings, tmp_path):
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    return tmp_path


def set_commit_times(path: Path, start: int = T0, step: int = STEP) -> list[int]:
    """Give commit v the file time start + v*step (ms), so time travel is deterministic."""
    times = []
    for f in sorted((path / "_delta_log").glob("*.json")):
        v = int(f.name.split(".")[0])
        ms = start + v * step
        os.utime(f, ns=(ms * 1_000_000, ms * 1_000_000))
        times.append(ms)
    return times


def write_table(path: Path) -> Path:
    """Versions 0..3: create, append, overwrite, delete (as delta-rs writes them)."""
    write_deltalake(str(path), pa.table({"id": pa.array([1, 2], pa.int64())}))
    write_deltalake(str(path), pa.table({"id": pa.array([3], pa.int64())}), mode="append")
    write_deltalake(str(path), pa.table({"id": pa.array([4, 5], pa.int64())}), mode="overwrite")
    DeltaTable(str(path)).delete("id = 4")
    set_commit_times(path)
    return path


@pytest.fixture
def table_path(roots) -> Path:
    return write_table(roots / "events")


@pytest.fixture
def table(table_path) -> Table:
    return register(table_path)


def make_user(username: str, *, staff: bool = False, group: str | None = None, superuser: bool = False) -> User:
    user = User.objects.create_user(username, password="pw-" + username, is_staff=staff, is_superuser=superuser)
    if group:
        user.groups.add(Group.objects.get_or_create(name=group)[0])
    return user


def token_client(user: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + Token.objects.create(user=user).key)
    return client


@pytest.fixture
def analyst() -> User:
    return make_user("ana", group=ANALYST)


@pytest.fixture
def api(analyst) -> APIClient:
    return token_client(analyst)


@pytest.fixture
def reader_api() -> APIClient:
    return token_client(make_user("reader"))


@pytest.fixture
def staff_api() -> APIClient:
    return token_client(make_user("boss", staff=True, superuser=True))


def assert_error(response, status: int, code: str | None = None) -> str:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}, body
    assert {"code", "message"} <= set(body["error"]), body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert "Traceback" not in body["error"]["message"]
    if code is not None:
        assert body["error"]["code"] == code, body
    return body["error"]["message"]


def url(table: Table, rest: str = "") -> str:
    return f"/api/tables/{table.pk}/{rest}"


# --- authentication ------------------------------------------------------------------


def test_obtain_token_and_use_it(analyst) -> None:
    client = APIClient()
    r = client.post("/api/auth/token/", {"username": "ana", "password": "pw-ana"}, format="json")
    assert r.status_code == 200, r.content
    key = r.json()["token"]
    client.credentials(HTTP_AUTHORIZATION="Token " + key)
    assert client.get("/api/tables/").status_code == 200

    r = APIClient().post("/api/auth/token/", {"username": "ana", "password": "wrong"}, format="json")
    assert "credentials" in assert_error(r, 400, "invalid")


def test_unauthenticated_gets_401_with_token_challenge(table) -> None:
    client = APIClient()
    for path in ["/api/tables/", url(table), url(table, "history/"), "/api/jobs/1/"]:
        r = client.get(path)
        assert_error(r, 401, "not_authenticated")
        assert r["WWW-Authenticate"] == "Token"
    r = client.post("/api/tables/", {"name": "x", "location": "/tmp"}, format="json")
    assert_error(r, 401, "not_authenticated")

    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert_error(bad.get("/api/tables/"), 401, "authentication_failed")


def test_session_authentication_and_csrf(table, analyst) -> None:
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(analyst)
    assert client.get(url(table)).json()["name"] == "events"
    # a session-authenticated write needs the CSRF token
    assert_error(client.post(url(table, "sync/")), 403, "csrf_failed")


# --- tables: create, list, retrieve, delete, sync -----------------------------------------


def test_create_registers_and_queues_a_sync(api, table_path) -> None:
    r = api.post("/api/tables/", {"name": "Events", "location": str(table_path), "description": "d"}, format="json")
    assert r.status_code == 201, r.content
    body = r.json()
    table = Table.objects.get(pk=body["id"])
    assert body["name"] == "Events" and body["slug"] == "events" and body["location"] == str(table_path)
    assert body["createdBy"] == "ana" and body["syncState"] == "queued"
    assert r["Location"].endswith(f"/api/tables/{table.pk}/")
    job = Job.objects.get(pk=body["syncJob"]["id"])
    assert (job.kind, job.table_id, job.status) == ("sync", table.pk, JobStatus.QUEUED)

    # the worker's part, run in-process; the job endpoint then reports it
    sync.sync_table(table.pk, job.pk)
    j = api.get(f"/api/jobs/{job.pk}/").json()
    assert j["status"] == "succeeded" and j["isTerminal"] and j["stage"] == "done"
    assert j["result"]["latestVersion"] == 3 and j["result"]["newCommits"] == 4
    assert j["createdBy"] == "ana" and j["startedAt"] and j["finishedAt"]
    t = api.get(f"/api/tables/{table.pk}/").json()
    assert (t["syncState"], t["lastSyncedVersion"], t["earliestVersion"]) == ("ok", 3, 0)
    assert t["numFiles"] == len(DeltaTable(str(table_path)).file_uris())


def test_create_runs_the_sync_eagerly(api, table_path, django_capture_on_commit_callbacks) -> None:
    from deltaweb.celery import app

    old = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            r = api.post("/api/tables/", {"name": "eager", "location": str(table_path)}, format="json")
    finally:
        app.conf.task_always_eager = old
    assert r.status_code == 201, r.content
    j = api.get(f"/api/jobs/{r.json()['syncJob']['id']}/").json()
    assert j["status"] == "succeeded", j
    assert Commit.objects.filter(table_id=r.json()["id"]).count() == 4


def test_create_rejects_bad_input_and_saves_nothing(api, roots, tmp_path_factory, table_path) -> None:
    outside = tmp_path_factory.mktemp("outside")
    write_deltalake(str(outside / "t"), pa.table({"x": [1]}))
    msg = assert_error(
        api.post("/api/tables/", {"name": "o", "location": str(outside / "t")}, format="json"),
        403,
        "location_not_allowed",
    )
    assert "outside the allowed roots" in msg
    # '..' that climbs out of the root is resolved before the check
    sneaky = str(roots / ".." / outside.name / "t")
    assert_error(api.post("/api/tables/", {"name": "o", "location": sneaky}, format="json"), 403)

    (roots / "plain").mkdir()
    msg = assert_error(
        api.post("/api/tables/", {"name": "p", "location": str(roots / "plain")}, format="json"),
        400,
        "not_a_delta_table",
    )
    assert "_delta_log" in msg
    assert_error(
        api.post("/api/tables/", {"name": "m", "location": str(roots / "missing")}, format="json"),
        400,
        "invalid_location",
    )
    assert_error(api.post("/api/tables/", {"name": "r", "location": "relative/path"}, format="json"), 400)

    r = api.post("/api/tables/", {"location": str(table_path)}, format="json")
    msg = assert_error(r, 400, "invalid")
    assert msg.startswith("name:") and r.json()["error"]["fields"]["name"]
    assert_error(api.post("/api/tables/", "{not json", content_type="application/json"), 400, "parse_error")
    assert Table.objects.count() == 0 and Job.objects.count() == 0

    assert api.post("/api/tables/", {"name": "ok", "location": str(table_path)}, format="json").status_code == 201
    assert_error(api.post("/api/tables/", {"name": "ok", "location": str(table_path)}, format="json"), 409, "duplicate")
    assert Table.objects.count() == 1


def test_user_without_role_can_read_but_not_register_or_sync(reader_api, table, table_path) -> None:
    assert reader_api.get("/api/tables/").json()["count"] == 1
    assert reader_api.get(url(table, "history/")).status_code == 200
    r = reader_api.post("/api/tables/", {"name": "x", "location": str(table_path)}, format="json")
    assert "analyst" in assert_error(r, 403, "permission_denied")
    assert_error(reader_api.post(url(table, "sync/")), 403, "permission_denied")
    assert Table.objects.count() == 1 and Job.objects.count() == 0


def test_a_tokens_roles_follow_its_user_from_the_next_request_on(table) -> None:
    user = make_user("later")
    client = token_client(user)
    assert_error(client.post(url(table, "sync/")), 403, "permission_denied")
    user.groups.add(Group.objects.get_or_create(name=ANALYST)[0])  # an administrator grants the role
    assert client.post(url(table, "sync/")).status_code == 202
    user.groups.clear()
    assert_error(client.post(url(table, "sync/")), 403, "permission_denied")
    User.objects.filter(pk=user.pk).update(is_active=False)
    assert_error(client.get(url(table, "history/")), 401, "authentication_failed")
    Token.objects.filter(user=user).delete()
    User.objects.filter(pk=user.pk).update(is_active=True)
    assert_error(client.get(url(table, "history/")), 401, "authentication_failed")  # a revoked token


def test_list_and_retrieve_by_id_or_slug(api, table, roots) -> None:
    other = registration.register_table("Other Table", str(write_table(roots / "other")))
    r = api.get("/api/tables/")
    body = r.json()
    assert body["count"] == 2 and body["previous"] is None
    assert [t["name"] for t in body["results"]] == ["Other Table", "events"]  # by name
    assert api.get("/api/tables/?limit=1").json()["next"].endswith("limit=1&offset=1")

    by_id = api.get(url(table)).json()
    assert by_id == api.get("/api/tables/events/").json()
    assert by_id["ict"] == {"enabled": False, "enablementVersion": None, "enablementTimestamp": None}
    assert by_id["lastSyncedVersion"] == 3 and by_id["syncState"] == "ok"
    assert api.get("/api/tables/other-table/").json()["id"] == other.pk

    assert "999999" in assert_error(api.get("/api/tables/999999/"), 404, "not_found")
    assert_error(api.get("/api/tables/no-such-table/"), 404, "not_found")
    assert_error(api.get("/api/tables/99999999999999999999999/"), 404, "not_found")
    assert_error(api.get("/api/tables/999999/history/"), 404, "not_found")


def test_delete_is_for_superusers_only(api, staff_api, table, table_path) -> None:
    assert "administrator" in assert_error(api.delete(url(table)), 403, "permission_denied")
    approver_staff = token_client(make_user("console", staff=True, group="approver"))
    assert_error(approver_staff.delete(url(table)), 403, "permission_denied")
    assert Table.objects.filter(pk=table.pk).exists()
    assert staff_api.delete(url(table)).status_code == 204
    assert not Table.objects.filter(pk=table.pk).exists()
    assert not Commit.objects.filter(table_id=table.pk).exists()
    assert (table_path / "_delta_log").is_dir()  # the files stay
    assert_error(staff_api.delete(url(table)), 404, "not_found")


def test_sync_endpoint_returns_202_with_the_job(api, table, table_path) -> None:
    write_deltalake(str(table_path), pa.table({"id": pa.array([9], pa.int64())}), mode="append")
    r = api.post(url(table, "sync/"))
    assert r.status_code == 202, r.content
    job = r.json()
    assert job["status"] == "queued" and job["kind"] == "sync" and job["table"] == table.pk
    assert r["Location"].endswith(f"/api/jobs/{job['id']}/")
    sync.sync_table(table.pk, job["id"])
    assert api.get(f"/api/jobs/{job['id']}/").json()["result"]["newCommits"] == 1
    assert api.get(url(table, "history/")).json()["results"][0]["version"] == 4


def test_unknown_job_method_and_path(api, table) -> None:
    assert_error(api.get("/api/jobs/424242/"), 404, "not_found")
    assert_error(api.get("/api/jobs/abc/"), 404, "not_found")
    assert_error(api.put(url(table), {"name": "x"}, format="json"), 405, "method_not_allowed")
    assert_error(api.post(url(table, "history/")), 405, "method_not_allowed")
    assert_error(api.get("/api/nothing-here/"), 404, "not_found")
    assert "end with '/'" in assert_error(api.get("/api/tables"), 404, "not_found")


# --- history -------------------------------------------------------------------------


HISTORY_KEYS = [
    "version",
    "timestamp",
    "timestampSource",
    "inCommitTimestamp",
    "fileModificationTime",
    *DESCRIBE_HISTORY_DETAILS,
    "numFiles",
    "sizeBytes",
    "logExpired",
]


def test_history_matches_delta_rs(api, table, table_path) -> None:
    body = api.get(url(table, "history/")).json()
    rows = body["results"]
    assert body["count"] == 4 and body["next"] is None
    theirs = DeltaTable(str(table_path)).history()
    assert [r["version"] for r in rows] == [h["version"] for h in theirs] == [3, 2, 1, 0]
    assert [r["operation"] for r in rows] == [h["operation"] for h in theirs]
    for ours, h in zip(rows, theirs, strict=True):
        assert list(ours) == HISTORY_KEYS
        assert ours["operationParameters"] == h.get("operationParameters")
        assert ours["engineInfo"] == h.get("engineInfo")
        assert ours["readVersion"] == h.get("readVersion")
        assert ours["timestampSource"] == "file" and ours["inCommitTimestamp"] is None
        assert ours["timestamp"] == ours["fileModificationTime"] == T0 + ours["version"] * STEP
        assert ours["userId"] is None and ours["job"] is None  # absent, not ""
        assert ours["numFiles"] == len(DeltaTable(str(table_path), version=ours["version"]).file_uris())


def test_history_filters_and_pages(api, table) -> None:
    def versions(query: str) -> list[int]:
        r = api.get(url(table, "history/") + query)
        assert r.status_code == 200, r.content
        return [row["version"] for row in r.json()["results"]]

    assert versions("?operation=delete") == [3]
    assert versions("?operation=WRITE") == [2, 1, 0]
    assert versions("?operation=MERGE") == []
    assert versions("?version_min=1&version_max=2") == [2, 1]
    assert versions("?version_min=2") == [3, 2]
    assert versions("?since=2024-01-01T00:01:00Z") == [3, 2, 1]
    assert versions("?until=2024-01-01 00:01:00") == [1, 0]
    assert versions(f"?since={T0 + STEP}&until={T0 + 2 * STEP}") == [2, 1]
    assert versions("?since=2024-01-01T01:01:00%2B01:00&operation=write") == [2, 1]

    page = api.get(url(table, "history/") + "?limit=2&offset=1").json()
    assert [r["version"] for r in page["results"]] == [2, 1] and page["count"] == 4
    assert "offset=3" in page["next"] and page["previous"]


def test_history_rejects_bad_parameters(api, table) -> None:
    h = url(table, "history/")
    assert "version_min" in assert_error(api.get(h + "?version_min=x"), 400, "invalid")
    assert_error(api.get(h + "?version_max=-1"), 400, "invalid")
    assert_error(api.get(h + "?version_min=99999999999999999999999"), 400, "invalid")
    assert "version_min" in assert_error(api.get(h + "?version_min=3&version_max=1"), 400, "invalid_range")
    assert "since" in assert_error(api.get(h + "?since=yesterday"), 400, "invalid_timestamp")
    assert_error(api.get(h + "?until=2024-13-45"), 400, "invalid_timestamp")
    assert_error(api.get(h + "?since=2024-02-01&until=2024-01-01"), 400, "invalid_range")
    assert "limit" in assert_error(api.get(h + "?limit=abc"), 400, "invalid")
    assert_error(api.get(h + "?offset=-2"), 400, "invalid")


def test_history_of_a_table_not_synced_yet_is_empty(api, roots) -> None:
    t = registration.register_table("fresh", str(write_table(roots / "fresh")))
    assert api.get(url(t, "history/")).json() == {"count": 0, "next": None, "previous": None, "results": []}


# --- versions and files ----------------------------------------------------------------


def test_version_summary(api, table, table_path) -> None:
    operations = {h["version"]: h["operation"] for h in DeltaTable(str(table_path)).history()}
    for v in range(4):
        body = api.get(url(table, f"versions/{v}/")).json()
        theirs = DeltaTable(str(table_path), version=v)
        assert body["version"] == v
        assert body["numFiles"] == len(theirs.file_uris())
        assert body["protocol"]["minReaderVersion"] == theirs.protocol().min_reader_version
        assert body["metadata"]["id"] == theirs.metadata().id
        assert [f["name"] for f in body["metadata"]["schema"]["fields"]] == ["id"]
        assert body["timestamp"] == T0 + v * STEP and body["timestampSource"] == "file"
        assert body["commitInfo"]["operation"] == operations[v]


def test_version_errors(api, table) -> None:
    msg = assert_error(api.get(url(table, "versions/7/")), 404, "version_not_found")
    assert "version 7" in msg and "3" in msg  # names what is available
    assert_error(api.get(url(table, "versions/7/files/")), 404, "version_not_found")
    assert_error(api.get(url(table, "versions/99999999999999999999999/")), 400, "invalid")
    assert "version" in assert_error(api.get(url(table, "versions/abc/")), 400, "invalid")
    assert_error(api.get(url(table, "versions/-1/")), 400, "invalid")
    assert_error(api.get(url(table, "versions/1.5/files/")), 400, "invalid")


def test_version_files_match_delta_rs_and_page(api, table, table_path) -> None:
    for v in range(4):
        body = api.get(url(table, f"versions/{v}/files/")).json()
        theirs = {Path(u).name for u in DeltaTable(str(table_path), version=v).file_uris()}
        assert body["count"] == len(theirs)
        assert {f["path"] for f in body["results"]} == theirs
        for f in body["results"]:
            assert set(f) == {"path", "size", "partitionValues", "modificationTime", "deletionVector"}
            assert f["size"] == (table_path / f["path"]).stat().st_size

    all_files = api.get(url(table, "versions/1/files/")).json()
    assert all_files["count"] == 2
    first = api.get(url(table, "versions/1/files/?limit=1")).json()
    assert len(first["results"]) == 1 and "offset=1" in first["next"] and first["previous"] is None
    second = api.get(first["next"]).json()
    assert second["next"] is None and second["previous"]
    assert first["results"] + second["results"] == all_files["results"]
    assert_error(api.get(url(table, "versions/1/files/?limit=0")), 400, "invalid")
    assert_error(api.get(url(table, "versions/1/files/?offset=x")), 400, "invalid")


def test_unreadable_table_is_422(api, table, table_path) -> None:
    (table_path / "_delta_log").rename(table_path / "_moved_log")
    msg = assert_error(api.get(url(table, "versions/0/")), 422, "not_a_delta_table")
    # the table by its name, never its location on the server
    assert msg.startswith(f"{table.name}: ") and str(table_path) not in msg
    assert_error(api.get(url(table, "resolve/?timestamp=2024-01-01")), 422, "not_a_delta_table")


# --- resolve -------------------------------------------------------------------------


def test_resolve_agrees_with_the_core(api, table, table_path) -> None:
    times = commit_times(str(table_path))
    cases = [
        ("2024-01-01T00:00:00Z", False),
        ("2024-01-01 00:00:30", False),
        ("2024-01-01T00:01:00Z", False),
        (str(T0 + 2 * STEP + 1), False),
        ("2024-01-01T00:03:00.000Z", False),
        ("2024-01-01T01:01:30+01:00", False),
        ("2024-06-01", True),
    ]
    for text, allow in cases:
        q = f"?timestamp={text.replace('+', '%2B')}" + ("&allow_latest=true" if allow else "")
        r = api.get(url(table, "resolve/") + q)
        assert r.status_code == 200, (text, r.content)
        core = resolve_timestamp(times, parse_timestamp(text), allow_latest=allow)
        body = r.json()
        reach = body.pop("reachability")  # whether that version can still be read (all files are there)
        assert body == core, text
        assert reach["version"] == core["version"] and reach["readable"] is True
    got = {
        t: api.get(url(table, "resolve/") + f"?timestamp={T0 + t}").json()["version"]
        for t in (0, STEP - 1, STEP, 3 * STEP)
    }
    assert got == {0: 0, STEP - 1: 0, STEP: 1, 3 * STEP: 3}


def test_resolve_errors(api, table) -> None:
    r = url(table, "resolve/")
    msg = assert_error(api.get(r + "?timestamp=2023-12-31"), 400, "timestamp_out_of_range")
    assert "before the earliest version" in msg
    msg = assert_error(api.get(r + "?timestamp=2024-06-01"), 400, "timestamp_out_of_range")
    assert "after the latest commit" in msg
    assert api.get(r + "?timestamp=2024-06-01&allow_latest=1").json()["version"] == 3
    assert "not a timestamp" in assert_error(api.get(r + "?timestamp=soon"), 400, "invalid_timestamp")
    assert "timestamp" in assert_error(api.get(r), 400, "invalid")
    assert "allow_latest" in assert_error(api.get(r + "?timestamp=2024-01-01&allow_latest=maybe"), 400, "invalid")


# --- timeline ------------------------------------------------------------------------


def test_timeline_equals_the_core_timeline_across_ict_enablement(api, roots) -> None:
    path = roots / "ict"
    for i in range(3):
        write_deltalake(str(path), pa.table({"x": [i]}), mode="append")
    set_commit_times(path)
    enable_ict(str(path))  # version 3 turns In-Commit Timestamps on
    commit(str(path), [], "SET TBLPROPERTIES")  # delta-rs cannot write to an ICT table; the core can
    t = registration.register_table("ict", str(path))
    sync.sync_table(t.pk)

    body = api.get(url(t, "timeline/")).json()
    core = core_timeline(commit_times(str(path)))
    assert body["ict"] == core["ict"]
    assert body["ict"]["enabled"] and body["ict"]["enablementVersion"] == 3
    assert body["versions"] == core["versions"]
    assert [v["source"] for v in body["versions"]] == ["file", "file", "file", "ict", "ict"]
    key = lambda a: (a["version"] is None, a["version"] or 0, a["kind"], a["detail"])  # noqa: E731
    assert sorted(body["anomalies"], key=key) == sorted(core["anomalies"], key=key)

    r = api.get(url(t, "resolve/") + f"?timestamp={body['versions'][4]['inCommitTimestamp']}").json()
    assert (r["version"], r["source"]) == (4, "ict")


def test_timeline_reports_anomalies(api, table, table_path, roots) -> None:
    path = write_table(roots / "copied")
    set_commit_times(path, start=T0 + 10 * STEP, step=-STEP)  # file times run backwards: a copied table
    t = registration.register_table("copied", str(path))
    sync.sync_table(t.pk)
    body = api.get(url(t, "timeline/")).json()
    kinds = {(a["version"], a["kind"]) for a in body["anomalies"]}
    assert kinds == {(1, "file_time_not_increasing"), (2, "file_time_not_increasing"), (3, "file_time_not_increasing")}
    assert [v["adjusted"] for v in body["versions"]] == [False, True, True, True]
    assert api.get(url(table, "timeline/")).json()["anomalies"] == []


# --- diff ----------------------------------------------------------------------------


def test_diff(api, table, table_path) -> None:
    body = api.get(url(table, "diff/?from=0&to=2")).json()
    before = {Path(u).name for u in DeltaTable(str(table_path), version=0).file_uris()}
    after = {Path(u).name for u in DeltaTable(str(table_path), version=2).file_uris()}
    assert (body["from"], body["to"]) == (0, 2)
    assert body["filesAdded"]["count"] == len(after - before)
    assert body["filesRemoved"]["count"] == len(before - after)
    assert set(body["filesAdded"]["sample"]) == after - before
    assert set(body["filesRemoved"]["sample"]) == before - after
    assert body["numFiles"] == {"from": len(before), "to": len(after)}
    assert body["schema"] == [] and body["properties"] == []
    assert [c["version"] for c in body["commits"]] == [1, 2]
    assert set(body["commits"][0]) == {
        "version",
        "timestamp",
        "timestampSource",
        "operation",
        "userName",
        "operationMetrics",
    }
    same = api.get(url(table, "diff/?from=3&to=3&sample=0")).json()
    assert same["filesAdded"]["count"] == same["filesRemoved"]["count"] == 0 and same["commits"] == []


def test_diff_errors(api, table) -> None:
    d = url(table, "diff/")
    assert "must not be after" in assert_error(api.get(d + "?from=3&to=1"), 400, "invalid_range")
    assert "to" in assert_error(api.get(d + "?from=1"), 400, "invalid")
    assert_error(api.get(d + "?from=a&to=1"), 400, "invalid")
    assert_error(api.get(d + "?from=0&to=2&sample=5000"), 400, "invalid")
    assert_error(api.get(d + "?from=0&to=9"), 404, "version_not_found")


# --- unexpected errors, schema and docs ---------------------------------------------------


def test_unexpected_error_is_a_clean_500(api, table, monkeypatch) -> None:
    def boom(*args, **kwargs):
        raise RuntimeError("secret internals /etc/passwd")

    monkeypatch.setattr(versions, "version_summary", boom)
    r = api.get(url(table, "versions/0/"))
    msg = assert_error(r, 500, "internal")
    assert "secret" not in r.content.decode() and "RuntimeError" not in r.content.decode()
    assert msg


def test_schema_is_openapi_3_and_lists_the_paths(reader_api) -> None:
    # signed in: the schema is private unless DELTAWEB_PUBLIC_SCHEMA=1 (tests/web/access/test_hardening.py)
    r = reader_api.get("/api/schema/?format=json")
    assert r.status_code == 200
    schema = r.json()
    assert schema["openapi"].startswith("3.")
    for path in [
        "/api/auth/token/",
        "/api/tables/",
        "/api/tables/{id}/",
        "/api/tables/{id}/sync/",
        "/api/tables/{id}/history/",
        "/api/tables/{id}/versions/{version}/",
        "/api/tables/{id}/versions/{version}/files/",
        "/api/tables/{id}/resolve/",
        "/api/tables/{id}/timeline/",
        "/api/tables/{id}/diff/",
        "/api/jobs/{id}/",
    ]:
        assert path in schema["paths"], path
    history = schema["paths"]["/api/tables/{id}/history/"]["get"]
    params = {p["name"] for p in history["parameters"]}
    assert {"operation", "version_min", "version_max", "since", "until", "limit", "offset"} <= params
    assert {"tokenAuth", "cookieAuth"} <= set(schema["components"]["securitySchemes"])
    assert "Error" in schema["components"]["schemas"]


def test_swagger_ui_is_served_without_a_cdn(reader_api) -> None:
    r = reader_api.get("/api/docs/")
    assert r.status_code == 200
    html = r.content.decode()
    assert "swagger-ui" in html and "/api/docs/?script=" in html  # the init script is a file (CSP)
    assert "cdn." not in html and "unpkg" not in html
    script = reader_api.get("/api/docs/?script=").content.decode()
    assert "/api/schema/" in script


def test_schema_validates_without_warnings(tmp_path) -> None:
    from django.core.management import call_command

    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yml"))
    assert (tmp_path / "schema.yml").stat().st_size > 1000


def test_api_root_lists_the_entry_points() -> None:
    body = APIClient().get("/api/").json()
    assert body["tables"].endswith("/api/tables/") and body["docs"].endswith("/api/docs/")
    assert body["token"].endswith("/api/auth/token/") and body["schema"].endswith("/api/schema/")
