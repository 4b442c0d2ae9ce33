"""Spark jobs on an object-store table (a real S3-compatible server on loopback, moto): Spark
has no Hadoop connectors here, so the data files are fetched through the storage layer into
the driver's spool and read there. Rows, previews, change data and keyed row diffs equal
those of the same table on disk and delta-rs reading the bucket; the spool is bounded and a
missing file is named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tables.delta.errors import MissingFilesError, StorageError
from tables.delta.restore.plan import plan_restore
from tables.delta.storage import api as storage_module
from tests.conftest import golden_path, use_store_environment
from tests.spark.compare import multiset
from tests.spark.objectstore_tables import (
    assert_data_jobs_equal,
    upload_azure,
    upload_s3,
    write_history_table,
)

deltalake = pytest.importorskip("deltalake")
pytest.importorskip("obstore")
from deltalake import DeltaTable  # noqa: E402

from tables.spark.jobs.restore import run_restore, spark_plan_restore  # noqa: E402
from tables.spark.reading.hadoop_route import hadoop_options, hadoop_uri, redacted  # noqa: E402
from tables.spark.reading.objectstore_source import FORWARDED_ENV, ROUTE_ENV, executor_options, objectstore_route  # noqa: E402
from tables.spark.reading.read import (  # noqa: E402
    SPOOL_ENV,
    SPOOL_LIMIT_ENV,
    ObjectStoreReadTooLargeError,
    preview_rows,
    read_version,
)

BUCKET = "spark-tables"


def upload(client, root: Path, prefix: str) -> str:
    return upload_s3(client, root, BUCKET, prefix)


@pytest.fixture
def s3(s3_server, monkeypatch, tmp_path):
    use_store_environment(monkeypatch, s3_server.env())
    monkeypatch.setenv(SPOOL_ENV, str(tmp_path / "spool"))
    client = s3_server.boto3()
    if BUCKET not in [b["Name"] for b in client.list_buckets()["Buckets"]]:
        client.create_bucket(Bucket=BUCKET)
    return s3_server


@pytest.fixture
def history_table(s3, tmp_path, request):
    """A table delta-rs wrote on disk (append, delete, update, with change data), uploaded."""
    root = write_history_table(tmp_path / "local")
    return root, upload(s3.boto3(), root, f"history/{request.node.name[:40]}")


def test_a_version_read_on_spark_equals_deltars_on_the_bucket(spark, s3) -> None:
    uri = upload(s3.boto3(), golden_path("data-reader-partition-values"), "golden-partitions")
    ours = read_version(spark, uri).toArrow()
    theirs = DeltaTable(uri, storage_options=s3.storage_options()).to_pyarrow_table()
    assert ours.num_rows == theirs.num_rows > 0 and multiset(ours) == multiset(theirs)
    # deletion vectors (which delta-rs does not read): the same as the table on disk
    uri = upload(s3.boto3(), golden_path("dv-partitioned-with-checkpoint"), "golden-dv")
    assert multiset(read_version(spark, uri).toArrow()) == multiset(
        read_version(spark, str(golden_path("dv-partitioned-with-checkpoint"))).toArrow()
    )
    local = preview_rows(spark, str(golden_path("dv-partitioned-with-checkpoint")), None, 3, 7)
    remote = preview_rows(spark, uri, None, 3, 7)
    assert remote == local  # the same rows in the same (file, row) order


def test_change_data_and_a_keyed_diff_equal_the_local_table(spark, history_table, tmp_path) -> None:
    local, uri = history_table
    assert_data_jobs_equal(spark, local, uri, s3_options(), tmp_path)


def test_the_spool_is_bounded_and_missing_files_are_named(spark, s3, history_table, monkeypatch) -> None:
    _local, uri = history_table
    monkeypatch.setenv(ROUTE_ENV, "spool")
    if not spark.sparkContext.master.startswith("local"):
        # a cluster's executors cannot see the driver's spool: named, before anything is fetched
        with pytest.raises(StorageError, match=r"executors of the cluster .* cannot see"):
            read_version(spark, uri, 0)
        return
    monkeypatch.setenv(SPOOL_LIMIT_ENV, "100")
    with pytest.raises(ObjectStoreReadTooLargeError, match=SPOOL_LIMIT_ENV):
        read_version(spark, uri, 0).count()
    monkeypatch.delenv(SPOOL_LIMIT_ENV)
    dt = DeltaTable(uri, storage_options=s3.storage_options())
    gone = dt.file_uris()[0].split(f"{uri}/", 1)[1]
    s3.boto3().delete_object(Bucket=BUCKET, Key=f"{uri.split(BUCKET + '/', 1)[1]}/{gone}")
    with pytest.raises(StorageError, match=r"data file\(s\) are missing") as info:
        read_version(spark, uri).count()
    assert gone in str(info.value)


def test_a_restore_on_spark_commits_to_the_bucket_and_deltars_reads_it(spark, s3, history_table) -> None:
    _local, uri = history_table
    opts = s3.storage_options()
    ours = spark_plan_restore(spark, uri, version=0)
    assert ours.fingerprint == plan_restore(uri, version=0).fingerprint  # the pure planner agrees
    result = run_restore(spark, uri, ours.to_dict(), "txn-objectstore-1")
    assert result["stale"] is False
    dt = DeltaTable(uri, storage_options=opts)
    assert dt.version() == result["version"] == 4 and dt.history(1)[0]["operation"] == "RESTORE"
    assert multiset(dt.to_pyarrow_table()) == multiset(
        DeltaTable(uri, version=0, storage_options=opts).to_pyarrow_table()
    )

    # a file the restore would add is gone: refused, named as the core names it, nothing written
    added = set(DeltaTable(uri, version=1, storage_options=opts).file_uris()) - set(dt.file_uris())
    key = f"{uri.split(BUCKET + '/', 1)[1]}/{added.pop().rsplit('/', 1)[1]}"
    s3.boto3().delete_object(Bucket=BUCKET, Key=key)
    with pytest.raises(MissingFilesError) as info:
        spark_plan_restore(spark, uri, version=1)
    with pytest.raises(MissingFilesError) as core:
        plan_restore(uri, version=1)
    assert str(info.value) == str(core.value) and key.rsplit("/", 1)[1] in str(info.value)
    assert DeltaTable(uri, storage_options=opts).version() == 4


# --- the datasource route: the executors read the objects (any master, no jars) ---------------------

# Tables Spark's own Parquet reader reads from disk; the data source in the executors must give
# the same rows: nested types, maps, arrays, decimals (dictionary-encoded too), INT96 and
# millisecond timestamps, timestamp_ntz, column mapping by name and by field id, deletion
# vectors, escaped file names and a column added after the first files were written.
GOLDEN_ON_SPARK = [
    "data-reader-primitives",
    "data-reader-partition-values",
    "data-reader-array-primitives",
    "data-reader-array-complex-objects",
    "data-reader-map",
    "data-reader-nested-struct",
    "data-reader-escaped-chars",
    "data-reader-timestamp_ntz-id-mode",
    "data-reader-timestamp_ntz-name-mode",
    "table-with-columnmapping-mode-id",
    "dv-with-columnmapping",
    "kernel-timestamp-INT96",
    "kernel-timestamp-TIMESTAMP_MILLIS",
    "parquet-all-types",
    "parquet-all-types-legacy-format",
    "parquet-decimal-dictionaries",
    "decimal-various-scale-precision",
    "basic-decimal-table-legacy",
    "time-travel-schema-changes-b",
]


@pytest.fixture
def datasource(monkeypatch):
    monkeypatch.setenv(ROUTE_ENV, "datasource")


@pytest.fixture(scope="module")
def golden_bucket(s3_server):
    client = s3_server.boto3()
    if BUCKET not in [b["Name"] for b in client.list_buckets()["Buckets"]]:
        client.create_bucket(Bucket=BUCKET)
    return {name: upload(client, golden_path(name), f"golden-ds/{name}") for name in GOLDEN_ON_SPARK}


@pytest.mark.parametrize("name", GOLDEN_ON_SPARK)
def test_the_datasource_route_reads_as_spark_reads_the_table_on_disk(
    spark, s3, datasource, golden_bucket, name
) -> None:
    local = str(golden_path(name))
    want = read_version(spark, local).toArrow()
    got = read_version(spark, golden_bucket[name]).toArrow()
    assert got.schema == want.schema
    assert got.num_rows == want.num_rows and multiset(got) == multiset(want)


def test_datasource_previews_change_data_and_keyed_diffs_equal_the_local_table(
    spark, datasource, history_table, golden_bucket, tmp_path
) -> None:
    for name in ("dv-with-columnmapping", "data-reader-partition-values"):
        local = str(golden_path(name))
        assert preview_rows(spark, golden_bucket[name], None, 2, 9) == preview_rows(spark, local, None, 2, 9)
    local, uri = history_table
    assert_data_jobs_equal(spark, local, uri, s3_options(), tmp_path)


def s3_options() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k.startswith("AWS_")}, "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}


def test_datasource_missing_files_are_named_and_paths_confined(spark, s3, datasource, history_table) -> None:
    _local, uri = history_table
    dt = DeltaTable(uri, storage_options=s3.storage_options())
    gone = dt.file_uris()[0].split(f"{uri}/", 1)[1]
    s3.boto3().delete_object(Bucket=BUCKET, Key=f"{uri.split(BUCKET + '/', 1)[1]}/{gone}")
    with pytest.raises(StorageError, match=r"1 data file\(s\) are missing") as info:
        read_version(spark, uri)  # before any task runs
    assert gone in str(info.value)


def test_the_executors_get_the_credentials_in_options_that_no_plan_shows(spark, s3, datasource, golden_bucket) -> None:
    """The driver's AWS_* variables reach the executors as the data source's options (a
    cluster's executors do not have the driver's environment); Spark's plans mask them."""
    from pyspark.sql import functions as F

    df = read_version(spark, golden_bucket["data-reader-primitives"])
    assert df.count() > 0
    plans = df._jdf.queryExecution().toString() + df.select(F.count("*"))._jdf.queryExecution().toString()
    assert "deltaweb_objects" in plans or "PythonDataSource" in plans or "BatchScan" in plans
    secret = os.environ["AWS_SECRET_ACCESS_KEY"]
    assert secret not in plans and os.environ["AWS_ACCESS_KEY_ID"] not in plans
    if spark.sparkContext.master.startswith("spark://"):
        # the executors run without the test's AWS_* variables: only the options carried them
        seen = spark.sparkContext.parallelize([0], 1).map(lambda _: os.environ.get("AWS_SECRET_ACCESS_KEY")).collect()
        assert seen != [secret]


