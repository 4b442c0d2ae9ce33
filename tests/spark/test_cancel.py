"""Cancelling Spark work (tables.spark.engine.control) on whichever session the suite runs: a classic
in-process one (a job group, cancelJobGroup) and, in `make test`'s Connect pass, a Spark
Connect client (an operation tag, interruptTag).

- Interrupting a tag cancels that work only: its action raises soon, the session goes on.
- A running data job cancelled by its user (jobs.request_cancel) has its Spark work
  interrupted by the worker's watcher, and ends failed with stage `cancelled` and who asked.
"""

from __future__ import annotations

import threading
import time

import pytest

SLOW_ROWS = 400  # at 0.1 s a row in two tasks: 20 s unless interrupted


def _slow_query(spark):
    from pyspark.sql import functions as F

    @F.udf("long")
    def slow(x):
        import time as t

        t.sleep(0.1)
        return x

    return spark.range(0, SLOW_ROWS, 1, 2).select(slow("id").alias("x")).agg(F.sum("x"))


def _wait_for(predicate, seconds: float = 120, what: str = "") -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {seconds:g} s for {what}")
        time.sleep(0.1)


def test_interrupting_a_tag_cancels_that_work_only(spark) -> None:
    from tables.spark.engine.control import interrupt, job_scope

    stages, box = [], {}

    def run() -> None:
        with job_scope(spark, "deltaweb-job-cancel-me", stages.append):
            try:
                box["value"] = _slow_query(spark).collect()
            except Exception as exc:
                box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    _wait_for(lambda: stages, what="the job's stages")  # it runs: its tasks are reported
    started = time.monotonic()
    interrupt(spark, "deltaweb-job-other")  # another tag: nothing happens to this one
    assert thread.is_alive()
    interrupt(spark, "deltaweb-job-cancel-me")
    thread.join(60)
    assert not thread.is_alive() and "error" in box, box
    assert time.monotonic() - started < 30
    from tables.services.errors import spark_failure

    assert spark_failure(box["error"])[0] == "spark_cancelled"
    assert spark.range(5).count() == 5  # the session goes on


@pytest.mark.django_db(transaction=True)
def test_a_running_data_job_cancelled_by_its_user_ends_cancelled(spark, tmp_path, settings, django_user_model) -> None:
    from tables.models import Job, JobStatus, Table
    from tables.services.data import jobs as data_jobs
    from tables.services.jobs import lifecycle as jobs
    from tables.spark.engine.control import job_scope, job_tag, stages_line
    from tables.spark.engine.worker import interrupt_job

    settings.DELTAWEB_RESULTS_DIR = str(tmp_path / "results")
    user = django_user_model.objects.create_user("ana", password="x")
    table = Table.objects.create(name="t", slug="t", location=str(tmp_path))
    job = Job.objects.create(kind="rowdiff", table=table, params={"keys": ["id"]}, created_by=user, stage="queued")

    class SlowJob:
        """The shape of the worker's SparkDataJobs, over work slow enough to be cancelled."""

        def __call__(self, location, params, out_dir, progress):
            with job_scope(spark, job_tag(params["job"]), lambda s: progress(*stages_line(s))):
                _slow_query(spark).collect()
            return {"path": str(out_dir)}

        def interrupt(self, job_id: int) -> None:
            interrupt_job(job_id)  # the worker's own hook

    compute = SlowJob()
    runner = threading.Thread(target=data_jobs.run_job, args=(job.pk, compute), daemon=True)
    runner.start()
    _wait_for(lambda: Job.objects.get(pk=job.pk).stage.startswith("Spark: "), what="the job's Spark stages")
    jobs.request_cancel(Job.objects.get(pk=job.pk), user)
    runner.join(60)
    job.refresh_from_db()
    assert not runner.is_alive()
    assert job.status == JobStatus.FAILED and job.stage == "cancelled" and job.error == "Cancelled by ana."
    assert job.result["cancelledBy"] == "ana" and job.result["cancelledAt"]
    assert not data_jobs.results_dir(job).exists()
