"""Spark's executors and their Python: on a standalone cluster (scripts/spark-cluster.sh,
`make test` runs this module and the data-job suites with SPARK_MASTER=spark://...) and on a
local master otherwise.

- The jobs' tasks run in other processes (the cluster's executors are other JVMs) with the
  interpreter the session names, never the worker machine's own `python3`.
- A session whose executors run another minor version of Python does not start: it fails at
  once with a clear error (in a separate process, as a worker starting its session would).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_tasks_run_in_executor_processes_with_the_configured_python(spark) -> None:
    from tables.spark.engine.conf import executor_python

    sc = spark.sparkContext
    assert sc.getConf().get("spark.pyspark.python") == executor_python() == sys.executable
    seen = set(sc.parallelize(range(8), 4).map(lambda _: (os.getpid(), sys.executable)).collect())
    assert {exe for _, exe in seen} == {sys.executable}
    assert os.getpid() not in {pid for pid, _ in seen}  # Python workers are other processes
    if sc.master.startswith("spark://"):
        # executors are other JVMs, registered with the master from the worker
        executors = sc._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver
        assert executors >= 1


def test_a_preview_read_by_executors_equals_delta_rs(spark, tmp_path) -> None:
    """A data job end to end: executors read the table's files (paths every executor can
    read), and the Parquet result the web process then pages holds the version's rows."""
    from tables.spark.jobs.preview import write_preview

    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"id": pa.array(range(50), pa.int64()), "s": [str(i) for i in range(50)]}))
    write_deltalake(str(path), pa.table({"id": pa.array([99], pa.int64()), "s": ["x"]}), mode="append")
    out = write_preview(spark, str(path), 1, tmp_path / "out")
    got = pq.read_table(out["path"]).to_pylist()
    want = DeltaTable(str(path), version=1).to_pyarrow_table().to_pylist()
    assert out["total"] == len(want) == 51  # fewer than the preview keeps: all of them
    assert sorted(got, key=lambda r: r["id"]) == sorted(want, key=lambda r: r["id"])


def test_an_executor_python_of_another_minor_version_is_caught_at_session_start(tmp_path) -> None:
    """SPARK_EXECUTOR_PYTHON names an interpreter that reports Python 3.<other> (this one, with
    a sitecustomize that changes sys.version_info): the session refuses to start, and says
    which versions it found and what to set."""
    other = f"3.{sys.version_info[1] - 1}"
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import collections, sys\n"
        "Version = collections.namedtuple('version_info', 'major minor micro releaselevel serial')\n"
        f"sys.version_info = Version(3, {sys.version_info[1] - 1}, 0, 'final', 0)\n"
    )
    wrapper = tmp_path / "python-other"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    assert subprocess.run([str(wrapper), "-c", "import sys; print(sys.version_info[1])"], capture_output=True,
                          text=True, check=True).stdout.strip() == other.split(".")[1]  # fmt: skip
    script = textwrap.dedent(
        """
        from tables.spark.session import SparkPythonMismatch, get_spark, stop_spark
        try:
            get_spark()
        except SparkPythonMismatch as exc:
            print("MISMATCH:", exc)
            raise SystemExit(3)
        stop_spark()
        """
    )
    # on the cluster, one core of its two: the test run's own session holds the other
    env = {**os.environ, "SPARK_EXECUTOR_PYTHON": str(wrapper), "SPARK_LOG_LEVEL": "OFF", "SPARK_CORES_MAX": "1"}
    r = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    driver = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert r.returncode == 3, r.stdout[-2000:] + r.stderr[-3000:]
    line = next(x for x in r.stdout.splitlines() if x.startswith("MISMATCH:"))
    assert f"The executors run Python {other}, the driver {driver}." in line
    assert "SPARK_EXECUTOR_PYTHON" in line and str(wrapper) in line and "Traceback" not in line


# --- object-store tables: read in the executors (no jars, no driver-side spool) -----------------------


def test_an_s3_table_on_moto_read_in_the_executors(spark, s3_server, monkeypatch, tmp_path) -> None:
    """On a cluster master the default route is the Python data source: the executors (other
    JVMs, without the driver's AWS_* variables) fetch the objects; then a RESTORE planned on
    Spark commits to the bucket and delta-rs reads it."""
    from tables.spark.jobs.restore import run_restore, spark_plan_restore
    from tables.spark.reading.objectstore_source import ROUTE_ENV, objectstore_route
    from tests.conftest import use_store_environment
    from tests.spark.compare import multiset
    from tests.spark.objectstore_tables import assert_data_jobs_equal, upload_s3, write_history_table

    use_store_environment(monkeypatch, s3_server.env())
    monkeypatch.delenv(ROUTE_ENV, raising=False)
    if spark.sparkContext.master.startswith("spark://"):
        assert objectstore_route(spark.sparkContext.master) == "datasource"
    local = write_history_table(tmp_path / "local")
    uri = upload_s3(s3_server.boto3(), local, "cluster-tables", "history")
    opts = s3_server.storage_options()
    assert_data_jobs_equal(spark, local, uri, opts, tmp_path)
    plan = spark_plan_restore(spark, uri, version=0)
    result = run_restore(spark, uri, plan.to_dict(), "txn-cluster-s3")
    dt = DeltaTable(uri, storage_options=opts)
    assert dt.version() == result["version"] == 4 and dt.history(1)[0]["operation"] == "RESTORE"
    assert multiset(dt.to_pyarrow_table()) == multiset(
        DeltaTable(uri, version=0, storage_options=opts).to_pyarrow_table()
    )


def test_an_abfss_table_on_azurite_read_in_the_executors(spark, azure_server, monkeypatch, tmp_path) -> None:
    from tables.spark.reading.objectstore_source import ROUTE_ENV
    from tests.conftest import use_store_environment
    from tests.spark.objectstore_tables import assert_data_jobs_equal, upload_azure, write_history_table

    use_store_environment(monkeypatch, azure_server.env())
    monkeypatch.delenv(ROUTE_ENV, raising=False)
    local = write_history_table(tmp_path / "local", partitioned=True)
    uri = upload_azure(azure_server, local, "clusterlake", "history")
    assert_data_jobs_equal(spark, local, uri, azure_server.storage_options(), tmp_path)