def test_executor_options_forward_the_environment_and_stored_options(s3, monkeypatch) -> None:
    from tables.delta.storage.objectstore_config import build_store, parse_location
    from tables.delta.storage.opening import open_storage

    st = open_storage(f"s3://{BUCKET}/t", options={"aws_region": "eu-west-3"})
    opts = executor_options(st)
    assert opts["aws_secret_access_key"] == os.environ["AWS_SECRET_ACCESS_KEY"]
    assert opts["aws_region"] == "eu-west-3"  # the stored option wins over AWS_REGION
    # every forwarded variable set at once (spellings of one setting too): a config the store
    # accepts, with no unknown or duplicated key (either would fail every task of the job)
    for kind, names in FORWARDED_ENV.items():
        for name in names:
            flag = name.endswith(("HTTP", "EMULATOR", "STYLE_REQUEST", "SIGNATURE", "PAYER"))
            monkeypatch.setenv(name, "true" if flag else "eDEyMzQ=")  # base64, as account keys are
        monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
        location = {"s3": "s3://b/t", "az": "az://c/t", "gs": "gs://b/t"}[kind]
        stored = {"s3": {"aws_endpoint": "http://127.0.0.1:1"}, "az": {"endpoint": "http://127.0.0.1:2"}, "gs": {}}
        opts = executor_options(open_storage(location, options=stored[kind]))
        try:
            build_store(parse_location(location), opts)
        except Exception as exc:  # a GCS key that is not one: refused later, not for its name
            assert "Unknown" not in type(exc).__name__ and "Duplicate" not in str(exc), exc
            assert kind == "gs", exc


