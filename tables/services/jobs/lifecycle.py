"""The Job row's lifecycle, shared by syncs and data jobs: create, enqueue on commit,
claim, progress, finish.

A background job is a row first. It is sent to the broker only once the transaction that
created it commits, by task name (so no use case imports tables.tasks). A worker claims it
with an UPDATE ... WHERE status=queued that must touch exactly one row, so a redelivered
message never runs a job twice. An unreachable broker fails the job with a message; it
never changes anything else (the caller decides what else to undo, see `enqueue`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from threading import Event, Thread
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from tables.models import Job, JobKind, JobStatus, SyncState, Table, params_hash
from tables.services.errors import BROKER_UNAVAILABLE, ServiceError, public_message
from tables.services.jobs import durations

logger = logging.getLogger(__name__)

MAX_ERROR = 5000
# A job queued or running this long was left behind (a worker died or the broker lost it).
ABANDONED_AFTER = timedelta(hours=1)
ABANDONED_MESSAGE = "No worker finished this job within an hour; it was given up. Start it again."

# Task names, as registered by tables.tasks (and named by the beat schedule in settings).
SYNC_TASK = "tables.sync_table"
DATA_JOB_TASK = "tables.run_data_job"
RESTORE_TASK = "tables.run_restore"
BACKFILL_TASK = "tables.backfill_managed_table"
PIN_TASK = "tables.write_pin"  # a pin whose version is kept in the background (tables.services.pins.lifecycle)
PROBE_TASK = "tables.probe_tables"  # a batch of table ids, no Job row (tables.services.sync.probe)


def send(task_name: str, *args: Any, countdown: float | None = None) -> None:
    """Send a task by name (it runs at once when Celery is eager), after `countdown` seconds
    when given; raises if the broker is down (see `send_or_mark`)."""
    app = current_app
    if task_name not in app.tasks:
        # autodiscovery of the task modules is lazy outside a worker; a signature of an unknown
        # task would go to the broker even when Celery is eager
        app.loader.import_default_modules()
    if countdown is None:
        app.signature(task_name, args=args).apply_async()
    else:
        app.signature(task_name, args=args).apply_async(countdown=countdown)


def send_or_mark(task_name: str, *args: Any, mark: Callable[[Exception], None], countdown: float | None = None) -> bool:
    """Send a task by name, or, when the broker cannot be reached, `mark` what was not sent (a
    job failed, a pin's or a restore's error said, a send forgotten, a warning logged; it is
    called inside the handler, so a log line can carry the traceback) and answer False: the
    one place the broker's absence is handled, and never raised at the caller."""
    try:
        send(task_name, *args, countdown=countdown)
    except Exception as exc:  # kombu raises several types for an unreachable broker
        mark(exc)
        return False
    return True


def settle(job: Job) -> Job:
    """Wait a moment for a job a user just started to end: a warm interactive job (a preview,
    change data, a diff of a small table) ends within about a second, and the page the user is
    sent to then shows its rows at once, instead of a progress box, its polls and a reload
    (0.3-0.6 s of a 1 s answer). At most DELTAWEB_JOB_SETTLE_SECONDS; a job still running
    after that is followed on the page as before. The job, its status as last read."""
    wait = float(getattr(settings, "DELTAWEB_JOB_SETTLE_SECONDS", 0) or 0)
    deadline = time.monotonic() + wait
    while not job.is_terminal and time.monotonic() < deadline:
        time.sleep(0.05)
        job.refresh_from_db(fields=["status"])
    return job


def send_once(task_name: str, mark: str, seconds: float, *args: Any) -> bool:
    """Send a task unless one was sent under `mark` (in the shared cache, so whatever the
    process) within `seconds`: derived answers a worker computes for pages, asked for once.
    Whether it was sent; a broker that is down leaves no mark, so the next page asks again."""
    from django.core.cache import caches

    shared = caches["shared"]
    if not shared.add(mark, 1, seconds):
        return False

    def forget(_exc: Exception) -> None:
        shared.delete(mark)
        logger.warning("could not send %s%s to a worker", task_name, args, exc_info=True)

    return send_or_mark(task_name, *args, mark=forget)


def unreachable_message(exc: Exception, then: str = "is the worker's Redis running?") -> str:
    """The words a row keeps when its task could not be sent: the broker's error's type, then
    what becomes of the work (`then`)."""
    return f"the task queue is unreachable ({type(exc).__name__}); {then}"


NOT_SENT = "not sent"  # the stage of a job the broker refused: no worker will ever see it


