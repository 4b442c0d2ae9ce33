"""Running an approved restore on a worker: claim, heartbeat, commit, verify; and putting
back in the queue the runs whose worker went silent.

A worker claims the run with a conditional UPDATE (queued -> running) that must touch
exactly one row, and the engine (Spark, or the pure planner when
DELTAWEB_RESTORE_ENGINE=local) plans again on the current head; apply_approved_plan commits
only the approved change (the core's approved_change_on), with the request's txnId, so a
retried run never commits twice. A request that recovers files first copies them back from the
bucket's noncurrent versions before it plans (tables.services.restores.recovery). A request
planned on a pin's kept table plans again on it and, once the approved change is confirmed,
copies the files the table lacks from the pin store, each checked by its size, before it
commits (tables.delta.restore.from_pin). Workers that die are noticed by requeue_stuck_restores
(a beat task).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import unquote

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from tables.delta import errors as delta_errors
from tables.delta.restore.commit import approved_change_on, commit_restore, files_added_since, find_restore_commit
from tables.delta.restore.from_pin import bring_back
from tables.delta.restore.plan import RestorePlan, plan_restore
from tables.delta.snapshot.replay import identity_keys
from tables.delta.storage.opening import as_storage
from tables.delta.write.committer import committer_for
from tables.models import RestoreRequest, RestoreStatus, Table
from tables.services.errors import is_spark_error, one_line, public_message, spark_failure
from tables.services.jobs import faults
from tables.services.jobs import lifecycle as jobs
from tables.services.managed.use_cases import backfill
from tables.services.owner.access import owner_of
from tables.services.restores.recovery import recover_files
from tables.services.restores.requests import MAX_TEXT, event, plan_payload, send_restore_on_commit
from tables.services.sync.store import start_sync
from tables.services.versions.read import snapshot_at

logger = logging.getLogger("tables.restores")

MAX_RESTORE_ATTEMPTS = 3  # claims by workers that then went silent, before the request fails


@dataclass(frozen=True)
class Planner:
    """An engine that plans an approved restore again at run time, on the current head:
    planner(location, *, version, timestamp, ignore_missing_files, allow_protocol_downgrade,
    check_files, progress, where[, owner]) -> RestorePlan. Spark's (tables.tasks) or the pure
    plan_restore (`local_planner`); both make the same plan (same fingerprint). Its `name` is
    recorded with the result: the engine that planned, which for a managed table is always the
    local one, whatever was asked for."""

    name: str
    plan: Callable[..., RestorePlan]

    def __call__(self, location: str, **kwargs: Any) -> RestorePlan:
        return self.plan(location, **kwargs)


class _ClaimLost(Exception):
    """Another worker took the run over (this one was thought dead): stop without writing."""


class RestoreRun:
    """One worker's claim on a request: progress, heartbeat and the final write all go
    through an UPDATE conditional on (running, this attempt)."""

    def __init__(self, req: RestoreRequest, attempt: int) -> None:
        self.req, self.attempt = req, attempt

    def _mine(self):
        return RestoreRequest.objects.filter(pk=self.req.pk, status=RestoreStatus.RUNNING, attempts=self.attempt)

    def progress(self, stage: str, done: int | None = 0, total: int | None = None, **_ignored: Any) -> None:
        updated = self._mine().update(
            stage=str(stage)[:200], done=int(done or 0), total=total, progress_at=timezone.now()
        )
        if updated != 1:
            raise _ClaimLost()

    def beat(self) -> None:
        self._mine().update(progress_at=timezone.now())

    def heartbeat(self):
        """Touch progress_at from a thread while the engine works (jobs.heartbeat)."""
        every = float(settings.DELTAWEB_RESTORE_HEARTBEAT_SECONDS)
        return jobs.heartbeat(self.beat, every, f"restore-{self.req.pk}-heartbeat")

    def finish(self, status: str, note: str, **fields: Any) -> bool:
        # what the requester reads names the table, not its location on the server
        if fields.get("error"):
            fields["error"] = public_message(fields["error"], self.req.table)
        note = public_message(note, self.req.table)
        if status in RestoreStatus.terminal():
            fields.setdefault("finished_at", timezone.now())
        with transaction.atomic():
            done = self._mine().update(status=status, progress_at=timezone.now(), **fields) == 1
            if done:
                event(self.req, None, RestoreStatus.RUNNING, status, note)
        return done


def claim_restore(req: RestoreRequest) -> int | None:
    """queued -> running, touching exactly one row; the attempt number, or None."""
    now = timezone.now()
    claimed = RestoreRequest.objects.filter(pk=req.pk, status=RestoreStatus.QUEUED).update(
        status=RestoreStatus.RUNNING,
        started_at=now,
        progress_at=now,
        attempts=F("attempts") + 1,
        stage="claimed by a worker",
        done=0,
        total=None,
        error="",
    )
    if claimed != 1:
        return None
    attempt = RestoreRequest.objects.values_list("attempts", flat=True).get(pk=req.pk)
    event(req, None, RestoreStatus.QUEUED, RestoreStatus.RUNNING, f"claimed by a worker (attempt {attempt})")
    return attempt


def run_restore(request_id: int, planner: Planner) -> dict[str, Any]:
    """Run an approved, queued restore (the Celery task calls this). Outcomes: succeeded
    (with the new version and its checks), stale (the plan on the current head is not the
    approved one: approve again), failed (missing files, or any error, in one line), conflict
    (a competing commit, named). Safe to run twice: only one claim wins, and the commit
    carries the request's txnId."""
    req = RestoreRequest.objects.select_related("table", "requested_by", "approver").filter(pk=request_id).first()
    if req is None:
        return {"skipped": True, "reason": f"there is no restore request {request_id}"}
    attempt = claim_restore(req)
    if attempt is None:
        status = RestoreRequest.objects.filter(pk=request_id).values_list("status", flat=True).first()
        return {"skipped": True, "reason": f"restore #{request_id} is {status}, not queued"}
    run = RestoreRun(req, attempt)
    try:
        with run.heartbeat():
            outcome = _execute(req, run, planner)
    except _ClaimLost:
        return {"skipped": True, "reason": "another worker took the restore over"}
    except delta_errors.MissingFilesError as exc:
        run.finish(RestoreStatus.FAILED, "files to restore are missing", error=exc.message, result=_missing(exc))
        return {"status": RestoreStatus.FAILED}
    except delta_errors.CommitConflictError as exc:
        versions = exc.details.get("versions") or [exc.version]
        note = f"conflicts with version{'s' if len(versions) > 1 else ''} {', '.join(map(str, versions))}"
        run.finish(RestoreStatus.CONFLICT, note, error=exc.message, result={"competingVersions": versions})
        return {"status": RestoreStatus.CONFLICT}
    except delta_errors.DeltaError as exc:
        run.finish(RestoreStatus.FAILED, "the restore failed", error=one_line(exc.message, MAX_TEXT))
        return {"status": RestoreStatus.FAILED}
    except Exception as exc:
        logger.exception("restore #%s failed unexpectedly", request_id)
        if is_spark_error(exc):
            # a named cause for the requester; Spark's own text for staff, in the result
            _code, message, detail = spark_failure(exc)
            run.finish(RestoreStatus.FAILED, "the restore failed", error=message, result={"errorDetail": detail})
            return {"status": RestoreStatus.FAILED}
        error = f"the restore failed unexpectedly ({type(exc).__name__}: {one_line(exc, 300)})"
        run.finish(RestoreStatus.FAILED, "the restore failed", error=error)
        return {"status": RestoreStatus.FAILED}
    if outcome.get("stale"):
        return _finish_stale(run, outcome["plan"])
    return _finish_succeeded(run, {"engine": planner.name, **outcome})


