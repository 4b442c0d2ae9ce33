"""The session's settings for interactive jobs: file lists read without listing jobs, names
fetched from the JVM whole, and the warm-up leaving nothing behind."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tables.spark.engine import conf
from tables.spark.reading.read import _read_files, input_files
from tables.spark.session import warm_up


def _jobs_during(spark, label: str, fn):
    sc = spark.sparkContext
    sc.setJobGroup(label, label)
    try:
        out = fn()
    finally:
        sc.setJobGroup("", "")
    return out, list(sc.statusTracker().getJobIdsForGroup(label))


def test_many_files_are_listed_on_the_driver_with_their_names(spark, tmp_path) -> None:
    """80 files (Spark lists more than 32 paths with a job of its own by default), some with
    characters a URI escapes: no job runs before the data is read, and every file's name is
    Spark's own (as `_metadata.file_path` gives it)."""
    files = []
    for i in range(80):
        name = f"part {i} %{i}.parquet" if i % 10 == 0 else f"part-{i}.parquet"
        pq.write_table(pa.table({"id": pa.array([i, i + 1000], pa.int64())}), tmp_path / name)
        files.append(tmp_path / name)
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    (df, uris), jobs = _jobs_during(spark, "listing", lambda: _read_files(spark, files, schema, "test"))
    assert jobs == []
    assert sorted(uris) == sorted(files)
    assert sorted(input_files(df)) == sorted(df._jdf.inputFiles())  # one call == Spark's own list
    seen = {r["f"] for r in df.selectExpr("_metadata.file_path AS f").distinct().collect()}
    assert seen == set(uris.values())
    assert sorted(r["id"] for r in df.collect()) == sorted([*range(80), *range(1000, 1080)])


def test_warm_up_leaves_nothing_behind(spark, tmp_path, monkeypatch) -> None:
    """The warm-up's files go in a directory of its own that is gone after it, and the
    directory a process killed during its warm-up left an hour ago goes too; a younger one
    may be another process's at work, and stays. The process's temporary directory is this
    test's own: a worker of another test, warming up its own session meanwhile, writes in the
    shared /tmp."""
    import os
    import time

    left = tmp_path / "deltaweb-warm-up-killed"
    (left / "out").mkdir(parents=True)
    (left / "a.parquet").write_bytes(b"x")
    hour_ago = time.time() - 3700
    os.utime(left, (hour_ago, hour_ago))
    busy = tmp_path / "deltaweb-warm-up-busy"
    busy.mkdir()
    made = []
    mkdtemp = tempfile.mkdtemp

    def recorded(*args, **kwargs):
        made.append(Path(mkdtemp(*args, **kwargs)))
        return str(made[-1])

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(tempfile, "mkdtemp", recorded)
    warm_up(spark)
    assert [p.parent for p in made if p.name.startswith("deltaweb-warm-up-")] == [tmp_path]
    assert list(tmp_path.glob("deltaweb-warm-up-*")) == [busy]
    assert spark.range(3).count() == 3


@pytest.mark.parametrize(
    ("cores", "mib", "heap"),
    [(2, 24576, "1536m"), (1, 2048, "1024m"), (8, 16384, "4096m"), (64, 262144, "8192m")],
)
def test_the_driver_heap_follows_the_machine_unless_configured(monkeypatch, cores, mib, heap) -> None:
    monkeypatch.delenv("SPARK_DRIVER_MEMORY", raising=False)
    monkeypatch.setattr(conf, "machine_size", lambda: (cores, mib))
    assert conf.driver_memory() == heap
    monkeypatch.setenv("SPARK_DRIVER_MEMORY", "3g")
    assert conf.driver_memory() == "3g"


def test_the_sessions_jvm_has_that_heap_and_returns_memory_when_idle(spark) -> None:
    if not conf.is_local(spark.conf.get("spark.master")):
        pytest.skip("a cluster's driver and executors are sized by the cluster")
    jvm = spark.sparkContext._jvm
    args = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert f"-Xmx{conf.driver_memory()}" in args
    assert "-XX:G1PeriodicGCInterval=20000" in args and "-XX:MaxHeapFreeRatio=30" in args
