"""Cold snapshot load from S3-compatible storage: deltaweb vs delta-rs on a local moto server.

Usage: .venv/bin/python benchmarks/objectstore.py [--reps N] [--commits N] [--latency-ms MS] [--workdir DIR]
                                                 [--large] [--no-serial]

Tables, uploaded to one bucket of a moto server started for the run (loopback, no auth):
  commits     N commits (default 1,000) of 2 adds each, no checkpoint: every commit is a GET
  checkpoint  the same table with a delta-rs checkpoint at its last version but 10
  golden      the golden table dv-partitioned-with-checkpoint (when present)
and with --large the 300,000-file table of snapshot_load.py (3 commits of 100,000 adds with
statistics, JSON only: files300k) and its copy with a delta-rs checkpoint (files300k-cp).
--no-serial leaves out the one-request-after-another case (minutes on a 10,000-commit log).
--log DIR adds the table at DIR as `log` (benchmarks/million.py's 1,000,000-commit log): put
into moto's store by the server's own process before it serves (a million uploads over HTTP
take most of an hour), then read over HTTP like the others; only its snapshot is measured
(opening it), since moto lists a bucket by walking every key it holds.

Cases, each in a fresh subprocess per repetition (deltaweb and delta-rs interleaved):
  deltaweb         load_snapshot("s3://...") then file_paths(); commits fetched concurrently
  deltaweb-serial  the same with read_many as a loop (one round trip after another)
  delta-rs         DeltaTable("s3://...", storage_options=...) then file_uris()
and, for the commits table, `history` of the newest 100 commits (history_rows with a limit;
delta-rs: dt.history(100)).

Request counts come from moto's request log (one line per HTTP request) around each run.
Loopback requests take a few milliseconds where a real object store takes 10-50 ms, so the
moto server holds every request --latency-ms (default 20) before answering; --latency-ms 0
measures moto alone (then moto's own throughput, a few hundred requests a second, is the
limit for everyone).
Prints a table and, last, one JSON line with every number.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BUCKET = "bench"
GOLDEN = Path(os.environ.get("DELTAWEB_GOLDEN_TABLES", ROOT.parent / "shared" / "delta-tables" / "golden"))
GOLDEN_TABLE = "dv-partitioned-with-checkpoint"
LIBS = ("deltaweb", "deltaweb-serial", "delta-rs")


def env_for(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_REGION": "us-east-1",
    }


# ---------------------------------------------------------------- worker (one measured run)


def worker(lib: str, op: str, location: str) -> None:
    """Runs in a fresh interpreter with the AWS_* environment set; prints one JSON line."""
    t_import = time.perf_counter()
    if lib.startswith("deltaweb"):
        from tables.delta.history.timeline import history_rows
        from tables.delta.history.timestamps import commit_times
        from tables.delta.snapshot.state import load_snapshot
        from tables.delta.storage.objectstore import ObjectStoreStorage
        from tables.delta.storage.opening import open_storage

        if lib == "deltaweb-serial":
            ObjectStoreStorage.read_many = lambda self, paths: [self.read(p) for p in paths]  # type: ignore[method-assign]
        t0 = time.perf_counter()
        storage = open_storage(location)
        if op == "snapshot":
            snap = load_snapshot(storage)
            n, version = len(snap.file_paths()), snap.version
        else:
            rows = history_rows(commit_times(storage), limit=100)
            n, version = len(rows), rows[0]["version"]
    else:
        import deltalake

        options = {k: os.environ[k] for k in env_for("")}
        t0 = time.perf_counter()
        dt = deltalake.DeltaTable(location, storage_options=options)
        if op == "snapshot":
            n, version = len(dt.file_uris()), dt.version()
        else:
            rows = dt.history(100)
            n, version = len(rows), rows[0]["version"]
    t1 = time.perf_counter()
    print(json.dumps({"import_s": t0 - t_import, "total_s": t1 - t0, "n": n, "version": version}))


# ---------------------------------------------------------------- server and data


class Moto:
    """moto's server as a subprocess (see serve); its request log (stderr) counts requests."""

    def __init__(self, workdir: Path, latency_ms: float = 0.0, preload: dict[str, Path] | None = None) -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{port}"
        self.log_path = workdir / "moto.log"
        self._log = open(self.log_path, "w")  # closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve", str(port), str(latency_ms)],
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            env={**os.environ, "BENCH_MOTO_PRELOAD": json.dumps({k: str(v) for k, v in (preload or {}).items()})},
        )
        for _ in range(6000 if preload else 200):  # a million objects take the server a minute
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1).read()
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("moto_server did not start")

    def requests(self) -> int:
        time.sleep(0.05)  # the last request's log line lands after its response
        with open(self.log_path) as fh:
            return sum(1 for line in fh if '" 2' in line or '" 3' in line or '" 4' in line or '" 5' in line)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self._log.close()


