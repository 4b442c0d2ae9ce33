"""deltaweb as a commit-owner and catalog under load: commits per second, publish lag.

Usage: .venv/bin/python benchmarks/owner.py [--seconds S] [--postgres URL|auto] [--legacy]

Default (the Unity Catalog API, issue 14): for each database (SQLite always; PostgreSQL from
--postgres URL, DELTAWEB_BENCH_POSTGRES, or `auto`: a private cluster started with the
installed PostgreSQL server on a free loopback port), a fresh database is migrated and, for
each log length (100 and 10,000 versions; --lengths), a catalogManaged table is made at that
length (created through the catalog, its published versions written directly, checkpointed
every 100 like the owner does), and gunicorn (4 gthread workers with keep-alive) serves
deltaweb. The tables carry the catalog's records of their published versions (a RatifiedCommit
row each), and every table's rows follow an untimed warm-up (--warmup). Then 1 and 8 writers
(--writer-counts; each its own process, as separate clients are, with its own official SDK
client: unitycatalog-client, one kept-alive connection pool) commit for S seconds each: stage
the commit file, `commit` through DeltaCommitsApi; on a conflict, learn the latest version and
its ICT from the catalog's answer (or the one published file of that version) and retry at
once. A publisher thread publishes ratified commits in order and reports the backfilled
version (the client duty UC assigns); publish lag is the time from a writer's accepted commit
to its `_delta_log/<v>.json`. Afterwards the log is checked: versions contiguous, none lost.
Each row also says where a commit's time goes on the client (`clientMs`, p50/p95): staging,
an accepted commit's round trip, a conflict's round trip and the reload after it, and the
publisher's reload, writes and report (and its batch size).

--legacy measures the older commit-owner REST API instead (RestOwnerClient and
commit_via_owner, 8 writer threads retrying a conflict at once, the server-side backfill loop,
the same gunicorn and warm-up), as the issue's first numbers did.
Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from web import free_port  # the benchmarks' one way to pick a loopback port

REPO = Path(__file__).resolve().parent.parent
SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}


def pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def run_one(args: argparse.Namespace) -> dict:
    """In a child process whose environment names the database: set up, load, measure."""
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from django.db import connection, connections
    from rest_framework.authtoken.models import Token

    from tables.delta.errors import CommitConflictError
    from tables.delta.managed.owner_client import RestOwnerClient
    from tables.delta.write.managed import commit_via_owner
    from tables.models import ManagedTable
    from tables.services.access.roles import WRITER
    from tables.services.managed import use_cases as owner_services
    from tables.services.owner.db import table_conf

    call_command("migrate", verbosity=0)
    root = Path(os.environ["DELTAWEB_ALLOWED_ROOTS"])
    name = f"bench-{os.getpid()}-{int(time.time())}"  # a reused PostgreSQL database may hold older runs
    table = owner_services.create_managed_table(name, str(root / name), SCHEMA)
    user = User.objects.get_or_create(username="bench-writer")[0]
    user.groups.add(Group.objects.get_or_create(name=WRITER)[0])
    token = Token.objects.get_or_create(user=user)[0].key
    mt = ManagedTable.objects.select_related("table").get(table=table)
    tc = table_conf(mt)
    path = Path(table.location)
    connection.close()

    server, base, log = start_gunicorn(root)  # the same server as the UC rows: gthread, keep-alive
    client = RestOwnerClient(base, token, name="deltaweb", timeout=60)
    try:
        deadline = time.time() + 30
        while True:
            try:
                client.get_commits(tc, 0)
                break
            except Exception as exc:
                if time.time() > deadline or server.poll() is not None:
                    raise RuntimeError(
                        "gunicorn did not start:\n" + (root / "gunicorn.log").read_text()[-2000:]
                    ) from exc
                time.sleep(0.2)
        # untimed warm-up: every server process answers its first requests slowly
        warm_until = time.time() + args.warmup
        warmers = [
            threading.Thread(target=lambda: [client.get_commits(tc, 0) for _ in iter(lambda: time.time() < warm_until, False)])
            for _ in range(args.writers)
        ]  # fmt: skip
        for t in warmers:
            t.start()
        for t in warmers:
            t.join()

        stop = threading.Event()
        lock = threading.Lock()
        latencies: list[float] = []
        attempts = [0]
        conflicts = [0]
        errors: list[BaseException] = []
        lags: list[int] = []
        backfills = [0]

        def writer(i: int) -> None:
            k = 0
            try:
                while not stop.is_set():
                    t0 = time.perf_counter()
                    while not stop.is_set():
                        with lock:
                            attempts[0] += 1
                        try:
                            # a blind append: the writer learns the latest version from the log's
                            # tail and the owner's answer itself, and a conflict is retried at once
                            # (no backoff: the answer named the winner)
                            commit_via_owner(path, client, [], "WRITE", txn_id=f"w{i}-{k}", is_blind_append=True)
                        except CommitConflictError:
                            with lock:
                                conflicts[0] += 1
                            continue
                        with lock:
                            latencies.append(time.perf_counter() - t0)
                        k += 1
                        break
            except BaseException as exc:  # reported below
                errors.append(exc)

        def backfiller() -> None:
            while not stop.is_set():
                try:
                    owner_services.backfill(table.pk)
                    backfills[0] += 1
                except Exception as exc:  # reported below
                    errors.append(exc)
                    return
                time.sleep(0.01)
            connections.close_all()

        def sampler() -> None:
            while not stop.is_set():
                row = ManagedTable.objects.filter(pk=mt.pk).values_list("latest_version", "backfilled_version").get()
                lags.append(row[0] - row[1])
                time.sleep(0.1)
            connections.close_all()

        start_version = 0
        threads = [threading.Thread(target=writer, args=(i,)) for i in range(args.writers)]
        threads += [threading.Thread(target=backfiller), threading.Thread(target=sampler)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        time.sleep(args.seconds)
        stop.set()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
        if errors:
            raise errors[0]
        owner_services.backfill(table.pk)
        mt.refresh_from_db()
        commits = mt.latest_version - start_version
        versions = sorted(int(p.name[:20]) for p in (path / "_delta_log").glob("*.json") if p.name[:20].isdigit())
        assert versions == list(range(mt.latest_version + 1)), "versions not contiguous"
        assert mt.backfilled_version == mt.latest_version and commits == len(latencies)
        return {
            "database": connection.vendor,
            "writers": args.writers,
            "seconds": round(elapsed, 2),
            "commits": commits,
            "commitsPerSecond": round(commits / elapsed, 1),
            "attempts": attempts[0],
            "conflicts": conflicts[0],
            "commitLatencyMedianMs": round(statistics.median(latencies) * 1000, 1),
            "commitLatencyP95Ms": round(pct(latencies, 0.95) * 1000, 1),
            "backfillRuns": backfills[0],
            "lagSamples": len(lags),
            "lagMedian": statistics.median(lags) if lags else None,
            "lagP95": pct(lags, 0.95),
            "lagMax": max(lags) if lags else None,
        }
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def start_gunicorn(root: Path, workers: str = "4") -> tuple[subprocess.Popen, str, object]:
    port = free_port()
    log = open(root / "gunicorn.log", "w")
    server = subprocess.Popen(
        [str(REPO / ".venv" / "bin" / "gunicorn"), "deltaweb.wsgi", "-w", workers, "-k", "gthread", "--threads", "4",
         "--keep-alive", "30", "-b", f"127.0.0.1:{port}", "--timeout", "120"],
        cwd=REPO,
        env=os.environ.copy(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    return server, f"http://127.0.0.1:{port}", log


def stop_gunicorn(server: subprocess.Popen, log) -> None:
    server.terminate()
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
    log.close()


def make_uc_table(user, name: str, length: int) -> tuple[str, str, Path]:
    """A catalogManaged table of `length` versions: created through the catalog's use cases, the
    versions after 0 written as published files (what publishing leaves), a checkpoint every
    100 as the owner writes them, the owner state at the latest version."""
    from tables.delta.log.checkpoint import write_checkpoint
    from tables.delta.snapshot.state import load_snapshot
    from tables.delta.storage.opening import as_storage
    from tables.delta.write import catalog as cm
    from tables.delta.write.commit import commit_bytes
    from tables.models import ManagedTable, RatifiedCommit
    from tables.services.owner import catalog as owner_uc

    staging = owner_uc.create_staging_table(user, "bench", "s", {"name": name})
    table_id, uri = staging["table-id"], staging["location"]
    path = Path(uri.removeprefix("file://"))
    first = cm.initial_commit(str(path), table_id, SCHEMA)
    owner_uc.create_table(
        user,
        "bench",
        "s",
        {
            "name": name,
            "table-type": "MANAGED",
            "location": uri,
            "properties": {cm.TABLE_ID_KEY: table_id},
            "protocol": owner_uc.REQUIRED_PROTOCOL,
        },
    )
    ict = first["inCommitTimestamp"]
    mt = ManagedTable.objects.get(owner_table_id=table_id)
    rows = []
    for v in range(1, length):  # setup only: plain writes, no fsync per file
        ict += 1
        info = {"timestamp": ict, "operation": "WRITE", "readVersion": v - 1, "txnId": f"setup-{v}"}
        data = commit_bytes([], info, ict)
        (path / "_delta_log" / f"{v:020d}.json").write_bytes(data)
        # the catalog's record of each version, published (what ratifying and publishing leave)
        rows.append(
            RatifiedCommit(
                table_id=mt.table_id, version=v, path=f"_delta_log/_staged_commits/{v:020d}.setup.json",
                size=len(data), modification_time=ict, in_commit_timestamp=ict, txn_id=f"setup-{v}",
                operation="WRITE", backfilled=True, committed_by="setup",
            )
        )  # fmt: skip
        if v % 100 == 0:
            write_checkpoint(as_storage(str(path)), load_snapshot(path, v))
    RatifiedCommit.objects.bulk_create(rows, batch_size=1000)
    ManagedTable.objects.filter(pk=mt.pk).update(
        latest_version=length - 1, backfilled_version=length - 1, latest_ict=ict
    )
    return table_id, uri, path


def server_cpu(master: int) -> float:
    """CPU seconds the server's worker processes have used so far (/proc; 0 where unreadable):
    per commit, a measure the machine's other load does not change much."""
    tick = os.sysconf("SC_CLK_TCK")
    try:
        workers = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    except OSError:
        return 0.0
    total = 0
    for pid in workers:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


