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

# A local master's driver JVM runs the tasks too. Its heap grows with a job and, by default,
# is kept afterwards: a Connect server that once ran a large diff held 2 GB while idle. G1
# returns committed memory when a periodic collection finds the heap mostly free, so idle
# costs what is live (the JVM's own code and metadata, the cached plans), not the last peak.
IDLE_RETURN_JAVA_OPTIONS = "-XX:+UseG1GC -XX:G1PeriodicGCInterval=20000 -XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30"

HEAP_PER_CORE_MIB = 768  # two concurrent tasks a core, each with room to sort and join
HEAP_MIN_MIB, HEAP_MAX_MIB = 1024, 8192  # Spark needs about 0.5 GiB of its own; past 8 GiB a cluster fits better


def machine_size() -> tuple[int, int]:
    """(cores, MiB of memory) this process may use: the CPUs it is allowed on, and the
    machine's memory or its container's limit (cgroup v2), whichever is smaller."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    mib = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2**20
    try:
        limit = open("/sys/fs/cgroup/memory.max").read().strip()
        if limit.isdigit():
            mib = min(mib, int(limit) // 2**20)
    except OSError:
        pass
    return cores, mib


def driver_memory() -> str:
    """A local master's driver heap: SPARK_DRIVER_MEMORY, else sized from the machine
    (HEAP_PER_CORE_MIB a core, at most a quarter of its memory, within HEAP_MIN/MAX_MIB)."""
    if os.environ.get("SPARK_DRIVER_MEMORY"):
        return os.environ["SPARK_DRIVER_MEMORY"]
    cores, mib = machine_size()
    heap = max(HEAP_MIN_MIB, min(HEAP_MAX_MIB, cores * HEAP_PER_CORE_MIB, mib // 4))
    return f"{heap // 128 * 128}m"


def local_conf() -> dict[str, str]:
    """Extra settings for local masters (a 2-core, 24 GiB box runs the web app next to Spark)."""
    return {
        "spark.driver.memory": driver_memory(),
        "spark.driver.extraJavaOptions": os.environ.get("SPARK_DRIVER_JAVA_OPTIONS", IDLE_RETURN_JAVA_OPTIONS),
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
        conf.update(local_conf())
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