def serve(port: int, latency_ms: float) -> None:
    """moto's server with every request held `latency_ms` first (run as a subprocess): the
    round-trip time of a real object store, so that one request after another costs what it
    costs against S3 (moto itself answers loopback requests in a few milliseconds)."""
    from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import run_simple

    preload = json.loads(os.environ.get("BENCH_MOTO_PRELOAD") or "{}")
    if preload:
        _preload(preload)
    app = DomainDispatcherApplication(create_backend_app)
    delay = latency_ms / 1000

    def delayed(environ, start_response):
        if delay and not environ.get("PATH_INFO", "").startswith("/moto-api"):
            time.sleep(delay)
        return app(environ, start_response)

    run_simple("127.0.0.1", port, delayed, threaded=True, request_handler=MotoRequestHandler)


def _preload(tables: dict[str, str]) -> None:
    """Every file of each table put into the bucket by moto's own backend (in the server's
    process, before it serves)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    backend.create_bucket(BUCKET, "us-east-1")
    for name, root in tables.items():
        for f in sorted(Path(root).rglob("*")):
            if f.is_file():
                backend.put_object(BUCKET, f"{name}/{f.relative_to(root).as_posix()}", f.read_bytes())


def write_commits(root: Path, commits: int) -> None:
    """A table of `commits` small commits (2 adds each) written directly."""
    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    t0 = 1_700_000_000_000
    for v in range(commits):
        lines = [{"commitInfo": {"timestamp": t0 + v * 1000, "operation": "WRITE", "engineInfo": "bench"}}]
        if v == 0:
            lines.append({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}})
            lines.append(
                {
                    "metaData": {
                        "id": str(uuid.UUID(int=7)),
                        "format": {"provider": "parquet", "options": {}},
                        "schemaString": json.dumps(schema),
                        "partitionColumns": [],
                        "configuration": {},
                        "createdTime": t0,
                    }
                }
            )
        for i in range(2):
            lines.append(
                {
                    "add": {
                        "path": f"part-{v:05d}-{i}.parquet",
                        "partitionValues": {},
                        "size": 1000 + i,
                        "modificationTime": t0 + v * 1000,
                        "dataChange": True,
                    }
                }
            )
        (log / f"{v:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def prepare_large(workdir: Path) -> dict[str, Path]:
    """snapshot_load.py's 300,000-file table and its checkpointed copy (generated once)."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import snapshot_load

    paths = snapshot_load.prepare(workdir)
    return {"files300k": paths["json"], "files300k-cp": paths["checkpoint"]}


def prepare(workdir: Path, commits: int) -> dict[str, Path]:
    base = workdir / "objectstore"
    marker = base / ".complete"
    params = {"commits": commits, "gen": 1}
    tables = {"commits": base / "commits", "checkpoint": base / "checkpoint"}
    if not (marker.exists() and json.loads(marker.read_text()) == params):
        if base.exists():
            shutil.rmtree(base)
        write_commits(tables["commits"], commits)
        write_commits(tables["checkpoint"], commits - 10)
        import deltalake

        deltalake.DeltaTable(str(tables["checkpoint"])).create_checkpoint()
        # ten more commits after the checkpoint (the usual shape of a live table)
        tmp = base / "tail"
        write_commits(tmp, commits)
        for v in range(commits - 10, commits):
            shutil.copy(tmp / "_delta_log" / f"{v:020d}.json", tables["checkpoint"] / "_delta_log")
        shutil.rmtree(tmp)
        marker.write_text(json.dumps(params))
    if (GOLDEN / GOLDEN_TABLE).is_dir():
        tables["golden"] = GOLDEN / GOLDEN_TABLE
    return tables


def upload(endpoint: str, tables: dict[str, Path]) -> None:
    import boto3

    client = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="bench", aws_secret_access_key="bench", region_name="us-east-1"
    )
    try:
        client.create_bucket(Bucket=BUCKET)
    except client.exceptions.BucketAlreadyOwnedByYou:  # the server made it with what it holds (--log)
        pass
    files = [(f, f"{name}/{f.relative_to(root).as_posix()}") for name, root in tables.items() for f in root.rglob("*")]
    files = [(str(f), key) for f, key in files if f.is_file()]
    # in parallel: the server holds every request, and a 10,000-commit log is 10,000 objects
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda item: client.upload_file(item[0], BUCKET, item[1]), files))