def learn(s, table_id: str, uri: str, path: Path) -> tuple[int, int]:
    """The latest version and its ICT: the catalog's answer, or that one published file."""
    answer = s.get_commits(table_id, uri, 0)
    known = {c.version: c.timestamp for c in answer.commits}
    latest = answer.latest_table_version
    if latest in known:
        return latest, known[latest]
    head = (path / "_delta_log" / f"{latest:020d}.json").read_bytes().split(b"\n", 1)[0]
    return latest, json.loads(head)["commitInfo"]["inCommitTimestamp"]


def writer_process(
    i: int, base: str, token: str, table_id: str, uri: str, path: Path, stop, out, keep_going: bool = False
) -> None:
    """One writer in its own process (its own interpreter lock, as separate clients are): stage
    the next version, `commit` it; on a conflict reload and retry at once. Its numbers go to
    `out` when `stop` is set (times from perf_counter: the system's monotonic clock, comparable
    across processes). Any other error ends the writer, unless `keep_going` (a long run under
    faults, benchmarks/load.py): then the commit's outcome is unknown, its txnId is reported as
    unsure and never staged again (so a commit that did land is not committed twice), and the
    writer reloads and goes on."""
    from unitycatalog.client.exceptions import ApiException

    from tables.delta.write import catalog as cm
    from tests.web.uc_sdk import UcSession

    latencies: list[float] = []
    accepted: dict[int, float] = {}
    txns: dict[int, str] = {}  # version -> the txnId the catalog accepted there
    unsure: list[str] = []
    failures: list[str] = []
    spent: dict[str, list[float]] = {"stage": [], "commit": [], "conflict": [], "learn": []}
    attempts = conflicts = 0
    error = None
    s = UcSession(base, token)
    try:
        latest, ict = learn_until(s, table_id, uri, path, stop, keep_going, failures)
        k = 0
        while not stop.is_set():
            t0 = time.perf_counter()
            while not stop.is_set():
                t1 = time.perf_counter()
                txn = f"w{i}-{k}"
                staged = cm.stage_commit(str(path), latest + 1, [], "WRITE", previous_ict=ict, txn_id=txn)
                t2 = time.perf_counter()
                attempts += 1
                spent["stage"].append(t2 - t1)
                try:
                    s.commit(table_id, uri, staged)
                except Exception as exc:
                    conflict = isinstance(exc, ApiException) and exc.status == 409
                    if not conflict and not keep_going:
                        raise
                    t3 = time.perf_counter()
                    if conflict:
                        conflicts += 1
                        spent["conflict"].append(t3 - t2)
                    else:
                        unsure.append(txn)
                        failures.append(f"{type(exc).__name__}: {exc}"[:300])
                        k += 1
                    # the winner, at once: no backoff
                    latest, ict = learn_until(s, table_id, uri, path, stop, keep_going, failures)
                    spent["learn"].append(time.perf_counter() - t3)
                    continue
                now = time.perf_counter()
                spent["commit"].append(now - t2)
                latencies.append(now - t0)
                accepted[staged.version] = now
                txns[staged.version] = txn
                latest, ict, k = staged.version, staged.in_commit_timestamp, k + 1
                break
    except BaseException as exc:  # reported by the parent
        error = f"{type(exc).__name__}: {exc}"[:3000]
    finally:
        s.close()
    out.put({"latencies": latencies, "accepted": accepted, "txns": txns, "unsure": unsure,
             "failures": failures, "spent": spent, "attempts": attempts, "conflicts": conflicts,
             "error": error, "cpu": time.process_time()})  # fmt: skip


