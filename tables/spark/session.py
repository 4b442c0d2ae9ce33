"""The process's Spark session: one long-lived SparkSession, created on first use.

Contract:
- The master is the argument, else the SPARK_MASTER environment variable, else `local[*]`.
  Callers in the web app pass `settings.SPARK_MASTER`; this module never imports Django.
- Every master gets the executors' Python set explicitly (`spark.pyspark.python`, and the
  PYSPARK_PYTHON that PySpark ships with each task): SPARK_EXECUTOR_PYTHON, else this
  interpreter, which must exist at the same path on every Spark worker (the docker-compose
  Spark services run the app's image for that). A worker left to its own `python3` runs
  tasks without the project's packages, or fails on another minor version.
- When the session starts, one tiny task checks the executors' Python: another minor
  version than the driver's, or one without pyarrow and the project's code, stops the
  session and raises SparkPythonMismatch with what was found and what to set.
- A `local[...]` master gets a conservative configuration for a small box (few shuffle
  partitions, modest driver memory, no UI, driver bound to 127.0.0.1). A `spark://` master
  on loopback (CI's standalone cluster) binds the driver to 127.0.0.1 too; other masters
  bind as Spark decides.
- Nothing is fetched from the network: no Delta Lake jars, no packages. The jobs read the
  Delta log with the project's own core and hand Spark plain file lists.
- The session is cached per process and recreated when it was stopped (or when another
  master is asked for, in which case the old session is stopped first). A Celery worker
  starts it once, in the process that runs the tasks (tables.tasks, worker_ready).
- A new session runs the data jobs' shapes once on a tiny file (`warm_up`), so that the
  worker's first job is not the one that pays for loading and compiling them;
  DELTAWEB_SPARK_WARM_UP=0 skips it.
- With DELTAWEB_SPARK_REMOTE (`sc://host:port`, or the `remote` argument) the session is a
  Spark Connect client instead (tables.spark.engine.connect): no JVM in this process; the server
  runs with the configuration of tables.spark.engine.conf (`session_conf`, one declaration) and its own master.
  The client session is checked with one round trip on every get_spark() and made anew when
  the server restarted; a server that does not answer raises SparkUnavailable. A process is a
  Connect client or a classic driver, never both. The executors' Python check and the
  warm-up run through the DataFrame API on a new client session as on a classic one.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tables.spark.engine.conf import executor_python, resolve_master, session_conf
from tables.spark.engine.connect import SparkUnavailable, connect, discard, is_connect, ping, remote_url
from tables.spark.engine.masters import is_local, is_loopback_cluster

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class SparkPythonMismatch(RuntimeError):
    """The executors run a Python the jobs cannot use (another minor version, missing packages)."""


_lock = threading.Lock()
_session: SparkSession | None = None
_master: str | None = None


def check_executor_python(spark: SparkSession) -> None:
    """Run one task on an executor; SparkPythonMismatch if its Python cannot run the jobs."""
    driver = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if is_connect(spark):
        conf_python = spark.conf.get("spark.pyspark.python", None)
    else:
        conf_python = spark.sparkContext.getConf().get("spark.pyspark.python")
    python = conf_python or executor_python()
    hint = (
        f"Spark's executors must run Python {driver} with the project installed: set "
        f"SPARK_EXECUTOR_PYTHON (now {python}) to such an interpreter on the Spark workers"
    )

    def probe(_: Any) -> tuple[str, str, str]:
        # runs on an executor; nested, so it travels by value and needs no project code there
        import importlib
        import sys as executor_sys

        missing = []
        for module in ("pyarrow", "tables.spark"):
            try:
                importlib.import_module(module)
            except ImportError:
                missing.append(module)
        major, minor = executor_sys.version_info[:2]
        return f"{major}.{minor}", executor_sys.executable, ",".join(missing)

    try:
        version, path, missing = _run_probe(spark, probe)
    except SparkUnavailable:
        raise
    except Exception as exc:  # Spark wraps the worker's error in Py4J/PySpark exceptions
        text = str(exc)
        if "PYTHON_VERSION_MISMATCH" in text or "different version" in text:
            # "Python in worker has different version: 3.10 than that in driver: 3.11, ..."
            found = re.search(r"different version:? \(?([\d., ]+?)\)? than that in driver", text)
            seen = found.group(1).replace(", ", ".").strip() if found else "another version"
            raise SparkPythonMismatch(f"The executors run Python {seen}, the driver {driver}. {hint}.") from None
        raise
    if version != driver:
        raise SparkPythonMismatch(f"The executors run Python {version} ({path}), the driver {driver}. {hint}.")
    if missing:
        raise SparkPythonMismatch(f"The executors' Python ({path}) cannot import {missing}. {hint}.")


def _run_probe(spark: SparkSession, probe: Any) -> tuple[str, str, str]:
    """The probe's answer from one task: an RDD on a classic session, mapInArrow (the
    DataFrame API) on a Connect client, which has no RDDs."""
    if not is_connect(spark):
        return spark.sparkContext.parallelize([0], 1).map(probe).collect()[0]

    def batches(items: Any) -> Any:
        import pyarrow as pa

        for _batch in items:
            version, path, missing = probe(None)
            yield pa.RecordBatch.from_pydict({"version": [version], "path": [path], "missing": [missing]})

    row = spark.range(0, 1, 1, 1).mapInArrow(batches, "version string, path string, missing string").first()
    return row["version"], row["path"], row["missing"]


WARM_UP_ENV = "DELTAWEB_SPARK_WARM_UP"


WARM_UP_PREFIX = "deltaweb-warm-up-"
# a warm-up takes seconds: a directory this old was left by a process killed during one
STALE_WARM_UP_SECONDS = 3600


def _remove_stale_warm_ups(tmp: Path) -> None:
    """Remove the warm-up directories of processes killed during theirs (a worker killed at
    start never reaches its `finally`); a younger one may be another process's, still at work."""
    import shutil
    import time

    for old in tmp.glob(f"{WARM_UP_PREFIX}*"):
        try:
            if time.time() - old.lstat().st_mtime > STALE_WARM_UP_SECONDS and old.is_dir() and not old.is_symlink():
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            continue


