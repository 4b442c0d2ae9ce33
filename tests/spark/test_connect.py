"""Spark through Spark Connect (tables.spark.engine.connect): a real server (scripts/spark_connect.sh)
and this process as its client, in `make test`'s Connect pass (DELTAWEB_TEST_SPARK_CONNECT=1),
where the data-job suites run through it too.

- A server that does not answer fails a data job with the named error (spark_unavailable)
  giving its sc:// address and none of the URL's parameters, and leaves nothing written.
- The server has a token (DELTAWEB_SPARK_CONNECT_TOKEN): a client without it, or with another,
  is refused with SparkTokenRefused saying so (a data job fails with it), never showing a
  token; a client with it works. The token is on no command line, in no URL or log, and is
  sent in the clear to no other host.
- Confinement holds through Connect: a path the log names outside the table's location is
  refused in this process (the client) before anything is sent to the server, for a table on
  disk and for an object-store table read in the server's executors by the data source.
- The server reports the stages of a job's operations while they run (its progress).
- A process is a Connect client or a classic driver, never both.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import pyarrow as pa
import pytest

from tests.conftest import free_port, use_store_environment
from tests.spark.conftest import CONNECT_DIR, connect_mode, connect_token
from tests.spark.objectstore_tables import upload_s3, write_history_table

pytestmark = pytest.mark.skipif(
    not connect_mode(), reason="Spark Connect runs in make test's Connect pass (DELTAWEB_TEST_SPARK_CONNECT=1)"
)

deltalake = pytest.importorskip("deltalake")
from deltalake import write_deltalake  # noqa: E402


class Executions:
    """Counts the operations the server runs for this client (its progress handler is called
    for every one, at least when it ends)."""

    def __init__(self, spark) -> None:
        self.spark, self.ops = spark, set()

    def __call__(self, stages, inflight_tasks, operation_id, done) -> None:
        self.ops.add(operation_id)

    def __enter__(self) -> Executions:
        self.spark.registerProgressHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        self.spark.removeProgressHandler(self)


def test_a_server_that_does_not_answer_is_named(spark) -> None:
    from tables.spark.engine.connect import SparkUnavailable
    from tables.spark.session import get_spark

    port = free_port()
    with pytest.raises(SparkUnavailable) as info:
        get_spark(remote=f"sc://127.0.0.1:{port}/;token=hunter2;user_id=x")
    assert info.value.code == "spark_unavailable"
    assert f"sc://127.0.0.1:{port}" in str(info.value) and "hunter2" not in str(info.value)
    assert spark.range(3).count() == 3  # the process's session to the real server is untouched


@pytest.mark.django_db
def test_a_data_job_fails_with_spark_unavailable_and_leaves_nothing(spark, tmp_path, monkeypatch, settings) -> None:
    from tables import tasks
    from tables.models import Job, JobStatus, Table
    from tables.services.data import jobs as data_jobs

    settings.DELTAWEB_RESULTS_DIR = str(tmp_path / "results")
    root = tmp_path / "t"
    write_deltalake(str(root), pa.table({"id": pa.array([1, 2], pa.int64())}))
    table = Table.objects.create(name="t", slug="t", location=str(root))
    job = Job.objects.create(kind="preview", table=table, params={"version": 0}, stage="queued")
    port = free_port()
    monkeypatch.setenv("DELTAWEB_SPARK_REMOTE", f"sc://127.0.0.1:{port}/;token=hunter2")
    data_jobs.run_job(job.pk, tasks.spark_data_jobs())
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.result["errorCode"] == "spark_unavailable"
    assert f"sc://127.0.0.1:{port}" in job.error and "not answering" in job.error
    assert "hunter2" not in job.error + json.dumps(job.result)
    assert not data_jobs.results_dir(job).exists()  # nothing half-written


def test_a_client_without_the_token_is_refused_and_says_so(spark, spark_connect_server) -> None:
    from tables.spark.engine.connect import SparkTokenRefused, SparkUnavailable, connect

    token = connect_token()
    with pytest.raises(SparkTokenRefused) as info:
        connect(spark_connect_server, token="")  # none
    assert isinstance(info.value, SparkUnavailable) and info.value.code == "spark_unavailable"
    assert spark_connect_server in str(info.value) and "requires a token and none was sent" in str(info.value)
    assert "DELTAWEB_SPARK_CONNECT_TOKEN" in str(info.value) and token not in str(info.value)
    assert spark.range(3).count() == 3  # the process's session, with the token, is untouched


def test_a_client_with_another_token_is_refused_without_showing_either(spark, spark_connect_server) -> None:
    from tables.spark.engine.connect import SparkTokenRefused, connect

    token, wrong = connect_token(), "not-the-token-" + secrets.token_hex(8)
    with pytest.raises(SparkTokenRefused) as info:
        connect(spark_connect_server, token=wrong)
    text = str(info.value)
    assert "refused this client's token" in text and wrong not in text and token not in text
    # PySpark's own way, the token in the URL, is refused alike (to localhost it sends it)
    port = spark_connect_server.rsplit(":", 1)[1]
    with pytest.raises(SparkTokenRefused) as info:
        connect(f"sc://localhost:{port}/;token={wrong}")
    assert wrong not in str(info.value) and f"sc://localhost:{port}" in str(info.value)


def test_a_client_with_the_token_works(spark, spark_connect_server) -> None:
    from tables.spark.engine.connect import connect, discard

    client = connect(spark_connect_server, token=connect_token())
    try:
        assert client.range(5).count() == 5
    finally:
        discard(client)
    assert spark.range(3).count() == 3


@pytest.mark.django_db
def test_a_data_job_with_a_refused_token_fails_saying_so(spark, spark_connect_server, tmp_path, monkeypatch, settings):
    from tables import tasks
    from tables.models import Job, JobStatus, Table
    from tables.services.data import jobs as data_jobs

    settings.DELTAWEB_RESULTS_DIR = str(tmp_path / "results")
    root = tmp_path / "t"
    write_deltalake(str(root), pa.table({"id": pa.array([1, 2], pa.int64())}))
    table = Table.objects.create(name="t", slug="t", location=str(root))
    job = Job.objects.create(kind="preview", table=table, params={"version": 0}, stage="queued")
    wrong = "not-the-token-" + secrets.token_hex(8)
    # the same server by another name: the process's cached client session is for the URL it has
    port = spark_connect_server.rsplit(":", 1)[1]
    monkeypatch.setenv("DELTAWEB_SPARK_REMOTE", f"sc://localhost:{port}")
    monkeypatch.setenv("DELTAWEB_SPARK_CONNECT_TOKEN", wrong)
    data_jobs.run_job(job.pk, tasks.spark_data_jobs())
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.result["errorCode"] == "spark_unavailable"
    assert "refused this client's token" in job.error and f"sc://localhost:{port}" in job.error
    shown = job.error + json.dumps(job.result)
    assert wrong not in shown and connect_token() not in shown
    assert not data_jobs.results_dir(job).exists()


def test_the_token_is_in_no_command_line_url_or_log(spark, spark_connect_server) -> None:
    from tables.spark.engine.connect import TOKEN_ENV, server_args

    token = connect_token()
    assert token and os.environ[TOKEN_ENV] == token
    assert not any(token in a for a in server_args("local[1]"))
    assert (CONNECT_DIR / "url").read_text().strip() == spark_connect_server
    assert token not in (CONNECT_DIR / "server.log").read_text(errors="replace")
    assert (CONNECT_DIR / "token").stat().st_mode & 0o077 == 0
    # the server's processes (spark-submit's session): the token in their environment only
    leader = int((CONNECT_DIR / "server.pid").read_text())
    cmdlines = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and os.getsid(int(proc.name)) == leader:
                cmdlines.append((proc / "cmdline").read_bytes().decode(errors="replace"))
        except (OSError, ProcessLookupError):
            continue
    assert any("SparkConnectServer" in c for c in cmdlines)
    assert not any(token in c for c in cmdlines)


def test_a_token_goes_to_another_host_over_tls_only(spark) -> None:
    from tables.spark.engine.connect import connect

    with pytest.raises(ValueError, match="loopback address or over TLS") as info:
        connect("sc://192.0.2.1:15002", token="hunter2")  # nothing is sent: refused here
    assert "hunter2" not in str(info.value) and "sc://192.0.2.1:15002" in str(info.value)


def _hostile_table(root, hostile: str):
    from tables.delta.write.commit import commit

    write_history_table(root)
    add = {"path": hostile, "partitionValues": {}, "size": 10, "modificationTime": 0, "dataChange": True}
    commit(str(root), [{"add": add}], "WRITE", {"mode": "Append"})


@pytest.mark.parametrize("hostile", ["../escaped/part-0.parquet", "/etc/passwd"])
def test_a_log_path_outside_the_table_is_refused_before_the_server_runs_anything(spark, tmp_path, hostile) -> None:
    from tables.delta.errors import PathOutsideRootsError
    from tables.spark.jobs.changes import change_data
    from tables.spark.jobs.preview import write_preview
    from tables.spark.jobs.rowdiff import keyed_diff
    from tables.spark.reading.read import read_version

    root = tmp_path / "t"
    _hostile_table(root, hostile)
    with Executions(spark) as seen:
        for job in (
            lambda: read_version(spark, str(root)),
            lambda: write_preview(spark, str(root), 4, tmp_path / "p"),
            lambda: change_data(spark, str(root), 4, 4, tmp_path / "c"),
            lambda: keyed_diff(spark, str(root), 0, 4, ["id"], tmp_path / "d"),
        ):
            with pytest.raises(PathOutsideRootsError):
                job()
    assert seen.ops == set()  # nothing was run by the server
    with Executions(spark) as seen:
        assert read_version(spark, str(root), 3).count() == 4  # the version before is readable
    assert seen.ops


@pytest.mark.parametrize("hostile", ["../escaped/part-0.parquet", "s3://spark-connect-other/part-0.parquet"])
def test_an_object_store_path_outside_the_location_never_reaches_an_executor(
    spark, s3_server, monkeypatch, tmp_path, hostile
) -> None:
    """The data source route (executors of the server read the objects): the driver side, this
    client, resolves and confines every path first."""
    from tables.delta.errors import PathOutsideRootsError
    from tables.delta.write.commit import commit
    from tables.spark.reading.objectstore_source import ROUTE_ENV
    from tables.spark.reading.read import read_version

    use_store_environment(monkeypatch, s3_server.env())
    monkeypatch.setenv(ROUTE_ENV, "datasource")
    uri = upload_s3(s3_server.boto3(), write_history_table(tmp_path / "local"), "spark-connect", tmp_path.name)
    with Executions(spark) as seen:
        assert read_version(spark, uri).count() == 4  # the data source works through Connect
    assert seen.ops
    add = {"path": hostile, "partitionValues": {}, "size": 10, "modificationTime": 0, "dataChange": True}
    commit(uri, [{"add": add}], "WRITE", {"mode": "Append"})
    with Executions(spark) as seen:
        with pytest.raises(PathOutsideRootsError):
            read_version(spark, uri)
    assert seen.ops == set()


def test_the_server_reports_a_jobs_stages_while_it_runs(spark, tmp_path) -> None:
    from tables.spark.engine.control import job_scope, stages_line
    from tables.spark.jobs.rowdiff import keyed_diff

    root = tmp_path / "t"
    write_history_table(root)
    reports = []
    with job_scope(spark, "deltaweb-job-stages", reports.append):
        keyed_diff(spark, str(root), 0, 3, ["id"], tmp_path / "d")
        # the server reports progress at an interval: a job that lasts a few seconds, so that
        # at least one report lands whatever the machine's speed
        spark.sql("SELECT reflect('java.lang.Thread', 'sleep', CAST(4000 AS BIGINT)) FROM range(0, 2, 1, 2)").collect()
    assert reports and all(s.tasks > 0 for stages in reports for s in stages)
    # reports come while stages run: the last one may be from before the job's end
    text, done, total = stages_line(reports[-1])
    assert text.startswith("Spark: ") and 0 <= done <= total and total > 0


def test_a_connect_process_never_starts_a_jvm_of_its_own(spark) -> None:
    from tables.spark.session import get_spark

    with pytest.raises(RuntimeError, match="never both"):
        get_spark("local[1]")
