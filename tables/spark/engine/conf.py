"""The Spark configuration every session gets, declared once: the classic in-process session
(tables.spark.session) and the Spark Connect server (tables.spark.engine.connect, started with the
same settings) both build theirs here. Imports nothing of Spark."""

from __future__ import annotations

import os
import sys

from tables.spark.engine.masters import is_local, is_loopback_cluster

DEFAULT_MASTER = "local[*]"

# Spark settings for every master.
BASE_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    # adaptive execution sizes shuffles from what the first stage produced (coalescing small
    # partitions, broadcasting a small side found at run time)
    "spark.sql.adaptive.enabled": "true",
    # the jobs hand Spark explicit file lists: above this many paths Spark lists them with a
    # distributed job (one task per few files, a whole job before any data is read); one
    # status call per file on the driver is far cheaper
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # createDataFrame(pyarrow.Table) keeps small tables as a driver-side LocalRelation, whose
    # rows then travel inside every task and make each query over them slow; 0 sends the
    # Arrow batches to the executors once, as an RDD.
    "spark.sql.execution.arrow.localRelationThreshold": "0",
    "spark.sql.session.timeZone": "UTC",
}

# Extra settings for local masters (a 2-core, 24 GiB box runs the web app next to Spark).
LOCAL_CONF: dict[str, str] = {
    "spark.driver.memory": os.environ.get("SPARK_DRIVER_MEMORY", "2g"),
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


def executor_python() -> str:
    """The interpreter Spark's Python workers run: SPARK_EXECUTOR_PYTHON, else this one."""
    return os.environ.get("SPARK_EXECUTOR_PYTHON") or sys.executable


def resolve_master(master: str | None = None) -> str:
    return (master or os.environ.get("SPARK_MASTER") or DEFAULT_MASTER).strip()


def session_conf(master: str, app_name: str = "deltaweb", extra: dict[str, str] | None = None) -> dict[str, str]:
    """The configuration get_spark() builds a session with (for tests and the UI)."""
    conf = {
        "spark.master": master,
        "spark.app.name": app_name,
        **BASE_CONF,
        "spark.pyspark.python": executor_python(),
        "spark.pyspark.driver.python": sys.executable,
    }
    if is_local(master):
        conf.update(LOCAL_CONF)
    else:
        # a cluster's executors: their memory, and a share of the cluster's cores so that
        # several workers' sessions (one per Celery worker) run side by side (default: all)
        conf["spark.executor.memory"] = os.environ.get("SPARK_EXECUTOR_MEMORY", "1g")
        if os.environ.get("SPARK_CORES_MAX"):
            conf["spark.cores.max"] = os.environ["SPARK_CORES_MAX"]
        if is_loopback_cluster(master):
            # executors on this machine connect back to the driver: on loopback, like the master
            conf.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    conf.update(extra or {})
    return conf