def test_a_cluster_master_refuses_the_spool_and_an_unknown_route_is_named(monkeypatch) -> None:
    monkeypatch.delenv(ROUTE_ENV, raising=False)
    assert objectstore_route("local[2]") == "spool"
    assert objectstore_route("spark://127.0.0.1:7077") == "datasource"
    monkeypatch.setenv(ROUTE_ENV, "hadoop")
    assert objectstore_route("local[*]") == "hadoop"
    monkeypatch.setenv(ROUTE_ENV, "ftp")
    with pytest.raises(StorageError, match=ROUTE_ENV):
        objectstore_route("local[*]")


# --- the hadoop route: only its configuration can be checked here (no connector jars) --------------


def test_hadoop_route_configuration_for_s3(s3, monkeypatch) -> None:
    from tables.delta.storage.opening import open_storage

    monkeypatch.setenv("AWS_SESSION_TOKEN", "tok-123456")
    st = open_storage(f"s3a://{BUCKET}/tables/t")
    conf = hadoop_options(st)
    pre = f"fs.s3a.bucket.{BUCKET}."
    assert conf[pre + "access.key"] == os.environ["AWS_ACCESS_KEY_ID"]
    assert conf[pre + "secret.key"] == os.environ["AWS_SECRET_ACCESS_KEY"]
    assert conf[pre + "session.token"] == "tok-123456"
    assert conf[pre + "aws.credentials.provider"] == "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
    assert conf[pre + "endpoint"] == s3.endpoint and conf[pre + "path.style.access"] == "true"
    assert conf[pre + "connection.ssl.enabled"] == "false" and conf[pre + "endpoint.region"] == "us-east-1"
    assert hadoop_uri(st, st.resolve("part-0 x.parquet")) == f"s3a://{BUCKET}/tables/t/part-0 x.parquet"
    shown = redacted(conf)
    assert os.environ["AWS_SECRET_ACCESS_KEY"] not in str(shown) and "tok-123456" not in str(shown)
    assert shown[pre + "access.key"] == "********"