def check_sent(job: Job, what: str) -> Job:
    """The job as it is now, once the transaction that created it has committed (and so sent
    it); ServiceError 503 broker_unavailable when the broker refused it, so that the request
    says so instead of answering "queued" for a job already failed. `what` names the work."""
    job.refresh_from_db()
    if job.status == JobStatus.FAILED and job.stage == NOT_SENT:
        raise ServiceError(
            f"The task queue does not answer, so the {what} was not started; try again in a few seconds.",
            BROKER_UNAVAILABLE,
            503,
            job=job.pk,
        )
    return job


def active(kind: str, table: Table | None, params: dict[str, Any] | None = None) -> Job | None:
    """The queued or running job of this kind, table and parameters, if there is one. One left
    behind by a worker that died (queued or running for longer than ABANDONED_AFTER) is failed
    here with a message instead, so it cannot block its identical successors forever."""
    job = (
        Job.objects.filter(kind=kind, table=table, params_hash=params_hash(params), status__in=JobStatus.active())
        .order_by("-pk")
        .first()
    )
    if job is None:
        return None
    now = timezone.now()
    if (job.started_at or job.created_at) > now - ABANDONED_AFTER:
        return job
    Job.objects.filter(pk=job.pk, status=job.status).update(
        status=JobStatus.FAILED, error=ABANDONED_MESSAGE, stage="abandoned", finished_at=now
    )
    return None


def create_or_join(kind: str, table: Table | None, user=None, params: dict[str, Any] | None = None) -> tuple[Job, bool]:
    """A new queued job row (not sent yet: see `enqueue`) and True, or the identical active
    job and False. The database's rule (one active job per kind, table and parameters)
    decides when two requests race: the loser joins the winner's job."""
    params = params or {}
    existing = active(kind, table, params)
    if existing is not None:
        return existing, False
    try:
        with transaction.atomic():  # a savepoint: the caller's transaction survives the clash
            job = Job.objects.create(
                kind=kind,
                table=table,
                created_by=user if getattr(user, "is_authenticated", False) else None,
                stage="queued",
                params=params,
            )
        return job, True
    except IntegrityError:
        existing = active(kind, table, params)
        if existing is None:  # not our rule's clash (or the other job already finished)
            raise
        return existing, False


def enqueue(job: Job, task_name: str, on_unreachable: Callable[[], None] | None = None) -> None:
    """Send the job to `task_name` once the transaction commits (at once outside one)."""
    transaction.on_commit(lambda: _send(job, task_name, on_unreachable))


def _send(job: Job, task_name: str, on_unreachable: Callable[[], None] | None) -> None:
    """If the broker is unreachable, say so on the job instead of failing the request that
    already saved its rows; only the job is marked, and `on_unreachable` undoes the caller's
    own bookkeeping (e.g. a table marked queued for this job)."""

    def fail(exc: Exception) -> None:
        Job.objects.filter(pk=job.pk, status=JobStatus.QUEUED).update(
            status=JobStatus.FAILED, error=unreachable_message(exc), stage=NOT_SENT, finished_at=timezone.now()
        )
        if on_unreachable is not None:
            on_unreachable()

    send_or_mark(task_name, job.pk, mark=fail)


def claim(job_id: int, kinds: Iterable[str] | None = None) -> bool:
    """queued -> running with a conditional UPDATE that touches exactly one row."""
    qs = Job.objects.filter(pk=job_id, status=JobStatus.QUEUED)
    if kinds is not None:
        qs = qs.filter(kind__in=list(kinds))
    now = timezone.now()
    return qs.update(status=JobStatus.RUNNING, started_at=now, progress_at=now, stage="starting") == 1


def update(job: Job | None, **fields: Any) -> None:
    """Set fields on the row and on the instance."""
    if job is None:
        return
    for k, v in fields.items():
        setattr(job, k, v)
    Job.objects.filter(pk=job.pk).update(**fields)


def progress(job: Job | None, stage: str, done: int = 0, total: int | None = None) -> None:
    update(job, stage=str(stage)[:200], done=done, total=total, progress_at=timezone.now())


def reporter(job: Job) -> Callable[..., None]:
    """`progress(stage, done, total)` for a job, callable from any thread (Spark's stages are
    polled from one): another thread's report uses its own connection, closed after it, and
    inside a transaction (tests) only the job's own thread reports (no other sees the row)."""
    owner = threading.get_ident()
    atomic = connection.in_atomic_block

    def report(stage: str, done: int = 0, total: int | None = None) -> None:
        if threading.get_ident() == owner:
            progress(job, stage, done, total)
            return
        if atomic:
            return
        try:
            Job.objects.filter(pk=job.pk, status=JobStatus.RUNNING).update(
                stage=str(stage)[:200], done=done, total=total, progress_at=timezone.now()
            )
        finally:
            connection.close()

    return report