def learn_until(s, table_id: str, uri: str, path: Path, stop, keep_going: bool, failures: list[str]) -> tuple[int, int]:
    """learn(); with `keep_going`, asked again every half second until it answers (or `stop`)."""
    while True:
        try:
            return learn(s, table_id, uri, path)
        except Exception as exc:
            if not keep_going or stop.is_set():
                raise
            failures.append(f"{type(exc).__name__}: {exc}"[:300])
            time.sleep(0.5)


class Publisher:
    """The client duty UC assigns, on a thread: publish ratified commits in order and report
    the backfilled version, until `finish()` and nothing is left. `published`: version -> when
    its `_delta_log/<v>.json` was written. An error ends it (in `errors`), unless `keep_going`:
    then it is counted and the publisher tries again a second later."""

    def __init__(self, base: str, token: str, table_id: str, uri: str, path: Path, keep_going: bool = False) -> None:
        self.args = (base, token, table_id, uri, path)
        self.keep_going = keep_going
        self.writers_done = threading.Event()
        self.lock = threading.Lock()
        self.published: dict[int, float] = {}
        self.errors: list[BaseException] = []
        # the publisher's reload, writes, report (and its batch size)
        self.spent: dict[str, list[float]] = {k: [] for k in ("pubGet", "pubWrite", "pubReport", "pubBatch")}
        self.thread = threading.Thread(target=self.run, name="publisher")

    def start(self) -> None:
        self.thread.start()

    def finish(self) -> None:
        """Call after the last writer's last answer: the publisher publishes what is left."""
        self.writers_done.set()
        self.thread.join()

    def run(self) -> None:
        from tests.web.uc_sdk import UcSession

        base, token, *_ = self.args
        s = UcSession(base, token)
        try:
            while True:
                done = self.writers_done.is_set()  # after the last writer's last answer, not before
                try:
                    todo = self.publish_once(s)
                except Exception as exc:
                    self.errors.append(exc)
                    if not self.keep_going:
                        return
                    time.sleep(1)
                    continue
                if done and not todo:
                    return
                if not todo:
                    time.sleep(0.05)  # idle: poll gently, the writers need the server more
        except BaseException as exc:  # reported by the caller
            self.errors.append(exc)
        finally:
            s.close()

    def publish_once(self, s) -> list[tuple[int, str]]:
        from tables.delta.write import catalog as cm

        _base, _token, table_id, uri, path = self.args
        t1 = time.perf_counter()
        answer = s.get_commits(table_id, uri, 0)
        todo = sorted((c.version, c.file_name) for c in answer.commits)
        if todo:
            t2 = time.perf_counter()
            cm.publish(str(path), todo)
            now = time.perf_counter()
            with self.lock:
                for v, _ in todo:
                    self.published.setdefault(v, now)
            s.commit(table_id, uri, None, backfilled=todo[-1][0])
            with self.lock:
                self.spent["pubGet"].append(t2 - t1)
                self.spent["pubWrite"].append(now - t2)
                self.spent["pubReport"].append(time.perf_counter() - now)
                self.spent["pubBatch"].append(len(todo))
        return todo


