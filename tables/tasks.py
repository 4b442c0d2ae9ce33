"""Celery tasks: thin wrappers over the use cases and the Spark jobs.

This module imports the use cases; none of them imports it: they enqueue by task name
(tables.services.jobs), so the names here are a contract (the beat schedule in settings uses them too).

Spark: a worker keeps one Spark session (one driver JVM) for its whole life, in the worker
process itself. The worker's pool is threads (deltaweb.celery), so every task runs in that
process and shares the session; a prefork pool would start a JVM in each child. The session
starts when the worker is ready (in the background, so the worker takes tasks at once, and
only when SPARK_START_WITH_WORKER is on, the default), and stops when the worker shuts down.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

from celery import shared_task
from celery.signals import worker_ready, worker_shutdown
from django.conf import settings

from tables.delta.restore.plan import RestorePlan
from tables.models import Job, Table
from tables.services import data_jobs, discovery, jobs, reachability, retention, row_count
from tables.services import managed_tables as owner_services
from tables.services.data_kinds import data_kind
from tables.services.restores import runs as restore_runs
from tables.services.sync import chain, probe, vanished
from tables.services.sync import store as sync

logger = logging.getLogger(__name__)


@shared_task(name=jobs.PIN_TASK, acks_late=True)
def write_pin(pin_id: int) -> dict:
    from tables.services import pins

    return pins.write_pin(pin_id)


@shared_task(name=jobs.SYNC_TASK, acks_late=True)
def sync_table(job_id: int) -> dict:
    job = Job.objects.filter(pk=job_id).select_related("table").first()
    if job is None or job.table_id is None:
        return {"error": f"job {job_id} not found"}
    with jobs.running(job.pk):
        return sync.sync_table(job.table_id, job.pk)


@shared_task(name=vanished.LOOK_TASK)
def look_at_files(table_id: int, latest: int) -> bool:
    """A long log's first look at its referenced files, sent by its first sync (see
    tables.services.sync.vanished): the look replays the retained log, which that sync's job
    should not wait for."""
    return vanished.look_in_worker(table_id, latest)


@shared_task(name="tables.sweep_silent_jobs")
def sweep_silent_jobs() -> dict[str, list[int]]:
    """Beat: running jobs whose worker went silent are failed with the reason; queued ones
    whose message was lost are sent again (see jobs.sweep_silent_jobs)."""
    return jobs.sweep_silent_jobs()


@shared_task(name="tables.sweep_pins")
def sweep_pins() -> dict[str, list[int]]:
    """Beat: pins left in "writing" resumed or failed with the reason, due pins expired, held
    pins whose objects were deleted settled (see pins.sweep_pins)."""
    from tables.services import pins

    return pins.sweep_pins()


@shared_task(name="tables.sync_all")
def sync_all() -> dict[str, int]:
    """Probe every registered table now, in batches; a sync job starts only for a table that
    changed (the beat probes the due ones instead: `probe_due`)."""
    ids = list(Table.objects.order_by("pk").values_list("pk", flat=True))
    totals: dict[str, int] = {}
    for batch in probe.batches(ids, max(1, int(settings.DELTAWEB_PROBE_BATCH))):
        for key, value in probe.probe_tables(batch).as_dict().items():
            totals[key] = totals.get(key, 0) + int(value)
    return totals


@shared_task(name="tables.prune_operational")
def prune_operational() -> dict[str, int]:
    """Beat, daily: finished jobs and other operational rows past DELTAWEB_RETENTION_DAYS."""
    return retention.prune_operational()


@shared_task(name=reachability.COMPUTE_TASK)
def compute_reachability(table_id: int, vacuum_retention: int | None = None) -> bool:
    """A long log's reachability, computed here and put in the shared cache for every web process."""
    return reachability.compute_in_worker(table_id, vacuum_retention)


@shared_task(name=row_count.COUNT_TASK)
def count_rows(table_id: int) -> bool:
    """A long log's row count, made here and put in the shared cache for every web process."""
    return row_count.count_in_worker(table_id)


@shared_task(name="tables.rediscover")
def rediscover() -> int:
    """Beat, hourly: the scheduled discovery sources whose time has come, looked in again."""
    return discovery.rerun_due()


@shared_task(name=chain.CHECK_TASK)
def chain_check_due() -> dict[str, float]:
    """Beat: the rolling chain check, every table's log compared with what was first seen once
    per DELTAWEB_CHAIN_CHECK_HOURS; the requests and CPU it cost, summed."""
    if not settings.DELTAWEB_CHAIN_CHECK:
        return {"tables": 0}
    return chain.check_due()


@shared_task(name="tables.probe_due")
def probe_due() -> dict[str, int]:
    """Beat: claim the tables whose check is due and send them to `probe_tables` in batches."""
    return probe.probe_due()


@shared_task(name=jobs.PROBE_TASK)
def probe_tables(ids: list[int]) -> dict[str, object]:
    """Probe a batch of tables; sync jobs only for those that changed."""
    return probe.probe_tables([int(i) for i in ids]).as_dict()


