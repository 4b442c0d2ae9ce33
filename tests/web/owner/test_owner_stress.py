"""deltaweb's DatabaseOwner under load and under a killed process (issue 7, item 7).

- 8 writer threads commit through the REST API (RestOwnerClient against the live server) at
  once: versions contiguous, none lost, none duplicated, all backfilled in order.
- the owner's process SIGKILLed between writing the staged commit and ratifying it, and
  between the backfill steps (a `python -c` subprocess on the test database file, as
  tests/core/test_managed.py does for the FileSystemOwner): a new owner recovers a consistent
  table; delta-rs sees exactly the backfilled prefix, deltaweb's reader the newest ratified
  version, and an orphan staged file never becomes a version.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rest_framework.authtoken.models import Token

from tables.delta.errors import CommitConflictError
from tables.delta.managed.owner_client import RestOwnerClient
from tables.delta.snapshot.state import load_snapshot
from tables.delta.write.managed import commit_via_owner
from tables.models import ManagedTable, RatifiedCommit, Table
from tables.services import errors
from tables.services.access.roles import WRITER
from tables.services.catalog import registration
from tables.services.managed import use_cases as owner_services
from tables.services.owner.db import DatabaseOwner, table_conf
from tests.conftest import REPO, database_url
from tests.web.pages.test_api import make_user, write_table

deltalake = pytest.importorskip("deltalake")

pytestmark = pytest.mark.django_db(transaction=True)

LOG = "_delta_log"


@pytest.fixture
def roots(settings, tmp_path):
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    settings.DELTAWEB_OWNER_AUTO_BACKFILL = False  # the tests backfill when they mean to
    return tmp_path


@pytest.fixture
def managed(roots):
    """A delta-rs table of versions 0..3 registered and taken over (ownership commit = version 4)."""
    path = write_table(roots / "events")
    table = registration.register_table("events", str(path))
    assert owner_services.take_over(table)["version"] == 4
    return table, path


def log_versions(path: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in (path / LOG).glob("*.json") if p.name[:20].isdigit())


def add(name: str) -> dict:
    return {"add": {"path": name, "partitionValues": {}, "size": 1, "modificationTime": 0, "dataChange": True}}


def commit_info(path: Path, version: int) -> dict:
    first = (path / LOG / f"{version:020d}.json").read_text().splitlines()[0]
    return json.loads(first)["commitInfo"]


# --- 8 writers at once through the REST API ---------------------------------------------------------


def test_eight_writers_through_the_api_lose_nothing_and_backfill_in_order(managed, live_server) -> None:
    table, path = managed
    user = make_user("svc", group=WRITER)
    client = RestOwnerClient(live_server.url, Token.objects.create(user=user).key, name="deltaweb", timeout=60)
    tc = table_conf(ManagedTable.objects.get(table=table))
    writers, total = 8, 200
    per_writer = total // writers
    won: dict[str, int] = {}  # txnId -> version the owner ratified for it
    conflicts = [0]
    errors: list[BaseException] = []
    lock = threading.Lock()

    def writer(i: int) -> None:
        rng = random.Random(i)
        try:
            for k in range(per_writer):
                txn = f"w{i}-{k}"
                tries = 0
                while True:
                    latest = client.get_commits(tc, 0).latest_table_version
                    try:
                        result = commit_via_owner(
                            path, client, [add(f"{txn}.parquet")], "WRITE", read_version=latest, txn_id=txn
                        )
                    except CommitConflictError:
                        with lock:
                            conflicts[0] += 1
                        tries += 1  # jittered exponential backoff: fewer doomed retries
                        time.sleep(rng.uniform(0, min(0.4, 0.01 * 2**tries)))
                        continue
                    with lock:
                        assert txn not in won
                        won[txn] = result.version
                    break
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    started = time.monotonic()
    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    assert not errors, errors
    last = 4 + total
    # none lost, none duplicated: every writer's commit has its own version, 5..last
    assert len(won) == total and sorted(won.values()) == list(range(5, last + 1))
    rows = list(RatifiedCommit.objects.filter(table=table).order_by("version").values_list("version", "txn_id"))
    assert rows == sorted((v, t) for t, v in won.items())
    print(f"\n{total} commits by {writers} writers in {elapsed:.1f}s, {conflicts[0]} conflicts retried")
    # before the backfill: delta-rs sees the backfilled prefix, deltaweb's reader everything
    assert log_versions(path) == list(range(5))
    assert deltalake.DeltaTable(str(path)).version() == 4
    snap = load_snapshot(path, owner=client)
    assert snap.version == last
    assert {p for p in snap.file_paths() if p.startswith("w")} == {f"{t}.parquet" for t in won}
    staged = {c.version: (path / c.path).read_bytes() for c in client.get_commits(tc, 0).commits}
    assert sorted(staged) == list(range(5, last + 1))
    # the backfill writes every ratified commit to _delta_log/, in order, byte for byte
    assert client.backfill_to_version(tc, last) == last
    assert log_versions(path) == list(range(last + 1))
    for v, data in staged.items():
        assert (path / LOG / f"{v:020d}.json").read_bytes() == data, v
    assert {commit_info(path, v)["txnId"]: v for v in range(5, last + 1)} == won
    icts = [commit_info(path, v)["inCommitTimestamp"] for v in range(4, last + 1)]
    assert icts == sorted(icts) and len(set(icts)) == len(icts)
    assert not RatifiedCommit.objects.filter(table=table, backfilled=False).exists()
    assert client.get_commits(tc, 0).commits == []
    assert deltalake.DeltaTable(str(path)).version() == last
    assert len(deltalake.DeltaTable(str(path)).file_uris()) == load_snapshot(path).num_files


# --- the owner's process killed at a durable step ---------------------------------------------------

_KILLER = """
import os, signal, sys
import django
django.setup()
from tables.delta.write.managed import commit_via_owner
from tables.models import ManagedTable
from tables.services.owner.db import DatabaseOwner, table_conf