def uc_round(
    base: str, token: str, table_id: str, uri: str, path: Path, writers: int, seconds: float, server_pid: int
) -> dict:
    """`writers` SDK clients commit for `seconds`; a publisher publishes and reports."""
    import multiprocessing

    from tests.web.uc_sdk import UcSession

    latencies: list[float] = []
    accepted: dict[int, float] = {}  # version -> when its writer heard it was accepted
    attempts, conflicts = [0], [0]
    errors: list[BaseException] = []
    # where a commit's time goes, client side: staging the file, the accepted commit's round
    # trip, a conflict's round trip and the reload after it; the publisher's (Publisher.spent)
    spent: dict[str, list[float]] = {k: [] for k in ("stage", "commit", "conflict", "learn")}

    probe = UcSession(base, token)
    try:
        start, _ = learn(probe, table_id, uri, path)
    finally:
        probe.close()
    ctx = multiprocessing.get_context("fork")  # the parent's Django set-up, no database connection open
    stop_all, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=writer_process, args=(i, base, token, table_id, uri, path, stop_all, out))
        for i in range(writers)
    ]
    pub = Publisher(base, token, table_id, uri, path)
    cpu_before = server_cpu(server_pid)
    started = time.perf_counter()
    for proc in procs:
        proc.start()
    pub.start()
    time.sleep(seconds)
    stop_all.set()
    reports = [out.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
    elapsed = time.perf_counter() - started
    pub.finish()
    errors.extend(pub.errors)
    published = pub.published
    spent.update(pub.spent)
    server_seconds = server_cpu(server_pid) - cpu_before
    for r in reports:
        if r["error"]:
            errors.append(RuntimeError(f"a writer failed: {r['error']}"))
        latencies.extend(r["latencies"])
        accepted.update(r["accepted"])
        attempts[0] += r["attempts"]
        conflicts[0] += r["conflicts"]
        for k, v in r["spent"].items():
            spent[k].extend(v)
    if errors:
        raise errors[0]
    versions = sorted(int(p.name[:20]) for p in (path / "_delta_log").glob("*.json") if p.name[:20].isdigit())
    latest = versions[-1]
    assert versions == list(range(latest + 1)), "versions not contiguous"
    assert sorted(accepted) == list(range(start + 1, latest + 1)), "a commit was lost or counted twice"
    lags = [published[v] - accepted[v] for v in accepted if v in published]
    commits = latest - start
    return {
        "writers": writers,
        "commits": commits,
        "seconds": round(elapsed, 2),
        "commitsPerSecond": round(commits / elapsed, 1),
        "attempts": attempts[0],
        "conflicts": conflicts[0],
        "commitLatencyMedianMs": round(statistics.median(latencies) * 1000, 1) if latencies else None,
        "commitLatencyP95Ms": round(pct(latencies, 0.95) * 1000, 1),
        "publishLagP50Ms": round(pct(lags, 0.5) * 1000, 1),
        "publishLagP95Ms": round(pct(lags, 0.95) * 1000, 1),
        "serverCpuMsPerCommit": round(server_seconds * 1000 / max(commits, 1), 2),
        "writerCpuMsPerCommit": round(sum(r["cpu"] for r in reports) * 1000 / max(commits, 1), 2),
        "clientMs": {
            k: [
                round(pct(v, 0.5) * (1 if k == "pubBatch" else 1000), 1),
                round(pct(v, 0.95) * (1 if k == "pubBatch" else 1000), 1),
            ]
            for k, v in spent.items()
        },
    }


def run_uc(args: argparse.Namespace) -> list[dict]:
    """In a child process whose environment names the database: the UC API matrix."""
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from django.db import connection
    from rest_framework.authtoken.models import Token

    from tables.services.access.roles import WRITER

    call_command("migrate", verbosity=0)
    root = Path(os.environ["DELTAWEB_ALLOWED_ROOTS"])
    user = User.objects.get_or_create(username="bench-writer")[0]
    user.groups.add(Group.objects.get_or_create(name=WRITER)[0])
    token = Token.objects.get_or_create(user=user)[0].key
    tables = {}
    for length in args.lengths:
        tables[length] = make_uc_table(user, f"t{length}_{os.getpid()}_{int(time.time())}", length)
    vendor = connection.vendor
    connection.close()
    server, base, log = start_gunicorn(root)
    results = []
    try:
        deadline = time.time() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])), timeout=1):
                    break
            except OSError as exc:
                if time.time() > deadline or server.poll() is not None:
                    raise RuntimeError(
                        "gunicorn did not start:\n" + (root / "gunicorn.log").read_text()[-2000:]
                    ) from exc
                time.sleep(0.2)
        for length in args.lengths:
            table_id, uri, path = tables[length]
            # untimed: every server process answers its first requests slowly (lazy imports, URL
            # resolver, connections); seconds of that would be counted against the first row
            uc_round(base, token, table_id, uri, path, max(args.writer_counts), args.warmup, server.pid)
            for writers in args.writer_counts:
                r = uc_round(base, token, table_id, uri, path, writers, args.seconds, server.pid)
                results.append({"database": vendor, "logLength": length, **r})
    finally:
        stop_gunicorn(server, log)
    return results