def _missing(exc: delta_errors.MissingFilesError) -> dict[str, Any]:
    return {"missingFiles": exc.files, "missingCount": exc.details.get("count", len(exc.files))}


def _execute(req: RestoreRequest, run: RestoreRun, planner: Planner) -> dict[str, Any]:
    run.progress("looking for an earlier attempt's commit")
    done = restore_commit_version(req)
    if done is None:
        owner = _restore_owner(req.table, run)
        recovery = _recover_first(req, run) if req.recover_files_first else None
        out = apply_approved_plan(
            req.table.location, req.plan or {}, req.txn, planner, run.progress, owner=owner, who=commit_who(req),
            pinned=_pinned_location(req), on_brought_back=functools.partial(_brought_back_event, req),
        )  # fmt: skip
        if recovery is not None:
            out["recovery"] = recovery
        if not out.get("stale"):
            return out
        done = restore_commit_version(req)  # a silent earlier attempt may have committed meanwhile
        if done is None:
            return out
    return {"version": done, "alreadyCommitted": True, "txnId": req.txn}


def _recover_first(req: RestoreRequest, run: RestoreRun) -> dict[str, Any]:
    """Copy the version's gone objects back from the bucket's noncurrent versions (each one in
    the request's audit, RecoveredObject), then say so in the request's trail; the restore
    runs only once every object it needs is back."""
    summary = recover_files(req, run.progress)
    note = (
        f"recovered {summary['copied']} object(s) from noncurrent versions"
        + (f", {summary['present']} already present" if summary["present"] else "")
        + f" ({summary['bytes']} bytes)"
    )
    event(req, None, RestoreStatus.RUNNING, RestoreStatus.RUNNING, note)
    return summary