def run_worker(lib: str, op: str, location: str, env: dict[str, str], moto: Moto) -> dict:
    before = moto.requests()
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", lib, op, location],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"worker {lib} {op} on {location} failed (exit {proc.returncode}):\n{proc.stderr}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["requests"] = moto.requests() - before
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5, help="repetitions per case (medians are reported)")
    ap.add_argument("--commits", type=int, default=1000)
    ap.add_argument("--latency-ms", type=float, default=20.0, help="round-trip time added to every request")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/deltaweb-bench"))
    ap.add_argument("--large", action="store_true", help="also the 300,000-file table, JSON only and checkpointed")
    ap.add_argument("--no-serial", action="store_true", help="leave out deltaweb-serial")
    ap.add_argument("--only", help="comma-separated tables to measure (commits, checkpoint, golden, files300k, ...)")
    ap.add_argument("--log", type=Path, help="also this table, as `log`, put into the server's store directly")
    ap.add_argument("--worker", nargs=3, metavar=("LIB", "OP", "LOCATION"), help=argparse.SUPPRESS)
    ap.add_argument("--serve", nargs=2, metavar=("PORT", "LATENCY_MS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(int(args.serve[0]), float(args.serve[1]))
        return
    if args.worker:
        worker(*args.worker)
        return
    args.workdir.mkdir(parents=True, exist_ok=True)
    tables = prepare(args.workdir, args.commits)
    if args.large:
        tables |= prepare_large(args.workdir)
    if args.only:
        tables = {name: path for name, path in tables.items() if name in args.only.split(",")}
    libs = tuple(lib for lib in LIBS if not (args.no_serial and lib == "deltaweb-serial"))
    t = time.perf_counter()
    preload = {"log": args.log} if args.log else None
    moto = Moto(args.workdir, args.latency_ms, preload)
    if preload:
        print(f"moto holds {args.log} as log after {time.perf_counter() - t:.1f}s")
    try:
        env = env_for(moto.endpoint)
        t = time.perf_counter()
        upload(moto.endpoint, tables)
        print(f"uploaded {', '.join(tables)} to {moto.endpoint} in {time.perf_counter() - t:.1f}s")
        print(f"the server holds every request {args.latency_ms:g} ms")
        cases = [(name, "snapshot") for name in [*tables, *(preload or {})]]
        cases += [("commits", "history")] * ("commits" in tables)
        results: dict[str, dict[str, list[dict]]] = {}
        for name, op in cases:
            case = f"{name}/{op}"
            results[case] = {lib: [] for lib in libs}
            location = f"s3://{BUCKET}/{name}"
            for rep in range(args.reps):
                order = libs if rep % 2 == 0 else libs[::-1]
                for lib in order:
                    results[case][lib].append(run_worker(lib, op, location, env, moto))
            done = ", ".join(
                f"{lib} {statistics.median(r['total_s'] for r in runs):.2f}s" for lib, runs in results[case].items()
            )
            print(f"{case}: {done}", flush=True)
            versions = {r["version"] for runs in results[case].values() for r in runs}
            counts = {r["n"] for runs in results[case].values() for r in runs}
            if len(versions) != 1 or len(counts) != 1:
                raise SystemExit(f"{case}: the libraries disagree: versions {versions}, counts {counts}")
    finally:
        moto.stop()

    summary = {}
    print(f"\n{'case':<26}{'library':<17}{'median ms':>10}{'requests':>10}{'vs delta-rs':>13}")
    for case, by_lib in results.items():
        rs = statistics.median(r["total_s"] for r in by_lib["delta-rs"])
        summary[case] = {}
        for lib, runs in by_lib.items():
            med = statistics.median(r["total_s"] for r in runs)
            req = statistics.median(r["requests"] for r in runs)
            summary[case][lib] = {"median_ms": round(med * 1000, 1), "requests": req, "ratio_vs_deltars": med / rs}
            print(f"{case:<26}{lib:<17}{med * 1000:>10.1f}{req:>10.0f}{med / rs:>12.2f}x")
    print(json.dumps({"reps": args.reps, "commits": args.commits, "latency_ms": args.latency_ms, "results": summary}))


if __name__ == "__main__":
    main()