def auto_postgres(workdir: Path) -> tuple[str, object] | None:
    """A private PostgreSQL cluster on a free loopback port (the installed server), or None."""
    import glob

    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        return None
    bindir = Path(found[-1]).parent
    data = workdir / "pg"
    data.mkdir()
    port = free_port()
    run_as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if run_as:
        shutil.chown(workdir, "postgres")
        shutil.chown(data, "postgres")
    subprocess.run([*run_as, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"],
                   check=True, capture_output=True)  # fmt: skip
    opts = f"-p {port} -k {workdir} -c listen_addresses=127.0.0.1 -c fsync=on"
    subprocess.run([*run_as, str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-w", "start", "-l",
                    str(workdir / "pg.log")], check=True, capture_output=True)  # fmt: skip

    def stop() -> None:
        subprocess.run([*run_as, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"], capture_output=True)

    return f"postgres://postgres@127.0.0.1:{port}/postgres", stop


def child(kind: str, database_url: str, args: argparse.Namespace, workdir: Path) -> list[dict]:
    root = workdir / kind
    root.mkdir(parents=True)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "deltaweb.settings",
        "PYTHONPATH": str(REPO),
        "DATABASE_URL": database_url,
        "DELTAWEB_ALLOWED_ROOTS": str(root),
        "DELTAWEB_OWNER_AUTO_BACKFILL": "0",  # the backfill loop (legacy) or the publisher does it
        "DELTAWEB_RESULTS_DIR": str(root / "results"),
    }
    cmd = [
        sys.executable, __file__, "--child", "--seconds", str(args.seconds), "--writers", str(args.writers),
        "--warmup", str(args.warmup),
        "--lengths", ",".join(map(str, args.lengths)), "--writer-counts", ",".join(map(str, args.writer_counts)),
    ]  # fmt: skip
    if args.legacy:
        cmd.append("--legacy")
    budget = args.seconds * len(args.lengths) * len(args.writer_counts) + 900
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=budget)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} run failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return out if isinstance(out, list) else [out]