def test_hadoop_route_configuration_for_azure_and_gcs(monkeypatch, tmp_path) -> None:
    import json

    from tables.delta.storage.opening import open_storage

    for name in list(os.environ):
        if name.startswith(("AWS_", "AZURE_", "GOOGLE_")):
            monkeypatch.delenv(name)
    st = open_storage("abfss://lake@acct.dfs.core.windows.net/t", options={"azure_storage_account_key": "a2V5a2V5"})
    assert hadoop_options(st)["fs.azure.account.key.acct.dfs.core.windows.net"] == "a2V5a2V5"
    assert hadoop_uri(st, "x/p.parquet") == "abfss://lake@acct.dfs.core.windows.net/t/x/p.parquet"
    sas = open_storage(
        "az://lake/t", options={"azure_storage_account_name": "acct", "azure_storage_sas_key": "sv=1&sig=zz"}
    )
    conf = hadoop_options(sas)
    assert conf["fs.azure.account.auth.type.acct.dfs.core.windows.net"] == "SAS"
    assert conf["fs.azure.sas.fixed.token.acct.dfs.core.windows.net"] == "sv=1&sig=zz"
    assert hadoop_uri(sas, "p.parquet") == "abfss://lake@acct.dfs.core.windows.net/t/p.parquet"
    key = {"client_email": "sa@p.iam.gserviceaccount.com", "private_key_id": "kid", "private_key": "-----BEGIN-----"}
    (tmp_path / "sa.json").write_text(json.dumps(key))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "sa.json"))
    gs = open_storage("gs://bkt/t")
    conf = hadoop_options(gs)
    assert conf["fs.gs.auth.service.account.email"] == key["client_email"]
    assert conf["fs.gs.auth.service.account.private.key"] == key["private_key"]
    assert hadoop_uri(gs, "p.parquet") == "gs://bkt/t/p.parquet"


def test_the_hadoop_route_without_connectors_is_a_named_error_without_secrets(
    spark, s3, history_table, monkeypatch
) -> None:
    _local, uri = history_table
    monkeypatch.setenv(ROUTE_ENV, "hadoop")
    with pytest.raises(StorageError, match=r"no Hadoop connector for s3a:// \(hadoop-aws\)") as info:
        read_version(spark, uri)
    assert ROUTE_ENV in str(info.value) and os.environ["AWS_SECRET_ACCESS_KEY"] not in str(info.value)