def _pinned_location(req: RestoreRequest) -> str | None:
    """The kept table of the pin the request's plan reads (None without one); refused, before
    anything is copied, when that pin no longer holds the version."""
    ref = (req.plan or {}).get("pin")
    if not ref:
        return None
    from tables.services.pins.queries import kept_location

    where = kept_location(int(ref["id"]))
    if where is None:
        raise delta_errors.RestoreError(
            f"the pin {str(ref.get('name'))[:200]!r} that keeps version {req.resolved_version} was removed since the "
            f"restore was requested; nothing was copied or committed: request the restore again"
        )
    return where


def _brought_back_event(req: RestoreRequest, summary: dict[str, Any]) -> None:
    """The request's trail says what came back from the pin before the commit."""
    name = str(((req.plan or {}).get("pin") or {}).get("name") or "")[:200]
    placed = ", ".join(f"{n} {how}" for how, n in summary["placed"].items())
    note = (
        f"brought back {summary['files']} file(s) of version {req.resolved_version} from pin {name!r}: "
        f"{summary['copied']} copied ({summary['bytes']} bytes), {summary['present']} already present ({placed})"
    )
    event(req, None, RestoreStatus.RUNNING, RestoreStatus.RUNNING, note)


def commit_who(req: RestoreRequest) -> dict[str, Any]:
    """Who asked and who approved, for the RESTORE commit's commitInfo: the log outlives the
    database, and a reader of DESCRIBE HISTORY sees the approver as the commit's userName."""
    requester = req.requested_by.get_username() if req.requested_by else ""
    approver = req.approver.get_username() if req.approver else ""
    return {
        "extra_parameters": {"requestId": str(req.pk), "requestedBy": requester, "approvedBy": approver},
        "user_name": approver or None,
    }


def restore_commit_version(req: RestoreRequest) -> int | None:
    """The version an earlier attempt committed with this request's txnId, if any: looked
    for after the head of the request's first plan (txn ids are per request)."""
    after = (req.plan or {}).get("firstReadVersion", req.plan_head_version)
    after, committer = -1 if after is None else int(after), committer_for(owner_of(req.table))
    found = find_restore_commit(req.table.location, after, req.txn, committer=committer)
    if found is None and req.attempts > 0:
        # a request in flight when txn_id was introduced may have committed, on an earlier
        # attempt, with the id derived from its primary key: a retry must find that commit too
        # (`req` is as loaded before this run's claim, so attempts counts earlier claims only)
        found = find_restore_commit(req.table.location, after, f"deltaweb-restore-{req.pk}", committer=committer)
    return found


def _restore_owner(table: Table, run: RestoreRun):
    """A managed table's restore goes through deltaweb's commit-owner (its policy checks the
    request's txnId); its ratified commits are backfilled first, so that the plan's reads of
    commit files find them in `_delta_log/`. None for a filesystem table."""
    owner = owner_of(table)
    if owner is not None:
        run.progress("backfilling the managed table's ratified commits")
        try:
            backfill(table.pk)
        except delta_errors.DeltaError as exc:  # the plan reads through the owner regardless
            logger.warning("backfill before the restore of %s failed: %s", table, exc)
    return owner