def _plan_on_spark(location: str, *, progress=None, **kwargs: Any) -> RestorePlan:
    """The Spark engine: the session for settings.SPARK_MASTER (started on first use in this
    worker process), then the planning job (file diff, existence check, metrics on Spark)."""
    # pyspark is imported only by the worker that runs a Spark job, never by the web process
    from tables.spark.jobs.restore import spark_plan_restore
    from tables.spark.session import get_spark

    report = progress or (lambda *args: None)
    report("starting the Spark session", 0, None)
    spark = get_spark(settings.SPARK_MASTER)
    report("Spark job started", 0, None)
    return spark_plan_restore(spark, location, progress=progress, **kwargs)


spark_planner = restore_runs.Planner("spark", _plan_on_spark)


def restore_planner() -> restore_runs.Planner:
    if settings.DELTAWEB_RESTORE_ENGINE == "local":
        return restore_runs.local_planner
    return spark_planner


@shared_task(name=jobs.RESTORE_TASK, acks_late=True)
def run_restore(request_id: int) -> dict:
    """Run an approved restore; the claim inside makes a redelivered message a no-op."""
    return restore_runs.run_restore(request_id, restore_planner())


@shared_task(name="tables.requeue_stuck_restores")
def requeue_stuck_restores() -> list[int]:
    """Beat: restores whose worker went silent are queued again (see restore_runs)."""
    return restore_runs.requeue_stuck_restores()


@shared_task(name=jobs.BACKFILL_TASK, acks_late=True)
def backfill_managed_table(table_id: int) -> int | None:
    """After a ratified commit: copy the table's ratified commits to `_delta_log/` in order."""
    return owner_services.backfill(table_id)


@shared_task(name="tables.backfill_managed_tables")
def backfill_managed_tables() -> dict[int, int | None]:
    """Beat: backfill every managed table (catches up after lost messages and crashes)."""
    return owner_services.backfill_all()


def spark_data_job(location: str, params: dict[str, Any], out_dir: Path, progress) -> dict[str, Any]:
    """The Spark side of a data job (tables.services.data_jobs): the worker's long-lived session for
    settings.SPARK_MASTER, then the job its kind declares (tables.services.data_kinds)."""
    # pyspark is imported only by the worker that runs a Spark job, never by the web process
    from tables.spark.session import get_spark

    progress("starting the Spark session", 0, 3)
    spark = get_spark(settings.SPARK_MASTER)
    kind = data_kind(params["kind"])  # its declaration (tables.services.data_kinds)
    progress(kind.doing(params), 1, 3)
    out = kind.run(spark, location, params, out_dir, lambda stage: progress(stage, 2, 3))
    progress("written", 3, 3)
    return out


def scoped_data_job(
    location: str, params: dict[str, Any], out_dir: Path, progress: data_jobs.Progress
) -> dict[str, Any]:
    """spark_data_job under the job's own Spark tag: its stages are its progress, and
    `interrupt_data_job` cancels it (POST /api/jobs/{id}/cancel/, tables.spark.engine.control)."""
    from tables.spark.engine.control import job_scope, job_tag, stages_line
    from tables.spark.session import get_spark

    progress("starting the Spark session", 0, 3)
    spark = get_spark(settings.SPARK_MASTER)
    with job_scope(spark, job_tag(params["job"]), lambda stages: progress(*stages_line(stages))):
        return spark_data_job(location, params, out_dir, progress)


def interrupt_data_job(job_id: int) -> None:
    """Cancel the Spark work of a data job this worker runs (its tag on the process's session)."""
    from tables.spark.engine.control import interrupt, job_tag
    from tables.spark.session import current_spark

    spark = current_spark()
    if spark is not None:
        interrupt(spark, job_tag(job_id))


scoped_data_job.interrupt = interrupt_data_job  # type: ignore[attr-defined]  # run_job cancels through it


@shared_task(name=jobs.DATA_JOB_TASK, acks_late=True)
def run_data_job(job_id: int) -> dict:
    """Preview / change data / row diff / row history on Spark; the claim makes a redelivered
    message a no-op."""
    with jobs.running(job_id):
        return data_jobs.run_job(job_id, scoped_data_job)


def _start_spark() -> None:
    from tables.spark.session import get_spark

    try:
        get_spark(settings.SPARK_MASTER)
    except Exception:  # a job that needs it later fails with the same error on its row
        logger.exception("the Spark session did not start with the worker")


@worker_ready.connect
def start_spark_with_worker(sender=None, **kwargs: Any) -> None:
    """Start the worker's Spark session when it is ready (it runs the tasks: threads pool)."""
    if os.environ.get("SPARK_START_WITH_WORKER", "1") not in ("1", "true", "yes"):
        return
    threading.Thread(target=_start_spark, name="spark-session-start", daemon=True).start()


@worker_shutdown.connect
def stop_spark_with_worker(sender=None, **kwargs: Any) -> None:
    import sys

    if "tables.spark.session" in sys.modules:  # never import pyspark just to stop nothing
        from tables.spark.session import stop_spark

        stop_spark()