# --- Azure: an abfss:// table read in the executors ---------------------------------------------------


@pytest.fixture
def azure_table(azure_server, monkeypatch, tmp_path, request):
    """A table delta-rs wrote on disk (with change data), uploaded to Azurite with the Azure
    SDK; only the AZURE_* variables set."""
    use_store_environment(monkeypatch, azure_server.env())
    root = write_history_table(tmp_path / "local", partitioned=True)
    uri = upload_azure(azure_server, root, "sparklake", f"t/{request.node.name[:40]}")
    return root, uri


def test_an_abfss_table_through_the_datasource_equals_the_local_table(
    spark, datasource, azure_table, azure_server, tmp_path
) -> None:
    local, uri = azure_table
    assert_data_jobs_equal(spark, local, uri, azure_server.storage_options(), tmp_path)


# --- docker-compose's example table: the seeding script against a real S3 server ---------------------


def test_the_example_table_seeding_script_writes_a_table_delta_rs_and_spark_read(spark, s3, tmp_path) -> None:
    """scripts/seed_example_table.py as docker-compose's one-shot service runs it (only the
    AWS_* variables and the allowed roots set): three versions delta-rs reads, the same rows
    on Spark; a second run leaves the table alone; the compose file wires that location."""
    import subprocess
    import sys

    import yaml

    from tests.conftest import REPO

    s3.boto3().create_bucket(Bucket="deltaweb")
    uri = "s3://deltaweb/examples/sales"
    env = {**os.environ, storage_module.ROOTS_ENV: "/data,s3://deltaweb/examples", "PYTHONPATH": str(REPO)}
    script = [sys.executable, "scripts/seed_example_table.py", uri]
    first = subprocess.run(script, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "versions 0..2" in first.stdout
    dt = DeltaTable(uri, storage_options=s3.storage_options())
    assert dt.version() == 2 and [h["operation"] for h in dt.history()] == ["DELETE", "WRITE", "CREATE TABLE AS SELECT"]
    theirs = dt.to_pyarrow_table()
    assert theirs.num_rows == 90 - sum(1 for i in range(40) if round(10 + (i * 7.3) % 90, 2) < 20)
    assert multiset(read_version(spark, uri).toArrow()) == multiset(theirs)
    again = subprocess.run(script, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "left alone" in again.stdout
    assert DeltaTable(uri, storage_options=s3.storage_options()).version() == 2
    # outside the allowed roots: refused, one line, nothing written
    bad = subprocess.run([*script[:2], "s3://deltaweb/elsewhere/t"], cwd=REPO, env=env, capture_output=True, text=True)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr and "outside the allowed" in bad.stderr
    assert "Contents" not in s3.boto3().list_objects_v2(Bucket="deltaweb", Prefix="elsewhere/")

    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    seed = compose["services"]["seed"]
    assert seed["command"].split()[-2:] == ["scripts/seed_example_table.py", uri]
    roots = compose["x-app"]["environment"]["DELTAWEB_ALLOWED_ROOTS"].split(",")
    assert "s3://deltaweb/examples" in roots and "minio" in compose["services"]
    assert compose["x-app"]["environment"]["AWS_ENDPOINT_URL"] == "http://minio:9000"


@pytest.mark.parametrize("hostile", ["../escaped/part-0.parquet", f"s3://{BUCKET}-other/part-0.parquet"])
def test_datasource_refuses_a_log_path_outside_the_location_before_any_task(
    spark, s3, datasource, history_table, hostile
) -> None:
    """A path the log names outside the allowed locations (climbing out with '..', another
    bucket) is refused on the driver: no executor is handed it."""
    from tables.delta.errors import PathOutsideRootsError
    from tables.delta.write.commit import commit

    _local, uri = history_table
    add = {"path": hostile, "partitionValues": {}, "size": 10, "modificationTime": 0, "dataChange": True}
    commit(uri, [{"add": add}], "WRITE", {"mode": "Append"})
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup())
    with pytest.raises(PathOutsideRootsError):
        read_version(spark, uri)
    assert set(tracker.getJobIdsForGroup()) == before  # nothing ran
