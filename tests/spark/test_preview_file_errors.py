"""A preview that meets a data file it cannot read says which version, which file (relative to
the table) and what to do, in the job's error and on the version page: a file that is not
Parquet, one cut short, one gone. Tables written by delta-rs, damaged by hand."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

from tables.spark.jobs.file_errors import DataFileError, MissingDataFileError  # noqa: E402
from tables.spark.jobs.preview import write_preview  # noqa: E402

FIX = "Restore it from a backup or restore the table to a version that does not use it."


def write_table(root: Path, partitioned: bool = False) -> str:
    """Three appends of five rows; the relative path of a data file version 2 reads."""
    for i in range(3):
        data = pa.table({"id": pa.array(range(i * 5, i * 5 + 5), pa.int64()), "part": [f"p{i}"] * 5})
        write_deltalake(str(root), data, mode="append", partition_by=["part"] if partitioned else None)
    uris = sorted(DeltaTable(str(root)).file_uris())
    return os.path.relpath(uris[1].removeprefix("file://"), root)


def test_a_file_that_is_not_parquet_is_named_with_its_version(spark, tmp_path) -> None:
    root = tmp_path / "t"
    name = write_table(root, partitioned=True)
    assert name.startswith("part=p1/")  # relative to the table, directories and all
    (root / name).write_bytes(b"not parquet at all " * 20)
    with pytest.raises(DataFileError) as caught:
        write_preview(spark, str(root), 2, tmp_path / "out")
    assert str(caught.value) == (
        f"Version 2 cannot be previewed: data file {name} is not a valid Parquet file (magic bytes not found). {FIX}"
    )
    assert caught.value.code == "data_file_unreadable" and str(tmp_path) not in str(caught.value)
    # a version that does not use the file is read as ever
    assert write_preview(spark, str(root), 0, tmp_path / "v0")["total"] == 5


def test_a_file_cut_short_and_a_file_gone_are_named(spark, tmp_path) -> None:
    root = tmp_path / "cut"
    name = write_table(root)
    whole = (root / name).read_bytes()
    (root / name).write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DataFileError, match=r"^Version 2 cannot be previewed: data file ") as caught:
        write_preview(spark, str(root), 2, tmp_path / "out")
    assert f"data file {name} is truncated (it begins as Parquet but its footer is missing). {FIX}" in str(caught.value)

    (root / name).unlink()
    with pytest.raises(MissingDataFileError) as gone:
        write_preview(spark, str(root), 2, tmp_path / "out")
    assert str(gone.value) == (
        f"Version 2 cannot be previewed: data file {name} is missing (FileNotFound: removed by VACUUM or by hand?). "
        f"{FIX}"
    )


@pytest.mark.django_db
def test_the_preview_job_and_its_page_say_which_file_and_version(
    spark, tmp_path, settings, client, django_capture_on_commit_callbacks
) -> None:
    from django.contrib.auth.models import User

    from deltaweb.celery import app
    from tables.delta.storage import api as storage_api
    from tables.models import Job, JobStatus
    from tables.services.catalog import registration

    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    storage_api.set_roots_provider(lambda: settings.DELTAWEB_ALLOWED_ROOTS)  # the web app's (the fixture puts it back)
    settings.DELTAWEB_RESULTS_DIR = str(tmp_path / "results")
    root = tmp_path / "events"
    name = write_table(root)
    (root / name).write_bytes(b"garbage")
    table = registration.register_table("events", str(root))
    client.force_login(User.objects.create_user("viewer", password="pw-viewer-1"))
    old = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):  # the job runs when its row commits
            r = client.post(f"/t/{table.slug}/v/2/preview/")
    finally:
        app.conf.task_always_eager = old
    job = Job.objects.get(kind="preview")
    assert job.status == JobStatus.FAILED
    expected = (
        f"Version 2 cannot be previewed: data file {name} is not a valid Parquet file (magic bytes not found). {FIX}"
    )
    assert job.error == expected and job.result["errorCode"] == "data_file_unreadable"
    html = client.get(r["Location"]).content.decode()
    assert expected in html
    # the badge says it failed; the stage does not say it again, nor a count how far it got
    assert 'data-field="stage"></span>' in html and 'data-field="count"></span>' in html
    status = client.get(f"/jobs/{job.pk}.json").json()
    assert status["error"] == expected
    # the reader's own words (pyarrow's, reading the footer) are kept for staff, never shown to users
    detail = job.result["errorDetail"]
    assert detail.startswith("ArrowInvalid: ") and "Parquet" in detail and detail not in html
    assert "errorDetail" not in client.get(f"/api/jobs/{job.pk}/").json()["result"]
    client.force_login(User.objects.create_user("boss", password="pw-boss-1", is_staff=True))
    assert client.get(f"/api/jobs/{job.pk}/").json()["result"]["errorDetail"] == detail


def test_a_spark_failure_names_the_file_spark_names(settings) -> None:
    """Other jobs' Spark failures (change data, row diffs) name the file in the Java exception,
    which the job's stored error shows by the table's name, and the fix."""
    from types import SimpleNamespace

    from tables.services.errors import public_message, spark_failure

    class Py4JJavaError(Exception):  # what py4j raises: the Java exception's text
        pass

    text = (
        "An error occurred while calling o812.collectToPython.\n: org.apache.spark.SparkException: Job aborted "
        "due to stage failure: ... Caused by: java.lang.RuntimeException: file:/srv/tables/events/part=p1/"
        "part-0001.parquet is not a Parquet file. Expected magic number at tail, but found [1, 2, 3, 4]"
    )
    settings.DELTAWEB_ALLOWED_ROOTS = ["/srv/tables"]
    code, message, detail = spark_failure(Py4JJavaError(text))
    assert code == "spark_unreadable_parquet" and "o812" in detail and "o812" not in message
    table = SimpleNamespace(name="events", location="/srv/tables/events")
    assert public_message(message, table) == (
        f"a data file of the table is not readable Parquet: events/part=p1/part-0001.parquet. {FIX}"
    )
    # a file outside the allowed roots (an object-store table's spooled copy) is not named
    spooled = text.replace("/srv/tables/events/part=p1/part-0001", "/tmp/deltaweb-spool/ab12/cd34")
    assert spark_failure(Py4JJavaError(spooled))[1] == "a data file of the table is not readable Parquet"


@pytest.mark.django_db
def test_a_spark_failure_on_a_data_file_keeps_sparks_words_for_staff(tmp_path, settings, client) -> None:
    """Spark's executors meet a data file that is gone: the job's error names the file in
    words, and the Java exception Spark raised is the detail staff read (an injected failure:
    the exception as py4j raises it, through the preview's own mapping)."""
    from django.contrib.auth.models import User

    from tables.delta.storage import api as storage_api
    from tables.delta.storage.opening import as_storage
    from tables.models import Job, JobKind, JobStatus
    from tables.services.catalog import registration
    from tables.services.data import jobs as data_jobs
    from tables.spark.jobs import file_errors

    class Py4JJavaError(Exception):  # what py4j raises: the Java exception's text
        pass

    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    storage_api.set_roots_provider(lambda: settings.DELTAWEB_ALLOWED_ROOTS)  # the web app's (the fixture puts it back)
    settings.DELTAWEB_RESULTS_DIR = str(tmp_path / "results")
    root = tmp_path / "events"
    name = write_table(root)
    table = registration.register_table("events", str(root))
    java = (
        "An error occurred while calling o812.collectToPython.\n: org.apache.spark.SparkException: Job aborted due to "
        f"stage failure: java.io.FileNotFoundException: File file:{root / name} does not exist\n"
        "\tat org.apache.hadoop.fs.RawLocalFileSystem.deprecatedGetFileStatus(RawLocalFileSystem.java:779)"
    )

    def compute(location, params, out_dir, progress):
        with file_errors.files_named(as_storage(location), params["version"], "previewed"):
            raise Py4JJavaError(java)

    job = Job.objects.create(kind=JobKind.PREVIEW, table=table, params={"version": 2})
    data_jobs.run_job(job.pk, compute)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.result["errorCode"] == "data_file_missing"
    assert job.error == (
        f"Version 2 cannot be previewed: data file {name} is missing (FileNotFound: removed by VACUUM or by hand?). "
        f"{FIX}"
    )
    detail = job.result["errorDetail"]
    assert detail.startswith("Py4JJavaError: ") and "o812" in detail and "RawLocalFileSystem" in detail
    client.force_login(User.objects.create_user("viewer", password="pw-viewer-1"))
    assert "errorDetail" not in client.get(f"/api/jobs/{job.pk}/").json()["result"]
    client.force_login(User.objects.create_user("boss", password="pw-boss-1", is_staff=True))
    assert client.get(f"/api/jobs/{job.pk}/").json()["result"]["errorDetail"] == detail


def test_py4j_call_names_are_never_taken_for_the_data_file(tmp_path, settings) -> None:
    """py4j begins every Java failure with the call it made ("An error occurred while calling
    o2546.parquet."): the job's message names the file Spark names later in the text, relative
    to the table, or no file at all, never "o2546.parquet" (texts as py4j formats them)."""
    from types import SimpleNamespace

    from tables.delta.storage import api as storage_api
    from tables.delta.storage.opening import as_storage
    from tables.services.errors import public_message, spark_failure
    from tables.spark.jobs import file_errors

    class Py4JJavaError(Exception):  # what py4j raises: the Java exception's text
        pass

    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    storage_api.set_roots_provider(lambda: settings.DELTAWEB_ALLOWED_ROOTS)  # the fixture puts it back
    root = tmp_path / "events"
    name = write_table(root, partitioned=True)
    (root / name).unlink()
    gone = f"java.io.FileNotFoundException: File file:{root / name} does not exist"
    texts = [
        f"An error occurred while calling o2546.parquet.\n: {gone}\n\tat org.apache.hadoop.fs.RawLocalFileSystem",
        "An error occurred while calling o812.collectToPython.\n: org.apache.spark.SparkException: Job aborted "
        f"due to stage failure: [FAILED_READ_FILE.NO_HINT] Error while reading file file:{root / name}. "
        f"SQLSTATE: KD001\nCaused by: {gone}",
    ]
    storage = as_storage(str(root))
    table = SimpleNamespace(name="events", location=str(root))
    for text in texts:
        mapped = file_errors.named(Py4JJavaError(text), storage, 2, "previewed")
        assert str(mapped) == (
            f"Version 2 cannot be previewed: data file {name} is missing (FileNotFound: removed by VACUUM or by "
            f"hand?). {FIX}"
        )
        code, message, _ = spark_failure(Py4JJavaError(text))
        assert code == "spark_missing_file" and public_message(message, table) == (
            f"a data file of the table is missing (removed by VACUUM or by hand?): events/{name}. {FIX}"
        )
    # no file in the text: the failure is told without naming one
    bare = "An error occurred while calling o2546.parquet.\n: java.io.FileNotFoundException: no such data file"
    assert str(file_errors.named(Py4JJavaError(bare), storage, 2, "previewed")) == (
        f"Version 2 cannot be previewed: a data file is missing (FileNotFound: removed by VACUUM or by hand?). {FIX}"
    )
    assert (
        spark_failure(Py4JJavaError(bare))[1] == "a data file of the table is missing (removed by VACUUM or by hand?)"
    )