table_pk, step = int(sys.argv[1]), sys.argv[2]

def fault(s):
    if s == step:
        os.kill(os.getpid(), signal.SIGKILL)

owner = DatabaseOwner(fault=fault)
mt = ManagedTable.objects.select_related("table").get(table_id=table_pk)
if step.startswith("commit:"):
    add = {"add": {"path": "killed.parquet", "partitionValues": {}, "size": 1, "modificationTime": 0, "dataChange": True}}
    commit_via_owner(mt.table.location, owner, [add], "WRITE", txn_id="killed")
else:
    owner.backfill_to_version(table_conf(mt), 100)
print("survived")
"""


def run_killed(table: Table, step: str, settings) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "DJANGO_SETTINGS_MODULE": "deltaweb.settings",
        "DATABASE_URL": database_url(),  # the test database, SQLite or PostgreSQL
        "DELTAWEB_ALLOWED_ROOTS": ",".join(settings.DELTAWEB_ALLOWED_ROOTS),
        "DELTAWEB_OWNER_AUTO_BACKFILL": "0",
    }
    return subprocess.run(
        [sys.executable, "-c", _KILLER, str(table.pk), step],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("step", "ratified"),
    [
        ("commit:staged", False),  # staged file written, no RatifiedCommit row (the transaction died)
        ("commit:ratified", True),  # ratified, the writer never heard back
        ("backfill:written", False),  # _delta_log/<v>.json written, the row not marked
        ("backfill:marked", False),  # one version fully backfilled, the rest not
    ],
)
def test_owner_process_killed_then_a_new_owner_recovers(managed, settings, step: str, ratified: bool) -> None:
    table, path = managed
    owner = DatabaseOwner()
    for i in range(3):  # 5..7 ratified, not backfilled
        commit_via_owner(path, owner, [add(f"m{i}.parquet")], "WRITE")
    before = sorted(load_snapshot(path, owner=owner).file_paths())
    staged_before = set((path / LOG / "_commits").iterdir())

    proc = run_killed(table, step, settings)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stdout, proc.stderr[-3000:])

    latest = 8 if ratified else 7
    # in between: a consistent table. The filesystem reader (ours and delta-rs) sees exactly the
    # contiguous prefix in _delta_log/; deltaweb's reader with the owner the newest ratified version.
    on_disk = log_versions(path)
    assert on_disk == list(range(on_disk[-1] + 1))
    assert load_snapshot(path).version == on_disk[-1] == deltalake.DeltaTable(str(path)).version()
    restarted = DatabaseOwner()  # a new process's owner: state from the database only
    snap = load_snapshot(path, owner=restarted)
    assert snap.version == latest
    assert ("killed.parquet" in snap.file_paths()) is ratified
    if not ratified:
        assert sorted(snap.file_paths()) == before
    orphans = set((path / LOG / "_commits").iterdir()) - staged_before
    if step.startswith("commit:"):
        assert len(orphans) == 1  # the staged file of version 8 is there either way
        assert RatifiedCommit.objects.filter(table=table, version=8).exists() is ratified
    for v in range(on_disk[-1] + 1):
        assert "killed" not in (path / LOG / f"{v:020d}.json").read_text()

    # recovery: re-run the backfill; a new commit takes the next version
    tc = table_conf(ManagedTable.objects.get(table=table))
    assert restarted.backfill_to_version(tc, 100) == latest
    assert restarted.backfill_to_version(tc, 100) == latest  # idempotent
    assert log_versions(path) == list(range(latest + 1))
    assert deltalake.DeltaTable(str(path)).version() == latest == load_snapshot(path).version
    assert not RatifiedCommit.objects.filter(table=table, backfilled=False).exists()
    mt = ManagedTable.objects.get(table=table)
    assert mt.latest_version == mt.backfilled_version == latest
    after = commit_via_owner(path, restarted, [add("after.parquet")], "WRITE", txn_id="after")
    assert after.version == latest + 1
    restarted.backfill_to_version(tc, 100)
    assert deltalake.DeltaTable(str(path)).version() == latest + 1
    files = set(load_snapshot(path).file_paths())
    assert "after.parquet" in files and ("killed.parquet" in files) is ratified
    # an orphan staged file never became a version
    txns = [commit_info(path, v).get("txnId") for v in range(5, latest + 2)]
    assert txns.count("killed") == (1 if ratified else 0)
    if step == "commit:staged":
        (orphan,) = orphans
        assert "killed.parquet" in orphan.read_text()
        assert orphan.name not in {r.path.rsplit("/", 1)[-1] for r in RatifiedCommit.objects.filter(table=table)}


# --- creating a managed table: the location is checked before anything is created ----------------


def test_create_managed_table_checks_the_location_before_creating_directories(roots, tmp_path_factory) -> None:
    outside = tmp_path_factory.mktemp("outside")
    target = outside / "new" / "table"
    with pytest.raises(errors.ServiceError) as err:
        owner_services.create_managed_table("escape", str(target), {"type": "struct", "fields": []})
    assert err.value.code == "location_not_allowed"
    assert not (outside / "new").exists()  # nothing created outside the allowed roots
    # '..' that leaves the root, and a symlink inside the root pointing out, are refused too
    dotdot = roots / "a" / ".." / ".." / outside.name / "dd"
    with pytest.raises(errors.ServiceError, match="outside the allowed roots"):
        owner_services.create_managed_table("dotdot", str(dotdot), {"type": "struct", "fields": []})
    assert not (outside / "dd").exists() and not (roots / "a").exists()
    (roots / "link").symlink_to(outside)
    with pytest.raises(errors.ServiceError, match="outside the allowed roots"):
        owner_services.create_managed_table("link", str(roots / "link" / "t"), {"type": "struct", "fields": []})
    assert not (outside / "t").exists()
    with pytest.raises(errors.ServiceError, match="absolute"):
        owner_services.create_managed_table("rel", "relative/t", {"type": "struct", "fields": []})
    assert not Table.objects.exists()
    # inside the roots: created, version 0, managed
    table = owner_services.create_managed_table(
        "fresh", str(roots / "deep" / "fresh"), {"type": "struct", "fields": []}
    )
    assert Path(table.location) == (roots / "deep" / "fresh").resolve()
    assert log_versions(Path(table.location)) == [0]
    assert ManagedTable.objects.get(table=table).latest_version == 0