def _finish(job: Job | None, **fields: Any) -> None:
    """A terminal state, only from an active one: a worker the sweep took for dead (and whose
    job it failed) must not turn the failure into a success afterwards."""
    if job is None:
        return
    if Job.objects.filter(pk=job.pk, status__in=JobStatus.active()).update(**fields) == 1:
        for k, v in fields.items():
            setattr(job, k, v)
        ran = job.started_at is not None and job.finished_at is not None
        if ran and job.status in (JobStatus.SUCCEEDED, JobStatus.FAILED):
            durations.record(job.kind, (job.finished_at - job.started_at).total_seconds())


def succeed(job: Job | None, result: dict[str, Any]) -> None:
    _finish(job, status=JobStatus.SUCCEEDED, stage="done", result=result, finished_at=timezone.now())


def skip(job: Job | None, result: dict[str, Any]) -> None:
    _finish(job, status=JobStatus.SKIPPED, stage="skipped", result=result, finished_at=timezone.now())


def fail(
    job: Job | None, error: str, stage: str | None = None, detail: str | None = None, code: str | None = None
) -> None:
    """The job failed with `error` (shown to its users: the table's location becomes its name);
    `detail`, the technical cause (e.g. Spark's exception), is kept in the result for staff,
    `code` (e.g. spark_unavailable) in the result as `errorCode`."""
    table = job.table if job is not None and job.table_id is not None else None
    fields: dict[str, Any] = {
        "status": JobStatus.FAILED,
        "error": public_message(error, table)[:MAX_ERROR],
        "finished_at": timezone.now(),
    }
    if stage is not None:
        fields["stage"] = stage
    result = {**(job.result or {})} if job is not None else {}
    if detail:
        result["errorDetail"] = detail
    if code:
        result["errorCode"] = code
    if result and job is not None:
        fields["result"] = result
    _finish(job, **fields)


# --- cancelling a data job -----------------------------------------------------------------------

CANCEL_POLL_SECONDS = 1.0


def _who(user) -> str:
    return str(getattr(user, "get_username", lambda: "")() or "someone")[:150]


def request_cancel(job: Job, user) -> Job:
    """Cancel a data job: a queued one ends at once; a running one is marked, and the worker
    running it interrupts its Spark work within a second (`cancellable`) and ends it. Only
    the user who started it, approvers and staff may; ServiceError otherwise, or when the job
    is no data job or already finished."""
    from tables.services.access import roles

    if job.kind not in JobKind.data_kinds():
        raise ServiceError(
            f"Job {job.pk} is a {job.kind} job; only data jobs can be cancelled.", "not_cancellable", 409
        )
    if not (roles.can_approve(user) or (job.created_by_id is not None and job.created_by_id == user.pk)):
        raise ServiceError("Only the user who started a job, an approver or staff can cancel it.", "forbidden", 403)
    asked = {"by": _who(user), "at": timezone.now().isoformat(timespec="seconds")}
    if Job.objects.filter(pk=job.pk, status=JobStatus.QUEUED).update(
        status=JobStatus.FAILED,
        stage="cancelled",
        error=f"Cancelled by {asked['by']} before it started.",
        result={"cancelledBy": asked["by"], "cancelledAt": asked["at"]},
        finished_at=timezone.now(),
    ):
        job.refresh_from_db()
        return job
    with transaction.atomic():
        row = Job.objects.select_for_update().filter(pk=job.pk).first()
        if row is None or row.status != JobStatus.RUNNING:
            state = row.status if row is not None else "gone"
            raise ServiceError(f"Job {job.pk} is {state}; there is nothing to cancel.", "invalid_state", 409)
        if not (row.result or {}).get("cancelRequested"):
            row.result = {**(row.result or {}), "cancelRequested": asked}
            row.stage = f"cancelling (asked by {asked['by']})"[:200]
            row.save(update_fields=["result", "stage"])
    job.refresh_from_db()
    return job


def cancel_request(job_id: int) -> dict[str, str] | None:
    """Who asked to cancel the running job, and when; None when nobody did."""
    result = Job.objects.filter(pk=job_id).values_list("result", flat=True).first()
    return (result or {}).get("cancelRequested") if isinstance(result, dict) else None


