"""The storage boundary as an attacker meets it: a table under the allowed roots whose log
names files outside them, or whose `_delta_log` is a symbolic link out of them.

Each bypass is tried through the API, the pages and a Spark job (the row preview, change data
and the restore's existence check, run eagerly on a real local Spark session). Nothing outside
the roots may be read: the sentinel Parquet file outside has its access time set far in the
past, so any read by any process (the JVM's included) would move it (the file system updates
an access time older than the modification time on every read); and the table's own files
under the roots must not change.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rest_framework.test import APIClient

from tables.models import Job, JobStatus, Table
from tables.services.access.roles import ANALYST

from ..data.test_rows import eager, spark  # noqa: F401  (fixtures: eager Celery on a local Spark session)
from ..pages.test_api import make_user, token_client

deltalake = pytest.importorskip("deltalake")
from deltalake import write_deltalake  # noqa: E402

pytestmark = pytest.mark.django_db

SECRET = "SECRET-ROW"
PAST = 1_000  # seconds since the epoch: any read moves the access time past this


@pytest.fixture
def place(settings, tmp_path) -> dict[str, Path]:
    """roots/ is the only allowed root; elsewhere/ holds the sentinel, outside it."""
    roots, elsewhere = tmp_path / "roots", tmp_path / "elsewhere"
    roots.mkdir()
    elsewhere.mkdir()
    settings.DELTAWEB_ALLOWED_ROOTS = [str(roots)]
    settings.DELTAWEB_RESULTS_DIR = str(tmp_path / "results")
    secret = elsewhere / "secret.parquet"
    pq.write_table(pa.table({"id": pa.array(range(15), pa.int64()), "name": [SECRET] * 15}), secret)
    untouched(secret)
    return {"roots": roots, "elsewhere": elsewhere, "secret": secret}


def untouched(path: Path) -> None:
    os.utime(path, (PAST, os.stat(path).st_mtime))


def was_read(path: Path) -> bool:
    return os.stat(path).st_atime != PAST


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def hostile_table(root: Path, bad_path: str) -> Path:
    """v0 two rows written by delta-rs; v1 adds a file the log names by `bad_path`; v2
    removes it again (so a restore to v1 would add it back)."""
    write_deltalake(str(root), pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]}))
    log = root / "_delta_log"
    now = 1_700_000_000_000
    add = {"path": bad_path, "size": 600, "partitionValues": {}, "modificationTime": now, "dataChange": True}
    info = {"timestamp": now, "operation": "WRITE", "operationParameters": {"mode": "Append"}}
    (log / f"{1:020}.json").write_text(json.dumps({"commitInfo": info}) + "\n" + json.dumps({"add": add}) + "\n")
    remove = {"path": bad_path, "deletionTimestamp": now + 1, "dataChange": True, "size": 600}
    info = {"timestamp": now + 1, "operation": "DELETE", "operationParameters": {}}
    (log / f"{2:020}.json").write_text(json.dumps({"commitInfo": info}) + "\n" + json.dumps({"remove": remove}) + "\n")
    return root


BYPASSES = {
    "absolute URI": lambda place, table: (place["secret"]).as_uri(),
    "absolute path": lambda place, table: str(place["secret"]),
    "climbing out": lambda place, table: "../../elsewhere/secret.parquet",
    "symlinked file": lambda place, table: _symlink(table / "evil.parquet", place["secret"]),
}


def _symlink(link: Path, target: Path) -> str:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    return link.name


@pytest.fixture(params=list(BYPASSES))
def hostile(request, place) -> tuple[Table, Path, dict[str, str]]:
    path = place["roots"] / "orders"
    path.mkdir()
    hostile_table(path, BYPASSES[request.param](place, path))
    api = token_client(make_user("ana", group=ANALYST))
    r = api.post("/api/tables/", {"name": "orders", "location": str(path)}, format="json")
    assert r.status_code == 201, r.content  # the log itself is under the roots: it registers
    return Table.objects.get(name="orders"), path, tree_digest(path)


def assert_refused(text: str, place: dict[str, Path], page: bool = False) -> None:
    assert "outside the allowed roots" in text, text
    assert SECRET not in text and "Traceback" not in text
    if not page:  # a page lists the version's files as the log names them; errors never tell paths
        assert str(place["elsewhere"]) not in text


def test_log_paths_outside_the_roots_are_never_read(
    eager,  # noqa: F811
    hostile,
    place,
    client,
    django_capture_on_commit_callbacks,
) -> None:
    table, path, before = hostile
    api = token_client(make_user("reader"))

    # the API's preview of version 1: refused before any job exists (the version names a file no
    # storage may open), so Spark never opens anything
    with django_capture_on_commit_callbacks(execute=True):
        r = api.post(f"/api/tables/{table.pk}/versions/1/rows/")
    assert r.status_code == 422 and r.json()["error"]["code"] == "version_unreadable", r.content
    assert_refused(r.json()["error"]["message"], place)

    # change data over the hostile commit: the same refusal
    with django_capture_on_commit_callbacks(execute=True):
        r = api.post(f"/api/tables/{table.pk}/changes/?from=0&to=1")
    assert r.status_code == 422 and r.json()["error"]["code"] == "version_unreadable", r.content
    assert_refused(r.json()["error"]["message"], place)
    assert not Job.objects.filter(table=table, kind__in=["preview", "changes"]).exists()

    # the page: the preview form says why, escaped, no secret rows
    client.force_login(make_user("viewer"))
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(f"/t/{table.slug}/v/1/preview/")
    page = (client.get(r["Location"]) if r.status_code in (301, 302, 303) else r).content.decode()
    assert_refused(page, place, page=True)

    # a restore to version 1 would add the file back: the dry run's existence check refuses it
    analyst = APIClient()
    analyst.force_authenticate(make_user("ana2", group=ANALYST))
    r = analyst.post(f"/api/tables/{table.pk}/restores/", {"version": 1, "reason": "undo"}, format="json")
    assert r.status_code == 403, r.content
    assert r.json()["error"]["code"] == "path_outside_roots"
    assert_refused(r.json()["error"]["message"], place)

    assert not was_read(place["secret"])
    assert tree_digest(path) == before


def test_spark_restore_planner_refuses_before_spark_opens_anything(spark, hostile, place) -> None:  # noqa: F811
    from tables.delta.errors import PathOutsideRootsError
    from tables.spark.jobs.restore import spark_plan_restore

    table, path, before = hostile
    with pytest.raises(PathOutsideRootsError) as caught:
        spark_plan_restore(spark, table.location, version=1)
    assert caught.value.code == "path_outside_roots"
    assert_refused(str(caught.value), place)
    assert not was_read(place["secret"])
    assert tree_digest(path) == before


@pytest.fixture
def outside_log(place) -> Path:
    """A real table outside the roots whose log a table under the roots links to."""
    target = place["elsewhere"] / "real"
    write_deltalake(str(target), pa.table({"id": pa.array([7], pa.int64()), "name": [SECRET]}))
    for f in (target / "_delta_log").iterdir():
        untouched(f)
    return target


def assert_log_unread(target: Path) -> None:
    assert not any(was_read(f) for f in (target / "_delta_log").iterdir())


def test_a_symlinked_log_is_refused_at_registration(place, outside_log, client) -> None:
    linked = place["roots"] / "linked"
    linked.mkdir()
    (linked / "_delta_log").symlink_to(outside_log / "_delta_log")
    user = make_user("ana", group=ANALYST)

    r = token_client(user).post("/api/tables/", {"name": "linked", "location": str(linked)}, format="json")
    assert r.status_code == 403, r.content
    assert r.json()["error"]["code"] == "path_outside_roots"
    assert_refused(r.json()["error"]["message"], place)

    client.force_login(user)
    r = client.post("/tables/register/", {"name": "linked", "location": str(linked)})
    assert r.status_code == 400
    assert_refused(r.content.decode(), place)

    assert not Table.objects.exists()
    assert_log_unread(outside_log)


def test_a_log_swapped_for_a_symlink_is_refused_at_every_sync(
    eager,  # noqa: F811
    place,
    outside_log,
    django_capture_on_commit_callbacks,
) -> None:
    path = place["roots"] / "orders"
    write_deltalake(str(path), pa.table({"id": pa.array([1], pa.int64()), "name": ["a"]}))
    api = token_client(make_user("ana", group=ANALYST))
    with django_capture_on_commit_callbacks(execute=True):
        r = api.post("/api/tables/", {"name": "orders", "location": str(path)}, format="json")
    assert r.status_code == 201, r.content
    table = Table.objects.get(name="orders")
    assert table.commits.count() == 1

    # after registration the log is replaced by a link to a log outside the roots
    os.rename(path / "_delta_log", path / "_old_log")
    (path / "_delta_log").symlink_to(outside_log / "_delta_log")
    for _ in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            r = api.post(f"/api/tables/{table.pk}/sync/")
        job = Job.objects.get(pk=r.json()["id"])
        assert job.status == JobStatus.FAILED
        assert_refused(job.error, place)
    with django_capture_on_commit_callbacks(execute=True):
        r = api.post(f"/api/tables/{table.pk}/versions/0/rows/")
    assert r.status_code in (202, 403), r.content
    if r.status_code == 202:
        assert Job.objects.get(pk=r.json()["id"]).status == JobStatus.FAILED
    assert SECRET not in r.content.decode()
    assert_log_unread(outside_log)
    assert table.commits.count() == 1


# --- a path longer than any storage holds ------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "what"),
    [
        pytest.param("x" * 50_000_000 + ".parquet", "50 MB path", id="50MB-path"),
        pytest.param("p=a/" + "y" * 300 + ".parquet", "a 300-byte file name", id="long-file-name"),
    ],
)
def test_an_add_path_no_storage_holds_fails_the_preview_with_a_clear_error(
    eager,  # noqa: F811
    place,
    django_capture_on_commit_callbacks,
    name,
    what,
) -> None:
    """A real table (delta-rs) whose last commit gets a crafted add: the preview's job fails
    naming the log's fault in one bounded line, not with the OS's "File name too long"."""
    path = place["roots"] / "long"
    write_deltalake(str(path), pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]}))
    write_deltalake(str(path), pa.table({"id": pa.array([3], pa.int64()), "name": ["c"]}), mode="append")
    add = {"path": name, "size": 600, "partitionValues": {}, "modificationTime": 1, "dataChange": True}
    last = path / "_delta_log" / f"{1:020}.json"
    ends = last.read_bytes().endswith(b"\n")
    with open(last, "a") as log:
        log.write(("" if ends else "\n") + json.dumps({"add": add}) + "\n")
    api = token_client(make_user("ana", group=ANALYST))
    with django_capture_on_commit_callbacks(execute=True):
        r = api.post("/api/tables/", {"name": "long", "location": str(path)}, format="json")
    assert r.status_code == 201, r.content[:300]
    table = Table.objects.get(name="long")

    with django_capture_on_commit_callbacks(execute=True):
        r = api.post(f"/api/tables/{table.pk}/versions/1/rows/")
    if r.status_code == 422:  # refused before any job: the version names a file no storage opens
        error = r.json()["error"]["message"]
        assert r.json()["error"]["code"] == "version_unreadable", (what, error)
        assert len(error) < 1000 and "\n" not in error and "Traceback" not in error, what
        assert "Errno" not in error and "OSError" not in error and name not in error, (what, error[:300])
        assert str(place["roots"]) not in error, (what, error)
        return
    assert r.status_code == 202, r.content[:300]
    body = api.get(f"/api/jobs/{r.json()['id']}/").json()
    assert body["status"] == "failed", (what, str(body)[:500])
    error = body["error"]
    assert (body["result"] or {}).get("errorCode") == "corrupt_log", (what, body["error"][:300])
    assert len(error) < 1000 and "\n" not in error and "Traceback" not in error, what
    assert "Errno" not in error and "OSError" not in error, (what, error)
    assert "too long" in error and str(place["roots"]) not in error, (what, error)