def restore_check(table: Table, version: int, target_version: int) -> dict[str, Any]:
    """Does the new version hold exactly the target's files (path + deletion vector)?"""
    new, target = snapshot_at(table, version), snapshot_at(table, target_version)
    a = set(identity_keys(new.files).to_pylist()) if new.num_files else set()
    b = set(identity_keys(target.files).to_pylist()) if target.num_files else set()

    def sample(keys: set[str]) -> list[str]:
        return sorted(unquote(k.split("\x00")[0]) for k in keys)[:10]

    return {
        "version": version,
        "targetVersion": target_version,
        "filesEqualTarget": a == b,
        "numFiles": len(a),
        "targetNumFiles": len(b),
        "onlyInResult": len(a - b),
        "onlyInTarget": len(b - a),
        "onlyInResultSample": sample(a - b),
        "onlyInTargetSample": sample(b - a),
        "metadataEqualsTarget": new.metadata.schema_string == target.metadata.schema_string
        and new.metadata.partition_columns == target.metadata.partition_columns,
    }


_RESULT_KEYS = (
    "version",
    "alreadyCommitted",
    "txnId",
    "readVersion",
    "targetVersion",
    "rebasedOver",
    "metrics",
    "inCommitTimestamp",
    "protocolOutcome",
    "fingerprint",
    "skippedMissingFiles",
    "engineInfo",
    "engine",
    "recovery",
    "fromPin",
)


def _finish_succeeded(run: RestoreRun, out: dict[str, Any]) -> dict[str, Any]:
    req = run.req
    version = int(out["version"])
    run.progress(f"checking version {version} against version {req.resolved_version}")
    check = restore_check(req.table, version, int(req.resolved_version))
    commit_check = out.get("verification")
    verified = bool(out["verified"]) if "verified" in out else check["filesEqualTarget"]
    result = {k: out[k] for k in _RESULT_KEYS if k in out}
    note = f"committed version {version}" + (" (found from an earlier attempt)" if out.get("alreadyCommitted") else "")
    # one transaction: the sync is sent once result_version is saved, so that the history it
    # caches already links the RESTORE commit to this request
    with transaction.atomic():
        sync = start_sync(req.table)
        result["syncJob"] = sync.pk
        run.finish(
            RestoreStatus.SUCCEEDED,
            note,
            stage="done",
            result_version=version,
            verification={"verified": verified, "commit": commit_check, "target": check},
            result=result,
        )
    return {"status": RestoreStatus.SUCCEEDED, "version": version}


def _finish_stale(run: RestoreRun, plan: dict[str, Any]) -> dict[str, Any]:
    req = run.req
    payload = plan_payload(req.table, plan, (req.plan or {}).get("firstReadVersion", req.plan_head_version))
    if (req.plan or {}).get("pin"):  # the new plan reads the same pin
        payload["pin"] = req.plan["pin"]
    note = (
        f"the table moved on (planned on version {req.plan_head_version}, now {plan['readVersion']}) and the "
        f"restore would change other files: approve the new plan"
    )
    run.finish(
        RestoreStatus.STALE,
        note,
        stage="stale: waiting for approval of the new plan",
        plan=payload,
        plan_head_version=plan["readVersion"],
        plan_fingerprint=plan["fingerprint"],
        approver=None,
        approver_comment="",
        decided_at=None,
    )
    return {"status": RestoreStatus.STALE}


def _plan_locally(location: str, *, progress=None, **kwargs: Any) -> RestorePlan:
    if progress is not None:
        progress("planning on the current head (local engine)", 0, None)
    return plan_restore(location, **kwargs)


# the pure engine (DELTAWEB_RESTORE_ENGINE=local, and every managed table): plan_restore in the worker
local_planner = Planner("local", _plan_locally)