def warm_up(spark: SparkSession) -> None:
    """Run the shapes of the data jobs once on a tiny Parquet file (a scan with `_metadata`
    columns, a broadcast join of a local relation, a one-task sort and Parquet write, an
    aggregation over xxhash64, an Arrow collect, the small-files reader, a keyed diff): the JVM
    loads and compiles their code here, at start, not in the first user's job (a first preview
    took 10-18× a warm one)."""
    import shutil
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    from tables.spark.jobs.rowdiff import diff_into
    from tables.spark.reading.local_source import read_local_files
    from tables.spark.reading.read import input_files, small_frame

    # where the server and its executors can read it too: a Connect server or a cluster in other
    # containers shares the results directory (DELTAWEB_RESULTS_DIR), not this process's /tmp
    shared = os.environ.get("DELTAWEB_RESULTS_DIR", "")
    tmp = Path(shared) if shared and Path(shared).is_dir() else Path(tempfile.gettempdir())
    _remove_stale_warm_ups(tmp)
    base = tempfile.mkdtemp(prefix=WARM_UP_PREFIX, dir=tmp)
    try:
        n = 1000
        pq.write_table(
            pa.table({"id": pa.array(range(n), pa.int64()), "s": [f"v{i % 7}" for i in range(n)]}), f"{base}/a.parquet"
        )
        df = spark.read.parquet(f"{base}/a.parquet").select(
            "*", F.col("_metadata.file_path").alias("f"), F.col("_metadata.row_index").alias("r")
        )
        entries = small_frame(spark, pa.table({"f": input_files(df), "v": [1]}))
        rows = df.join(F.broadcast(entries), "f").withColumn("h", F.xxhash64(F.col("s").isNull(), "s"))
        rows.coalesce(1).sortWithinPartitions("v", "f", "r").write.mode("overwrite").parquet(f"{base}/out")
        rows.groupBy("s").agg(F.count_if(F.col("v") == 1), F.max("h"), F.to_json(F.struct(F.max("id")))).toArrow()
        # the small-files reader (a Python data source): its first read starts the Python
        # planner and workers, 2-3 s that would otherwise fall on a user's first big job
        a = Path(base) / "a.parquet"
        schema = {"fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
        read_local_files(spark, [(a, a.as_uri(), a.stat().st_size)], schema).toArrow()
        # the keyed diff's shuffles, grouping and joins: a first diff took 3.5 s, later ones 1.9 s
        plain = spark.read.parquet(f"{base}/a.parquet")
        fewer = plain.where(F.col("id") % 10 != 0)
        diff_into(plain, fewer, ["id"], Path(base) / "diff", (0, 1), "warm-up")
        diff_into(plain, fewer, ["id"], Path(base) / "small-diff", (0, 1), "warm-up", small=True)  # on the driver
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _alive(spark: SparkSession | None) -> bool:
    if spark is None:
        return False
    sc = spark.sparkContext
    try:
        return sc._jsc is not None and not sc._jsc.sc().isStopped()
    except Exception:  # the JVM went away
        return False


_remote: dict[str, SparkSession] = {}


def _warmed(spark: SparkSession) -> SparkSession:
    """A new session checked (the executors' Python) and warmed up, or stopped and the error raised."""
    try:
        check_executor_python(spark)
        if os.environ.get(WARM_UP_ENV, "1") in ("1", "true", "yes"):
            warm_up(spark)
    except Exception:
        if is_connect(spark):
            discard(spark)
        else:
            spark.stop()
        raise
    return spark


def _connect_session(url: str) -> SparkSession:
    """The process's client session to the Connect server at `url` (the module's contract)."""
    if _alive(_session):
        raise RuntimeError(
            "this process runs an in-process Spark session; a process is a Spark Connect client "
            "or a classic driver, never both (stop_spark() first)"
        )
    spark = _remote.get(url)
    if spark is not None and not spark.is_stopped:
        try:
            ping(spark, url)
            return spark
        except SparkUnavailable:
            discard(_remote.pop(url), release=False)
            raise
        except Exception:  # the server restarted (its sessions are gone): a new one below
            discard(_remote.pop(url), release=False)
    spark = _warmed(connect(url))
    _remote[url] = spark
    return spark


def get_spark(
    master: str | None = None,
    app_name: str = "deltaweb",
    extra_conf: dict[str, str] | None = None,
    remote: str | None = None,
) -> SparkSession:
    """The process's SparkSession for `master`, or a Spark Connect client session when
    `remote` (else DELTAWEB_SPARK_REMOTE) names a server (see the module's contract)."""
    global _session, _master
    url = remote_url(remote)
    with _lock:
        if url is not None:
            return _connect_session(url)
        if _remote or os.environ.get("SPARK_CONNECT_MODE_ENABLED"):
            raise RuntimeError(
                "this process is a Spark Connect client; a process is a Spark Connect client or a "
                "classic driver, never both"
            )
        wanted = resolve_master(master)
        if _alive(_session) and _master == wanted:
            return _session  # type: ignore[return-value]
        if _alive(_session):
            _session.stop()  # type: ignore[union-attr]
        from pyspark.sql import SparkSession

        conf = session_conf(wanted, app_name, extra_conf)
        if is_local(wanted) or is_loopback_cluster(wanted):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # PySpark ships PYSPARK_PYTHON (default: `python3` on the worker's PATH) with every task
        # and ignores spark.pyspark.python in an in-process driver: both must name one interpreter
        os.environ["PYSPARK_PYTHON"] = conf["spark.pyspark.python"]
        builder: Any = SparkSession.builder
        for key, value in conf.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel(os.environ.get("SPARK_LOG_LEVEL", "ERROR"))
        _session, _master = _warmed(spark), wanted
        return spark


def current_spark() -> SparkSession | None:
    """The session this process already has (Connect or classic), starting none."""
    with _lock:
        for spark in _remote.values():
            if not spark.is_stopped:
                return spark
        return _session if _alive(_session) else None


def stop_spark() -> None:
    """Stop the process's session (tests, worker shutdown); the next get_spark() starts anew."""
    global _session, _master
    with _lock:
        if _alive(_session):
            _session.stop()  # type: ignore[union-attr]
        for spark in _remote.values():
            discard(spark)
        _remote.clear()
        _session, _master = None, None
