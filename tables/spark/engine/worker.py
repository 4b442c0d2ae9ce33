"""The worker's Spark wiring: the one session a Celery worker keeps for its whole life, what a
task runs on it (a data job under its own tag, a restore's plan), cancelling a data job, and
starting and stopping the session with the worker.

A worker keeps one Spark session (one driver JVM) in the worker process itself. Its pool is
threads (deltaweb.celery), so every task runs in that process and shares the session; a
prefork pool would start a JVM in each child. The session starts when the worker is ready (in
the background, so the worker takes tasks at once, and only when SPARK_START_WITH_WORKER is on,
the default), and stops when the worker shuts down. The Celery tasks and signals that call
these are tables.tasks; the master URL and the data kinds are given by the caller (no Django
here, no use case).

pyspark is imported only by a worker that runs a Spark job, never by the web process: the
session and the jobs are imported inside the functions that need them.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tables.delta.restore.plan import RestorePlan

logger = logging.getLogger(__name__)

# (stage, done, total): what a data job reports while it runs (tables.services.data.jobs)
Progress = Callable[[str, int, int | None], None]


@dataclass(frozen=True, slots=True)
class SparkDataJobs:
    """What the worker hands tables.services.data.jobs.run_job: a data job run on the worker's
    session for `master` under the job's own Spark tag (its stages are its progress), and
    `interrupt`, which cancels it (POST /api/jobs/{id}/cancel/, tables.spark.engine.control).
    `kind_of(name)` is the kind's declaration (tables.services.data.kinds): its `doing(params)`
    and `run(spark, location, params, out_dir, stage)`."""

    master: str
    kind_of: Callable[[str], Any]

    def __call__(self, location: str, params: dict[str, Any], out_dir: Path, progress: Progress) -> dict[str, Any]:
        from tables.spark.engine.control import job_scope, job_tag, stages_line
        from tables.spark.session import get_spark

        progress("starting the Spark session", 0, 3)
        spark = get_spark(self.master)
        with job_scope(spark, job_tag(params["job"]), lambda stages: progress(*stages_line(stages))):
            return self.run_kind(location, params, out_dir, progress)

    def run_kind(self, location: str, params: dict[str, Any], out_dir: Path, progress: Progress) -> dict[str, Any]:
        """The job its kind declares, on the worker's long-lived session (no tag of its own)."""
        from tables.spark.session import get_spark

        progress("starting the Spark session", 0, 3)
        spark = get_spark(self.master)
        kind = self.kind_of(params["kind"])
        progress(kind.doing(params), 1, 3)
        out = kind.run(spark, location, params, out_dir, lambda stage: progress(stage, 2, 3))
        progress("written", 3, 3)
        return out

    def interrupt(self, job_id: int) -> None:
        interrupt_job(job_id)


def interrupt_job(job_id: int) -> None:
    """Cancel the Spark work of a data job this worker runs (its tag on the process's session)."""
    from tables.spark.engine.control import interrupt, job_tag
    from tables.spark.session import current_spark

    spark = current_spark()
    if spark is not None:
        interrupt(spark, job_tag(job_id))


def plan_restore(master: str, location: str, *, progress: Any = None, **kwargs: Any) -> RestorePlan:
    """A restore planned on Spark: the session for `master` (started on first use in this
    worker process), then the planning job (file diff, existence check, metrics on Spark)."""
    from tables.spark.jobs.restore import spark_plan_restore
    from tables.spark.session import get_spark

    report = progress or (lambda *args: None)
    report("starting the Spark session", 0, None)
    spark = get_spark(master)
    report("Spark job started", 0, None)
    return spark_plan_restore(spark, location, progress=progress, **kwargs)


def _start(master: str) -> None:
    from tables.spark.session import get_spark

    try:
        get_spark(master)
    except Exception:  # a job that needs it later fails with the same error on its row
        logger.exception("the Spark session did not start with the worker")


def start_with_worker(master: str) -> None:
    """Start the worker's session in the background, unless SPARK_START_WITH_WORKER is off."""
    if os.environ.get("SPARK_START_WITH_WORKER", "1") not in ("1", "true", "yes"):
        return
    threading.Thread(target=_start, args=(master,), name="spark-session-start", daemon=True).start()


def stop_with_worker() -> None:
    """Stop the worker's session, if this process ever made one."""
    if "tables.spark.session" in sys.modules:  # never import pyspark just to stop nothing
        from tables.spark.session import stop_spark

        stop_spark()
