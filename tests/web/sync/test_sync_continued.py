"""A sync after one this process ran continues from what it kept (the log's tail listed, growth
and the configuration carried on): the rows equal a full sync's of the same log, and anything
the tail cannot vouch for (a rewritten log, a new configuration, log cleanup) syncs in full."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time

import pyarrow as pa
import pytest

from tables.delta.write.commit import enable_ict
from tables.models import Anomaly, Commit, JobKind, Table
from tables.services.catalog import registration
from tables.services.jobs import lifecycle as jobs
from tables.services.sync import reads as sync_reads
from tables.services.sync import store as sync

deltalake = pytest.importorskip("deltalake")

COLUMNS = [f.attname for f in Commit._meta.concrete_fields if f.attname not in ("id", "table_id")]


@pytest.fixture
def roots(settings, tmp_path):
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    sync._kept.clear()
    return tmp_path


class Listings:
    """Counts the syncs that list the whole log (the continued path lists only its tail)."""

    def __init__(self, monkeypatch) -> None:
        self.full = 0
        real = sync.commit_times

        def counted(*args, **kwargs):
            self.full += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(sync, "commit_times", counted)


def _rows(table: Table) -> list[tuple]:
    return [tuple(r[c] for c in COLUMNS) for r in Commit.objects.filter(table=table).order_by("version").values()]


def _anomalies(table: Table) -> list[tuple]:
    return sorted(Anomaly.objects.filter(table=table).values_list("version", "kind", "detail"))


def _summary(table: Table) -> tuple:
    table.refresh_from_db()
    return (table.last_synced_version, table.earliest_version, table.num_files, table.size_bytes, table.ict_enabled)


def _write(path, i: int, mode: str = "append") -> None:
    deltalake.write_deltalake(str(path), pa.table({"x": [i, i + 1], "s": [f"v{i}", None]}), mode=mode)


def _append_ict(path, v: int) -> None:
    """Commit v of an ICT table (delta-rs does not write those): commitInfo first, with an
    inCommitTimestamp after the previous one, then one add."""
    log = path / "_delta_log"
    before = json.loads((log / f"{v - 1:020d}.json").read_text().splitlines()[0])["commitInfo"]
    ict = before["inCommitTimestamp"] + 1000
    lines = [
        {"commitInfo": {"inCommitTimestamp": ict, "timestamp": ict, "operation": "WRITE", "readVersion": v - 1}},
        {"add": {"path": f"part-{v}.parquet", "partitionValues": {}, "size": 500 + v, "modificationTime": ict,
                 "dataChange": True}},
    ]  # fmt: skip
    (log / f"{v:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def _full_sync_of_copy(roots, path, name: str) -> Table:
    copy = roots / name
    shutil.copytree(path, copy)  # copy2: the commit files keep their times
    other = registration.register_table(name, str(copy))
    sync.sync_table(other.pk)
    return other


@pytest.mark.django_db
def test_continued_sync_equals_a_full_sync(roots, monkeypatch) -> None:
    """Appends, an overwrite (every file removed) and a delete after the first sync: the
    continued sync stores the rows, anomalies and summary a full sync of a copy of the same
    log stores, and the files and bytes delta-rs reads."""
    path = roots / "t"
    for i in range(3):
        _write(path, i)
    table = registration.register_table("t", str(path))
    listings = Listings(monkeypatch)
    assert sync.sync_table(table.pk)["newCommits"] == 3
    _write(path, 10)
    _write(path, 20, mode="overwrite")
    _write(path, 30)
    deltalake.DeltaTable(str(path)).delete("x = 31")
    out = sync.sync_table(table.pk)
    assert (out["latestVersion"], out["newCommits"]) == (6, 4)
    assert sync.sync_table(table.pk)["newCommits"] == 0
    assert listings.full == 1  # the first sync only

    other = _full_sync_of_copy(roots, path, "copy")
    assert listings.full == 2
    assert _rows(table) == _rows(other)
    assert _anomalies(table) == _anomalies(other)
    assert _summary(table)[1:] == _summary(other)[1:]
    dt = deltalake.DeltaTable(str(path))
    sizes = dt.get_add_actions(flatten=True).column("size_bytes").to_pylist()
    assert (table.num_files, table.size_bytes) == (len(dt.file_uris()), sum(sizes))
    assert [r[0] for r in _rows(table)] == list(range(7))


@pytest.mark.django_db
def test_a_new_configuration_syncs_in_full(roots, monkeypatch) -> None:
    """A commit with a metaData action (ICT enabled) is not continued: the full sync reads the
    new configuration and times the commit by its inCommitTimestamp."""
    path = roots / "t"
    for i in range(2):
        _write(path, i)
    table = registration.register_table("t", str(path))
    listings = Listings(monkeypatch)
    sync.sync_table(table.pk)
    enable_ict(str(path))
    _append_ict(path, 3)
    sync.sync_table(table.pk)
    assert listings.full == 2
    sources = dict(Commit.objects.filter(table=table).values_list("version", "timestamp_source"))
    assert sources == {0: "file", 1: "file", 2: "ict", 3: "ict"}
    _append_ict(path, 4)
    sync.sync_table(table.pk)
    assert listings.full == 2  # continued, with the configuration the full sync read
    assert Commit.objects.get(table=table, version=4).timestamp_source == "ict"
    assert _rows(table) == _rows(_full_sync_of_copy(roots, path, "copy"))


@pytest.mark.django_db
def test_a_rewritten_log_syncs_in_full(roots, monkeypatch) -> None:
    """The last synced commit rewritten (another size and time) and a new one after it: the kept
    state no longer describes the log, so the sync starts over from the listing."""
    path = roots / "t"
    for i in range(3):
        _write(path, i)
    table = registration.register_table("t", str(path))
    listings = Listings(monkeypatch)
    sync.sync_table(table.pk)
    last = path / "_delta_log" / f"{2:020d}.json"
    lines = last.read_text().splitlines()
    info = json.loads(lines[0])
    info["commitInfo"]["userMetadata"] = "rewritten"
    last.write_text("\n".join([json.dumps(info), *lines[1:]]) + "\n")
    os.utime(last, (1_900_000_000, 1_900_000_000))
    _write(path, 3)
    sync.sync_table(table.pk)
    assert listings.full == 2
    assert Commit.objects.filter(table=table).count() == 4


@pytest.mark.django_db
def test_log_cleanup_after_a_sync_marks_rows_expired(roots, monkeypatch) -> None:
    """Commits deleted below a checkpoint since the last sync: the sync is not continued, and
    the rows of the deleted commits stay, marked expired, as a full sync marks them."""
    path = roots / "t"
    for i in range(4):
        _write(path, i)
    deltalake.DeltaTable(str(path)).create_checkpoint()
    table = registration.register_table("t", str(path))
    listings = Listings(monkeypatch)
    sync.sync_table(table.pk)
    for v in range(3):
        (path / "_delta_log" / f"{v:020d}.json").unlink()
    _write(path, 9)
    sync.sync_table(table.pk)
    assert listings.full == 2
    expired = dict(Commit.objects.filter(table=table).values_list("version", "log_expired"))
    assert expired == {0: True, 1: True, 2: True, 3: False, 4: False}
    assert _summary(table)[:2] == (4, 3)


@pytest.mark.django_db
@pytest.mark.parametrize("processes", [False, True], ids=["here", "reader-processes"])
def test_batches_store_what_one_batch_stores(roots, monkeypatch, processes) -> None:
    """Many small batches, read here or by forked reader processes (a long log's path), store
    the rows one batch stores, growth, odd commitInfo and a commit without one included."""
    path = roots / "t"
    for i in range(12):
        _write(path, i, mode="overwrite" if i == 6 else "append")
    log = path / "_delta_log"
    # commitInfo after the add (not first), and values the columns must bound or keep exactly
    lines = (log / f"{3:020d}.json").read_text().splitlines()
    info = json.loads(lines[0])
    info["commitInfo"].update(userMetadata="m" * 20_000, readVersion=True, isBlindAppend="yes", job={"id": "<b>"})
    (log / f"{3:020d}.json").write_text("\n".join([*lines[1:], json.dumps(info)]) + "\n")
    lines = (log / f"{5:020d}.json").read_text().splitlines()
    (log / f"{5:020d}.json").write_text("\n".join(x for x in lines if "commitInfo" not in x) + "\n")
    table = registration.register_table("t", str(path))
    monkeypatch.setattr(sync, "BATCH", 5)
    forks = roots / "readers"
    if processes:  # as for a log of PROCESS_MIN commits or more, on two cores
        monkeypatch.setattr(sync, "reader_processes", lambda storage, commits: 2)
        real_start = sync_reads._start

        def start(storage) -> None:  # runs in each reader process
            with open(forks, "a") as fh:
                fh.write(f"{os.getpid()}\n")
            real_start(storage)

        monkeypatch.setattr(sync_reads, "_start", start)
    assert sync.sync_table(table.pk)["newCommits"] == 12
    monkeypatch.undo()
    sync._kept.clear()
    other = _full_sync_of_copy(roots, path, "copy")
    assert _rows(table) == _rows(other)
    assert _anomalies(table) == _anomalies(other)
    stored = Commit.objects.get(table=table, version=3)
    assert len(stored.user_metadata) < 20_000 and stored.read_version is None and stored.is_blind_append is None
    assert stored.job == {"id": "<b>"}
    assert Commit.objects.get(table=table, version=5).operation == ""
    files = dict(Commit.objects.filter(table=table).values_list("version", "num_files"))
    assert files == {v: len(deltalake.DeltaTable(str(path), version=v).file_uris()) for v in range(12)}
    assert files[6] == 1  # the overwrite, inside the second batch
    readers = set(forks.read_text().split()) if processes else set()
    assert len(readers) == (2 if processes else 0) and str(os.getpid()) not in readers


@pytest.mark.django_db
@pytest.mark.parametrize("processes", [False, True], ids=["here", "reader-processes"])
def test_a_corrupt_commit_fails_the_sync_alike_and_names_its_file(roots, monkeypatch, processes) -> None:
    """A commit whose commitInfo line is not JSON: a reader process skips it, the scan reads it
    again in order and reports it, as a sync without readers does; the batches before it stay."""
    path = roots / "t"
    for i in range(6):
        _write(path, i)
    table = registration.register_table("t", str(path))
    (path / "_delta_log" / f"{3:020d}.json").write_text('{"commitInfo": {"timestamp": 1,\n')
    monkeypatch.setattr(sync, "BATCH", 2)
    if processes:
        monkeypatch.setattr(sync, "reader_processes", lambda storage, commits: 2)
    out = sync.sync_table(table.pk)
    assert f"{3:020d}.json: line 1 is not valid JSON" in out["error"]
    table.refresh_from_db()
    assert table.sync_state == "error" and f"{3:020d}.json" in table.last_error
    assert sorted(Commit.objects.filter(table=table).values_list("version", flat=True)) == [0, 1]


@pytest.mark.django_db
@pytest.mark.parametrize("processes", [False, True], ids=["here", "reader-processes"])
@pytest.mark.parametrize(
    "line",
    [
        # 10,000 levels: beyond orjson's decoder (a bare JSONDecodeError failed the sync)
        '{"txn":{"appId":"a","version":1,"lastUpdated":' + "[" * 10_000 + "1" + "]" * 10_000 + "}}",
        # 600 levels: decoded, then a RecursionError bounding the commitInfo to store it
        '{"commitInfo":{"timestamp":1,"job":' + "[" * 600 + "1" + "]" * 600 + "}}",
    ],
    ids=["txn-10000-deep", "commit-info-600-deep"],
)
def test_a_commit_nested_too_deep_fails_the_sync_naming_its_file(roots, monkeypatch, processes, line) -> None:
    """Mirrors the corrupt commit above: the job's error names the commit, its line and why,
    not "sync failed unexpectedly"; the batches before it stay."""
    path = roots / "t"
    for i in range(6):
        _write(path, i)
    table = registration.register_table("t", str(path))
    info = json.dumps({"commitInfo": {"timestamp": 1}}) + "\n"
    (path / "_delta_log" / f"{3:020d}.json").write_text(("" if "commitInfo" in line else info) + line + "\n")
    monkeypatch.setattr(sync, "BATCH", 2)
    if processes:
        monkeypatch.setattr(sync, "reader_processes", lambda storage, commits: 2)
    job, _created = jobs.create_or_join(JobKind.SYNC, table)  # the row a page's sync makes
    out = sync.sync_table(table.pk, job.pk)
    lineno = 1 if "commitInfo" in line else 2
    want = f"{3:020d}.json: line {lineno}: the JSON is nested too deep"
    assert want in out["error"]
    job.refresh_from_db()
    table.refresh_from_db()
    assert job.status == "failed" and want in job.error, job.error
    assert table.sync_state == "error" and want in table.last_error
    assert "unexpectedly" not in job.error
    assert sorted(Commit.objects.filter(table=table).values_list("version", flat=True)) == [0, 1]


_real_prepare = sync_reads._prepare


def _hangs_on_version_3(task):  # in a reader process (by name: the pool pickles it)
    if task[0][0][0] == 3:
        # as a child stuck on an inherited lock does: deaf to the pool's SIGTERM (a Celery
        # worker's handler, inherited, never runs there)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(3600)
    return _real_prepare(task)


@pytest.mark.django_db
def test_a_reader_process_that_hangs_costs_time_not_the_sync(roots, monkeypatch, caplog) -> None:
    """A worker forks its readers from a process with threads: a child that inherits a lock
    held elsewhere waits forever, deaf to SIGTERM. Here one hangs on purpose on its second
    chunk: after the timeout the readers are killed, the sync reads the rest itself, and its
    rows equal a full sync's of the same log."""
    path = roots / "t"
    for i in range(9):
        _write(path, i)
    table = registration.register_table("t", str(path))
    monkeypatch.setattr(sync, "BATCH", 3)
    monkeypatch.setattr(sync, "reader_processes", lambda storage, commits: 2)
    monkeypatch.setattr(sync_reads, "READER_TIMEOUT", 2.0)
    monkeypatch.setattr(sync_reads, "_prepare", _hangs_on_version_3)
    with caplog.at_level("WARNING", logger="tables.services.sync.reads"):
        assert sync.sync_table(table.pk)["newCommits"] == 9
    assert "reader processes gave no answer in 2.0 s" in caplog.text
    monkeypatch.undo()
    sync._kept.clear()
    other = _full_sync_of_copy(roots, path, "copy")
    assert _rows(table) == _rows(other)
    assert sorted(Commit.objects.filter(table=table).values_list("version", flat=True)) == list(range(9))


@pytest.mark.django_db
@pytest.mark.parametrize("damage", ["truncated", "protocol-line"])
def test_a_damaged_version_0_fails_the_sync_naming_its_line(roots, client, django_user_model, damage) -> None:
    """A registered table whose version 0 is cut short or holds a line that is not JSON: the
    sync fails naming version 0's file and line (as `delta snapshot` does), and the table's page
    says so, never 'at version 1: the log holds no protocol action'."""
    path = roots / "t"
    _write(path, 0)
    _write(path, 1)
    table = registration.register_table("t", str(path))
    commit = path / "_delta_log" / f"{0:020d}.json"
    lines = commit.read_bytes().split(b"\n")
    protocol = next(i for i, line in enumerate(lines) if line.startswith(b'{"protocol"'))
    if damage == "truncated":
        commit.write_bytes(b"\n".join(lines[:protocol]) + b"\n" + lines[protocol][:20])
    else:
        lines[protocol] = lines[protocol][:20]
        commit.write_bytes(b"\n".join(lines))
    out = sync.sync_table(table.pk)
    expected = f"{0:020d}.json: line {protocol + 1} is not valid JSON"
    assert expected in out["error"] and "holds no" not in out["error"], out
    table.refresh_from_db()
    assert expected in table.last_error and str(roots) not in table.last_error, table.last_error
    client.force_login(django_user_model.objects.create_user("ana"))
    page = client.get(f"/t/{table.slug}/").content.decode()
    assert expected in page and "holds no protocol" not in page