def cancelled(job: Job, asked: dict[str, str]) -> None:
    """End a running job its user cancelled: failed, stage `cancelled`, who and when kept."""
    _finish(
        job,
        status=JobStatus.FAILED,
        stage="cancelled",
        error=f"Cancelled by {asked.get('by', 'someone')}.",
        result={"cancelledBy": asked.get("by"), "cancelledAt": asked.get("at")},
        finished_at=timezone.now(),
    )


@contextmanager
def cancellable(job_id: int, interrupt: Callable[[], None] | None) -> Iterator[None]:
    """While the body runs, a thread looks at the job's row every second; once its user asked
    to cancel it, `interrupt` stops the running work at every look until the body ends: a cancel
    asked while the worker was still starting Spark (nothing to interrupt yet) stops the first
    Spark work that starts after it. Inside a transaction (tests) nothing is watched: no other
    connection would see the ask."""
    if interrupt is None:
        yield
        return
    fired = Event()

    def look() -> None:
        if fired.is_set() or cancel_request(job_id) is not None:
            fired.set()
            interrupt()

    with heartbeat(look, CANCEL_POLL_SECONDS, f"job-{job_id}-cancel"):
        yield


# --- signs of life and the sweep ---------------------------------------------------------------


@contextmanager
def heartbeat(touch: Callable[[], None], every: float, name: str) -> Iterator[None]:
    """Call `touch` from a thread every `every` seconds while the body runs, so that only a dead
    worker looks silent. Skipped inside a transaction (tests): no other connection would see it."""
    if every <= 0 or connection.in_atomic_block:
        yield
        return
    stop = Event()

    def loop() -> None:
        try:
            while not stop.wait(every):
                try:
                    touch()
                except Exception:  # a missed beat is not worth the job; the next one may land
                    logger.warning("heartbeat %s missed", name, exc_info=True)
        finally:
            connection.close()  # this thread's own connection

    thread = Thread(target=loop, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=every + 5)


@contextmanager
def running(job_id: int) -> Iterator[None]:
    """A job's sign of life while a worker runs it (DELTAWEB_JOB_HEARTBEAT_SECONDS)."""

    def touch() -> None:
        Job.objects.filter(pk=job_id, status=JobStatus.RUNNING).update(progress_at=timezone.now())

    with heartbeat(touch, float(settings.DELTAWEB_JOB_HEARTBEAT_SECONDS), f"job-{job_id}-heartbeat"):
        yield


TASK_OF_KIND = {JobKind.SYNC: SYNC_TASK, **{k: DATA_JOB_TASK for k in JobKind.data_kinds()}}


def sweep_silent_jobs(older_than: timedelta | None = None) -> dict[str, list[int]]:
    """The beat's check for jobs a worker or the broker lost (DELTAWEB_JOB_SILENT_MINUTES):
    a running job with no sign of life is failed with the reason (a sync also hands its table's
    lease back, so the next sync need not wait for it to expire); a queued job whose message
    never reached a worker (a broker restarted without persistence) is sent again, which is
    harmless: the claim lets one worker run it once."""
    if older_than is None:
        older_than = timedelta(minutes=float(settings.DELTAWEB_JOB_SILENT_MINUTES))
    now = timezone.now()
    horizon = now - older_than
    failed, resent = [], []
    for job in Job.objects.filter(status=JobStatus.RUNNING, progress_at__lt=horizon):
        since = job.progress_at.isoformat(timespec="seconds")
        error = (
            f"The job stopped without finishing during '{job.stage}': its worker was killed or restarted, or lost "
            f"the database; no sign of life since {since}. Start it again."
        )
        with transaction.atomic():
            same = Job.objects.filter(pk=job.pk, status=JobStatus.RUNNING, progress_at=job.progress_at)
            if same.update(status=JobStatus.FAILED, error=error, finished_at=now) != 1:
                continue
            if job.kind == JobKind.SYNC and job.table_id is not None:
                Table.objects.filter(pk=job.table_id, sync_state=SyncState.SYNCING).update(
                    sync_state=SyncState.ERROR, last_error=error, sync_lease_until=None
                )
        failed.append(job.pk)
    silent = Q(progress_at__lt=horizon) | Q(progress_at__isnull=True)
    for job in Job.objects.filter(silent, status=JobStatus.QUEUED, created_at__lt=horizon):
        same = Job.objects.filter(pk=job.pk, status=JobStatus.QUEUED, progress_at=job.progress_at)
        task = TASK_OF_KIND.get(job.kind)
        if task is not None and same.update(progress_at=now, stage="queued (sent again)") == 1:
            enqueue(job, task)
            resent.append(job.pk)
    return {"failed": failed, "resent": resent}
