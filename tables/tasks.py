"""Celery tasks: thin wrappers over the use cases and the Spark jobs.

This module imports the use cases; none of them imports it: they enqueue by task name
(tables.services.jobs.lifecycle), so the names here are a contract (the beat schedule in settings uses them too).

Spark: a worker keeps one Spark session for its whole life, started when the worker is ready
and stopped when it shuts down; what runs on it, and how, is tables.spark.engine.worker (this
module gives it settings.SPARK_MASTER and the data kinds).
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from celery.signals import worker_ready, worker_shutdown
from django.conf import settings

from tables.delta.restore.plan import RestorePlan
from tables.models import Job, Table
from tables.services.catalog import discovery
from tables.services.chain import look as chain
from tables.services.data import jobs as data_jobs
from tables.services.data.kinds import data_kind
from tables.services.jobs import lifecycle as jobs
from tables.services.managed import use_cases as owner_services
from tables.services.ops import retention
from tables.services.restores import runs as restore_runs
from tables.services.sync import probe, vanished
from tables.services.sync import store as sync
from tables.services.versions import reachability, row_count
from tables.spark.engine import worker as spark_worker


@shared_task(name=jobs.PIN_TASK, acks_late=True)
def write_pin(pin_id: int) -> dict:
    from tables.services.pins import store

    return store.write_pin(pin_id)


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
    from tables.services.pins import lifecycle as pins

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


def _plan_on_spark(location: str, **kwargs: Any) -> RestorePlan:
    """The Spark engine: the worker's session for settings.SPARK_MASTER, then the planning job."""
    return spark_worker.plan_restore(settings.SPARK_MASTER, location, **kwargs)


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


def spark_data_jobs() -> spark_worker.SparkDataJobs:
    """Data jobs on the worker's session for settings.SPARK_MASTER, each kind as
    tables.services.data.kinds declares it; cancellable (its `interrupt`)."""
    return spark_worker.SparkDataJobs(settings.SPARK_MASTER, data_kind)


@shared_task(name=jobs.DATA_JOB_TASK, acks_late=True)
def run_data_job(job_id: int) -> dict:
    """Preview / change data / row diff / row history on Spark; the claim makes a redelivered
    message a no-op."""
    with jobs.running(job_id):
        return data_jobs.run_job(job_id, spark_data_jobs())


@worker_ready.connect
def start_spark_with_worker(sender=None, **kwargs: Any) -> None:
    """Start the worker's Spark session when it is ready (it runs the tasks: threads pool)."""
    spark_worker.start_with_worker(settings.SPARK_MASTER)


@worker_shutdown.connect
def stop_spark_with_worker(sender=None, **kwargs: Any) -> None:
    spark_worker.stop_with_worker()
