"""How a shared local file is served to the connectors. A HEAD answers the size and that ranges
are accepted, with no body. A range, like the whole file, is answered with the open file itself
positioned at the range's start and its exact length, so that gunicorn sends it with sendfile
(pyarrow over fsspec, the official connector's parquet format, reads each file as a footer and a
few ranges of tens of MB); a server without sendfile reads it and stops at the range's end.
Under gunicorn as a deployment runs it, the official connector reads a whole version equal to
delta-rs: in the delta format with one whole-file GET per file (no HEAD, no range), in the
parquet format with every range sent by sendfile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from django.test import Client, RequestFactory
from django.urls import resolve

from tests.conftest import REPO, database_url, free_port, stop_process, wait_until_answering

from ..sharing_site import assert_same_rows, register, share_tables

delta_sharing = pytest.importorskip("delta_sharing")
deltalake = pytest.importorskip("deltalake")
pytest.importorskip("gunicorn")

ACCESS = "%(m)s %(s)s %(B)s %({content-length}o)s %(U)s %({range}i)s"


def write(path: Path, files: int, rows: int) -> Path:
    """`files` appends of random numbers (incompressible: each file about 16 bytes a row)."""
    rng = np.random.default_rng(58)
    for i in range(files):
        data = pa.table({"id": np.arange(i * rows, (i + 1) * rows), "x": rng.random(rows)})
        deltalake.write_deltalake(str(path), data, mode="append")
    return path


def file_urls(site, name: str) -> list[str]:
    response = Client().post(
        f"/delta-sharing/shares/s1/schemas/default/tables/{name}/query",
        {},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {site.token}",
    )
    assert response.status_code == 200, response.content
    found = [json.loads(x) for x in response.content.decode().splitlines()]
    return [x["file"]["url"].replace("http://testserver", "") for x in found if "file" in x]


@pytest.mark.django_db
def test_head_and_ranges_are_answered_with_the_file_itself(roots, settings) -> None:
    settings.DELTAWEB_SHARING_KEY_DIR = str(roots / "keys")
    table = write(roots / "t", 1, 20_000)
    site = share_tables("http://testserver", roots, {"t": {"table": register("t", table)}})
    url = file_urls(site, "t")[0]
    data = next(table.glob("*.parquet")).read_bytes()
    size = len(data)

    head = Client().head(url)
    assert head.status_code == 200 and head.content == b""
    assert head["Content-Length"] == str(size) and head["Accept-Ranges"] == "bytes"

    # (Range header, first byte, bytes): the magic number, a middle piece, the footer's last
    # 8 bytes (length and magic), everything from a point, and the whole file
    for asked, start, n in (
        ("bytes=0-3", 0, 4),
        ("bytes=1000-70999", 1000, 70_000),
        ("bytes=-8", size - 8, 8),
        (f"bytes={size - 5000}-", size - 5000, 5000),
        (None, 0, size),
    ):
        headers = {"HTTP_RANGE": asked} if asked else {}
        # the view's own answer, as the WSGI server gets it (the test client replaces a file
        # response's content by an iterator)
        response = resolve(url.split("?")[0]).func(
            RequestFactory().get(url, **headers), **resolve(url.split("?")[0]).kwargs
        )
        assert response.status_code == (206 if asked else 200), asked
        assert response["Content-Length"] == str(n)
        if asked:
            assert response["Content-Range"] == f"bytes {start}-{start + n - 1}/{size}"
        # what gunicorn's sendfile sends: Content-Length bytes from the file's position
        sent = getattr(response, "file_to_stream", None)
        assert sent is not None, f"{asked}: not a file a server can send with sendfile"
        fd = sent.fileno()
        assert os.lseek(fd, 0, os.SEEK_CUR) == start
        assert os.pread(fd, n, start) == data[start : start + n]
        # what any other server sends: the file read in blocks, stopping at the range's end
        assert b"".join(response.streaming_content) == data[start : start + n]
        sent.close()  # (not response.close(): its signal would close the test's database connection)


def served(log: Path, since: int) -> list[tuple[str, str, int, int, str]]:
    """(method, status, bytes gunicorn wrote itself, Content-Length, Range) per request for a
    file."""
    with open(log) as fh:
        fh.seek(since)
        rows = [line.split(" ", 5) for line in fh.read().splitlines()]
    return [(m, s, int(b), int(n) if n.isdigit() else 0, r) for m, s, b, n, u, r in rows if "/files/" in u]


@pytest.mark.django_db(transaction=True)
def test_gunicorn_serves_a_whole_version_in_whole_files_and_ranges_by_sendfile(roots, tmp_path) -> None:
    table = write(roots / "t", 3, 150_000)
    files = len(deltalake.DeltaTable(str(table)).file_uris())
    log = tmp_path / "access.log"
    log.write_text("")
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DELTAWEB_ALLOWED_ROOTS": str(roots),
        "DELTAWEB_SHARING_URL_KEY": "test-file-url-key-" + "k" * 32,
        "DELTAWEB_ALERTS": "0",
        "SPARK_START_WITH_WORKER": "0",
    }
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "deltaweb.wsgi", "-b", f"127.0.0.1:{port}", "-w", "1",
         "--threads", "4", "--access-logfile", str(log), "--access-logformat", ACCESS],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=open(tmp_path / "gunicorn.log", "wb"),
        start_new_session=True,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_answering(f"{base}/healthz", proc, "gunicorn", 120)
        site = share_tables(base, tmp_path, {"t": {"table": register("t", table)}})
        want = deltalake.DeltaTable(str(table)).to_pandas()

        since = log.stat().st_size
        assert_same_rows(delta_sharing.load_as_pandas(site.url("t"), use_delta_format=True), want)
        # the Delta kernel: each file once, whole
        assert [(m, s, r) for m, s, _, _, r in wait_for_log(log, since, files)] == [("GET", "200", "-")] * files

        since = log.stat().st_size
        assert_same_rows(delta_sharing.load_as_pandas(site.url("t"), use_delta_format=False), want)
        ranges = [r for r in wait_for_log(log, since, files) if r[1] == "206"]
        assert ranges and all(r[0] == "GET" and r[4].startswith("bytes=") and r[3] > 0 for r in ranges)
        # gunicorn counts only the bytes it writes itself: a range sent by sendfile counts none
        assert [r[2] for r in ranges] == [0] * len(ranges)
    finally:
        stop_process(proc)


def wait_for_log(log: Path, since: int, at_least: int) -> list[tuple[str, str, int, int, str]]:
    """The requests logged after `since`, once at least `at_least` are (gunicorn writes a
    request's line after its last byte is sent)."""
    import time

    deadline = time.monotonic() + 30
    while True:
        found = served(log, since)
        if len(found) >= at_least or time.monotonic() > deadline:
            time.sleep(0.5)
            return served(log, since)
        time.sleep(0.1)