def print_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0, help="untimed seconds before each table's rows")
    parser.add_argument("--writers", type=int, default=8, help="writers of the --legacy run")
    parser.add_argument("--writer-counts", type=ints, default=[1, 8])
    parser.add_argument("--lengths", type=ints, default=[100, 10_000])
    parser.add_argument("--postgres", default=os.environ.get("DELTAWEB_BENCH_POSTGRES", ""))
    parser.add_argument("--legacy", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(args) if args.legacy else run_uc(args)))
        return
    workdir = Path(tempfile.mkdtemp(prefix="deltaweb-owner-bench-"))
    results: list[dict] = []
    stop_pg = None
    try:
        results += child("sqlite", f"sqlite:///{workdir / 'owner.sqlite3'}", args, workdir)
        postgres = args.postgres
        if postgres == "auto":
            started = auto_postgres(workdir)
            postgres, stop_pg = started if started else ("", None)
        if postgres:
            results += child("postgresql", postgres, args, workdir)
    finally:
        if stop_pg is not None:
            stop_pg()
        shutil.rmtree(workdir, ignore_errors=True)
    if args.legacy:
        print(f"commit-owner API: {args.writers} writers over HTTP (gunicorn), {args.seconds:.0f} s per database")
        print_table(
            ("database", "commits/s", "commits", "conflicts", "latency p50/p95 ms", "lag p50/p95/max"),
            [
                (
                    r["database"],
                    f"{r['commitsPerSecond']:.1f}",
                    str(r["commits"]),
                    str(r["conflicts"]),
                    f"{r['commitLatencyMedianMs']:.0f} / {r['commitLatencyP95Ms']:.0f}",
                    f"{r['lagMedian']} / {r['lagP95']} / {r['lagMax']}",
                )
                for r in results
            ],
        )
    else:
        print(f"Unity Catalog API (official SDK clients, gunicorn gthread), {args.seconds:.0f} s per row")
        print_table(
            ("database", "log length", "writers", "commits/s", "commits", "conflicts", "latency p50/p95 ms",
             "publish lag p50/p95 ms", "server CPU ms/commit"),
            [
                (
                    r["database"], str(r["logLength"]), str(r["writers"]), f"{r['commitsPerSecond']:.1f}",
                    str(r["commits"]), str(r["conflicts"]),
                    f"{r['commitLatencyMedianMs']:.0f} / {r['commitLatencyP95Ms']:.0f}",
                    f"{r['publishLagP50Ms']:.0f} / {r['publishLagP95Ms']:.0f}", f"{r['serverCpuMsPerCommit']:.1f}",
                )
                for r in results
            ],
        )  # fmt: skip
    if not args.postgres:
        print("(PostgreSQL not measured: pass --postgres postgres://user@host:port/db, or --postgres auto)")
    print(json.dumps({"benchmark": "owner-legacy" if args.legacy else "owner-uc", "results": results}))


if __name__ == "__main__":
    main()
