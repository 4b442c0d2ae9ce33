"""The process's Spark session: one long-lived SparkSession, created on first use.

Contract:
- The master is the argument, else the SPARK_MASTER environment variable, else `local[*]`.
  Callers in the web app pass `settings.SPARK_MASTER`; this module never imports Django.
- A `local[...]` master gets a conservative configuration for a small box (few shuffle
  partitions, modest driver memory, no UI, driver bound to 127.0.0.1, Python workers
  running this interpreter). A `spark://` (or any other) master is used unchanged: the
  driver binds as Spark decides and the workers use their own Python.
- Nothing is fetched from the network: no Delta Lake jars, no packages. The jobs read the
  Delta log with the project's own core and hand Spark plain file lists.
- The session is cached per process and recreated when it was stopped (or when another
  master is asked for, in which case the old session is stopped first).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"

# Spark settings for every master.
BASE_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
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
    "spark.pyspark.python": sys.executable,
    "spark.pyspark.driver.python": sys.executable,
}

_lock = threading.Lock()
_session: SparkSession | None = None
_master: str | None = None


def resolve_master(master: str | None = None) -> str:
    return (master or os.environ.get("SPARK_MASTER") or DEFAULT_MASTER).strip()


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[") or master.startswith("local-cluster[")


def session_conf(master: str, app_name: str = "deltaweb", extra: dict[str, str] | None = None) -> dict[str, str]:
    """The configuration get_spark() builds a session with (for tests and the UI)."""
    conf = {"spark.master": master, "spark.app.name": app_name, **BASE_CONF}
    if is_local(master):
        conf.update(LOCAL_CONF)
    conf.update(extra or {})
    return conf


def _alive(spark: SparkSession | None) -> bool:
    if spark is None:
        return False
    sc = spark.sparkContext
    try:
        return sc._jsc is not None and not sc._jsc.sc().isStopped()
    except Exception:  # the JVM went away
        return False


def get_spark(
    master: str | None = None, app_name: str = "deltaweb", extra_conf: dict[str, str] | None = None
) -> SparkSession:
    """The process's SparkSession for `master` (see the module's contract)."""
    global _session, _master
    wanted = resolve_master(master)
    with _lock:
        if _alive(_session) and _master == wanted:
            return _session  # type: ignore[return-value]
        if _alive(_session):
            _session.stop()  # type: ignore[union-attr]
        from pyspark.sql import SparkSession

        if is_local(wanted):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            # PySpark starts its Python workers with PYSPARK_PYTHON (default: `python3` on
            # PATH), not with spark.pyspark.python: locally, this interpreter and its packages
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder: Any = SparkSession.builder
        for key, value in session_conf(wanted, app_name, extra_conf).items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel(os.environ.get("SPARK_LOG_LEVEL", "ERROR"))
        _session, _master = spark, wanted
        return spark


def stop_spark() -> None:
    """Stop the process's session (tests, worker shutdown); the next get_spark() starts anew."""
    global _session, _master
    with _lock:
        if _alive(_session):
            _session.stop()  # type: ignore[union-attr]
        _session, _master = None, None
