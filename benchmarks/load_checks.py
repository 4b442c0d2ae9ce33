"""The invariants a load run (benchmarks/load.py) checks once it has settled, each pass/fail
with its numbers:

  jobs       no Job left queued or running; the failed ones by reason; every job the sweep
             failed as silent was running when a worker was killed (else the sweep took a live
             worker for dead)
  restores   every restore request terminal; the restored table's log has exactly one RESTORE
             commit per succeeded request (its txnId, at its result version) and none for any
             other request; versions contiguous
  catalog    the catalogManaged table's log: versions contiguous from 0, every commit a writer
             was told was accepted there with its txnId, no txnId twice, nothing else of the
             writers' but commits whose answer was lost; the catalog's latest and published
             versions the log's latest
  synced     after a final sync, each table's cached history rows are exactly its log's
             versions (the database, and the history API's count)

The database is read by this file run as a script (a child with Django set up, the run's
environment): `--wait S` first waits up to S seconds for no job and no restore to be active.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# what the sweep writes on a job it failed as silent (tables/services/jobs/lifecycle.py), in every wording so far
SILENT_JOB = "no sign of life since"
RESTORE_ACTIVE = ("approved", "queued", "running")
# a running job beats every DELTAWEB_JOB_HEARTBEAT_SECONDS (2 in load.py's --beat); a kill lands
# within this many seconds after its last beat (a beat can be late on a loaded machine)
BEAT_SLACK = 10.0


def inspect(env: dict, wait: float = 0.0) -> dict:
    """The database's facts (see `snapshot`), after waiting up to `wait` s for a settled state."""
    cmd = [sys.executable, __file__, "--wait", str(wait)]
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=wait + 600)
    if out.returncode != 0:
        raise SystemExit(f"inspecting the database failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _epoch(dt) -> float | None:
    return dt.timestamp() if dt is not None else None


def snapshot() -> dict:
    """Jobs, restore requests, cached history versions per table, the catalog's owner rows,
    alert scans and deliveries by status (in a process with Django set up)."""
    from alerts.models import Delivery, Scan
    from tables.models import Commit, Job, ManagedTable, RestoreRequest

    jobs = [
        {"id": j.pk, "kind": j.kind, "table": j.table_id, "status": j.status, "stage": j.stage, "error": j.error,
         "created": _epoch(j.created_at), "started": _epoch(j.started_at), "finished": _epoch(j.finished_at),
         "progress": _epoch(j.progress_at)}
        for j in Job.objects.order_by("pk")
    ]  # fmt: skip
    restores = [
        {"id": r.pk, "status": r.status, "attempts": r.attempts, "resultVersion": r.result_version, "txn": r.txn,
         "error": r.error, "stage": r.stage, "alreadyCommitted": bool((r.result or {}).get("alreadyCommitted")),
         "requeuedAfter": requeue_gaps(r)}
        for r in RestoreRequest.objects.order_by("pk")
    ]  # fmt: skip
    commits: dict[int, list[int]] = defaultdict(list)
    for table, version in Commit.objects.order_by("table_id", "version").values_list("table_id", "version"):
        commits[table].append(version)
    managed = {
        m.table_id: {"latest": m.latest_version, "backfilled": m.backfilled_version} for m in ManagedTable.objects.all()
    }
    return {
        "jobs": jobs,
        "restores": restores,
        "commits": commits,
        "managed": managed,
        "scans": dict(Counter(Scan.objects.values_list("status", flat=True))),
        "deliveries": dict(Counter(Delivery.objects.values_list("status", flat=True))),
    }


def requeue_gaps(req) -> list[float]:
    """Seconds from each claim of `req` to the sweep putting it back in the queue (its events)."""
    if req.attempts < 2:
        return []
    gaps, claimed = [], None
    for e in req.events.order_by("pk"):
        if e.to_status == "running":
            claimed = e.at
        elif e.from_status == "running" and e.to_status == "queued" and claimed is not None:
            gaps.append(round((e.at - claimed).total_seconds(), 1))
    return gaps


def _span(values: list[float]) -> list[float]:
    return [round(min(values), 1), round(max(values), 1)] if values else []


def wait_settled(wait: float) -> float:
    """Seconds waited until no job is queued or running and no restore approved, queued or
    running (at most `wait`)."""
    from tables.models import Job, RestoreRequest

    t0 = time.monotonic()
    while time.monotonic() - t0 < wait:
        busy = Job.objects.filter(status__in=("queued", "running")).exists()
        busy = busy or RestoreRequest.objects.filter(status__in=RESTORE_ACTIVE).exists()
        if not busy:
            break
        time.sleep(5)
    return round(time.monotonic() - t0, 1)


def read_log(path: Path) -> dict[int, dict]:
    """version -> its commitInfo's operation and txnId, from every `_delta_log/<v>.json`."""
    out = {}
    for f in (path / "_delta_log").glob("*.json"):
        if not re.fullmatch(r"\d{20}\.json", f.name):
            continue
        info: dict = {}
        for line in f.read_text().splitlines():
            if line.strip():
                action = json.loads(line)
                if "commitInfo" in action:
                    info = action["commitInfo"]
                    break
        out[int(f.name[:20])] = {"operation": info.get("operation"), "txnId": info.get("txnId")}
    return out


def contiguous(versions) -> bool:
    return sorted(versions) == list(range(len(versions)))


def _reason(job: dict) -> str:
    """A failed job's error without its ids and times: the reasons counted together."""
    if SILENT_JOB in job["error"]:
        return f"the worker stopped (sweep), during '{re.sub(r'[0-9]+', 'N', job['stage'])}'"
    return re.sub(r"\d+", "N", job["error"])[:160]


def killed_at(job: dict, k: float) -> bool:
    """Whether a kill at time `k` took the worker running `job`: a job the sweep failed, claimed
    by then, its last sign of life at most BEAT_SLACK before it (a job running at a kill can end
    no other way)."""
    if job["started"] is None or job["progress"] is None or SILENT_JOB not in job["error"]:
        return False
    return job["started"] - 1 <= k and job["progress"] - 1 <= k <= job["progress"] + BEAT_SLACK


def check_jobs(db: dict, kills: list[float]) -> dict:
    jobs = db["jobs"]
    by_status = Counter(j["status"] for j in jobs)
    active = [j["id"] for j in jobs if j["status"] in ("queued", "running")]
    failed = [j for j in jobs if j["status"] == "failed"]
    swept = [j for j in failed if SILENT_JOB in j["error"]]
    # a job the sweep failed must have had its worker killed right after its last sign of life
    live = [j["id"] for j in swept if not any(killed_at(j, k) for k in kills)]
    # how many kills took a running job with them: the faults that tested something
    hits = [k for k in kills if any(killed_at(j, k) for j in swept)]
    return {
        "pass": not active and not live,
        "jobs": len(jobs),
        "byKind": dict(Counter(j["kind"] for j in jobs)),
        "byStatus": dict(by_status),
        "active": active,
        "failedReasons": dict(Counter(_reason(j) for j in failed).most_common()),
        "killsThatTookAJob": len(hits),
        "sweptAsSilent": len(swept),
        # from the last sign of life to the sweep's failure: the silence allowed plus the beat's period
        "sweptAfterSeconds": _span([j["finished"] - j["progress"] for j in swept]),
        "sweptWithoutAKill": live,
    }


def check_restores(db: dict, log: dict[int, dict]) -> dict:
    reqs = db["restores"]
    terminal = {"rejected", "withdrawn", "succeeded", "failed", "conflict"}
    open_ = [(r["id"], r["status"]) for r in reqs if r["status"] not in terminal]
    by_txn: dict[str, list[int]] = defaultdict(list)
    for v, info in log.items():
        if info["operation"] == "RESTORE":
            by_txn[str(info["txnId"])].append(v)
    succeeded = [r for r in reqs if r["status"] == "succeeded"]
    wrong = [
        (r["id"], r["resultVersion"], by_txn.get(r["txn"], []))
        for r in succeeded
        if by_txn.get(r["txn"], []) != [r["resultVersion"]]
    ]
    done_txns = {r["txn"] for r in succeeded}
    orphans = {t: vs for t, vs in by_txn.items() if t not in done_txns}
    return {
        "pass": not open_ and not wrong and not orphans and contiguous(log),
        "requests": len(reqs),
        "byStatus": dict(Counter(r["status"] for r in reqs)),
        "notTerminal": open_,
        "restoreCommits": sum(len(vs) for vs in by_txn.values()),
        "succeeded": len(succeeded),
        "claimedMoreThanOnce": sum(r["attempts"] > 1 for r in reqs),
        "foundEarlierCommit": sum(r["alreadyCommitted"] for r in reqs),
        "requeuedAfterSeconds": _span([g for r in reqs for g in r.get("requeuedAfter", [])]),
        "notOneCommitAtItsVersion": wrong,
        "restoreCommitsOfNoSucceededRequest": orphans,
        "logVersions": len(log),
        "versionsContiguous": contiguous(log),
        "failedErrors": dict(Counter(re.sub(r"\d+", "N", r["error"])[:160] for r in reqs if r["status"] == "failed")),
    }


def check_catalog(log: dict[int, dict], accepted: dict[int, str], unsure: set[str], managed: dict) -> dict:
    """`accepted`: version -> the txnId its writer was told the catalog accepted there;
    `unsure`: txnIds whose commit got no answer (may or may not be in the log)."""
    txn_versions: dict[str, list[int]] = defaultdict(list)
    for v, info in log.items():
        if info["txnId"] is not None:
            txn_versions[str(info["txnId"])].append(v)
    twice = {t: vs for t, vs in txn_versions.items() if len(vs) > 1}
    lost = sorted(v for v, t in accepted.items() if log.get(v, {}).get("txnId") != t)
    told = set(accepted.values())
    writers = {t for t in txn_versions if re.fullmatch(r"w\d+-\d+", t)}
    unexplained = sorted(writers - told - unsure)
    latest = max(log) if log else -1
    in_catalog = managed.get("latest") == latest and managed.get("backfilled") == latest
    return {
        "pass": contiguous(log) and not lost and not twice and not unexplained and in_catalog,
        "logVersions": len(log),
        "latest": latest,
        "versionsContiguous": contiguous(log),
        "acceptedByWriters": len(accepted),
        "acceptedNotInLog": lost[:20],
        "txnIdsTwice": dict(list(twice.items())[:20]),
        "unsureCommits": len(unsure),
        "unsureThatLanded": len(writers & unsure),
        "writerCommitsNeverAnswered": unexplained[:20],
        "catalogLatest": managed.get("latest"),
        "catalogPublished": managed.get("backfilled"),
    }


def check_synced(db: dict, logs: dict[str, tuple[int, dict]], api_counts: dict[str, int | None]) -> dict:
    """`logs`: table name -> (table id, its log); `api_counts`: the history API's count."""
    tables = {}
    for name, (pk, log) in logs.items():
        cached = db["commits"].get(str(pk), db["commits"].get(pk, []))
        missing, extra = sorted(set(log) - set(cached)), sorted(set(cached) - set(log))
        tables[name] = {
            "logVersions": len(log),
            "cachedRows": len(cached),
            "apiCount": api_counts.get(name),
            "missing": missing[:20],
            "extra": extra[:20],
            "pass": not missing and not extra and len(cached) == len(log) == api_counts.get(name),
        }
    return {"pass": all(t["pass"] for t in tables.values()), "tables": tables}


def main() -> None:
    import argparse

    import django

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wait", type=float, default=0.0)
    args = ap.parse_args()
    django.setup()
    waited = wait_settled(args.wait)
    print(json.dumps({"waited": waited, **snapshot()}))


if __name__ == "__main__":
    main()