def apply_approved_plan(
    location: str,
    approved: dict[str, Any],
    txn_id: str,
    planner: Planner,
    progress,
    owner=None,
    who: dict[str, Any] | None = None,
    pinned: str | None = None,
    on_brought_back: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Commit the approved change, or report that it no longer applies.

    The restore is planned again on the current head and the core's approved_change_on
    decides what to commit: the same plan, or the approved change on top of appends made
    since (a request keeps no file actions, so those appends are read from the commits
    after the approved head). Anything else is stale: {"stale": True, "plan": the new plan},
    nothing committed. Writers that commit while this runs are checked by commit_restore,
    which rebases over unrelated commits or raises CommitConflictError naming them. `who`:
    commit_restore's extra_parameters and user_name (commit_who). `pinned`: the kept table of
    the pin the plan reads; once the change is confirmed, the files the table lacks are copied
    from it and checked (from_pin.bring_back, reported to `on_brought_back`) before the commit,
    so that a failure leaves no commit (the copies stay, referenced by no version).
    """
    requested = approved.get("requested") or {}
    timestamp = requested.get("timestamp")
    if owner is not None:  # a managed table: planned as its owner knows it (the local engine reads through it)
        planner = Planner(local_planner.name, functools.partial(_plan_locally, committer=committer_for(owner)))
    current = planner(
        location,
        version=requested.get("version") if timestamp is None else None,
        timestamp=timestamp,
        ignore_missing_files=bool(approved.get("ignoreMissingFiles")),
        allow_protocol_downgrade=bool(approved.get("allowProtocolDowngrade")),
        check_files=bool(approved.get("filesChecked", True)),
        progress=progress,
        where=approved.get("predicate"),
        **({"pinned": pinned} if pinned is not None else {}),
    )
    head = approved.get("readVersion")
    plan = approved_change_on(
        current,
        approved.get("fingerprint"),
        None if head is None else int(head),
        lambda: files_added_since(location, int(head), current.read_version),
    )
    if plan is None:
        return {"stale": True, "plan": current.to_dict()}
    brought = None
    if pinned is not None and plan.pinned_files:
        brought = bring_back(as_storage(location), as_storage(pinned), plan.pinned_files, progress)
        if on_brought_back is not None:
            on_brought_back(brought)
    progress("committing", 0, 1)
    faults.reached("restore-committing")
    result = commit_restore(location, plan, txn_id=txn_id, committer=committer_for(owner), **(who or {}))
    faults.reached("restore-committed")
    progress("committing", 1, 1)
    if brought is not None:
        result["fromPin"] = brought
    return {**result, "engine": planner.name}  # the engine that planned it


def requeue_stuck_restores(older_than: timedelta | None = None) -> list[int]:
    """Requests whose worker went silent: running with no progress or heartbeat since
    `older_than` (DELTAWEB_RESTORE_STUCK_MINUTES) go back to queued and are sent again,
    or fail after MAX_RESTORE_ATTEMPTS claims; queued ones whose message was lost are sent
    again. A re-run never commits twice (txnId). Returns the ids acted on."""
    if older_than is None:
        older_than = timedelta(minutes=settings.DELTAWEB_RESTORE_STUCK_MINUTES)
    now = timezone.now()
    silent = Q(progress_at__lt=now - older_than) | Q(progress_at__isnull=True)
    acted = []
    for req in RestoreRequest.objects.filter(silent, status=RestoreStatus.RUNNING):
        if _requeue_one(req, now):
            acted.append(req.pk)
    for req in RestoreRequest.objects.filter(silent, status=RestoreStatus.QUEUED):
        sent = RestoreRequest.objects.filter(pk=req.pk, status=RestoreStatus.QUEUED, progress_at=req.progress_at)
        if sent.update(progress_at=now, stage="queued (sent again)") == 1:
            send_restore_on_commit(req.pk)
            acted.append(req.pk)
    return acted


def _requeue_one(req: RestoreRequest, now: datetime) -> bool:
    same = RestoreRequest.objects.filter(
        pk=req.pk, status=RestoreStatus.RUNNING, attempts=req.attempts, progress_at=req.progress_at
    )
    since = req.progress_at.isoformat(timespec="seconds") if req.progress_at else "the claim"
    with transaction.atomic():
        if req.attempts >= MAX_RESTORE_ATTEMPTS:
            error = (
                f"the worker stopped {req.attempts} times while running this restore (last sign of life {since}); "
                "check the worker logs, then request the restore again"
            )
            if same.update(status=RestoreStatus.FAILED, error=error, finished_at=now, progress_at=now) != 1:
                return False
            event(req, None, RestoreStatus.RUNNING, RestoreStatus.FAILED, error)
            return True
        if (
            same.update(status=RestoreStatus.QUEUED, stage="queued again (the worker went silent)", progress_at=now)
            != 1
        ):
            return False
        event(req, None, RestoreStatus.RUNNING, RestoreStatus.QUEUED, f"no sign of life since {since}: queued again")
        send_restore_on_commit(req.pk)
    return True
