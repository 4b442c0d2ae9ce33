"""One Spark session for the whole test run, started once, stopped at the end: an in-process
session (SPARK_MASTER, else local), or, with DELTAWEB_TEST_SPARK_CONNECT=1 (`make test`'s
Connect pass), a Spark Connect client of a server the `spark_connect_server` fixture starts
with scripts/spark_connect.sh.

Skipped, with the reason, where there is no Java or no PySpark: the core and web suites do
not need either.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONNECT_ENV = "DELTAWEB_TEST_SPARK_CONNECT"
# the test server's own port and directory (apart from `make run`'s, 15002 and var/spark-connect)
CONNECT_PORT = os.environ.get("DELTAWEB_TEST_SPARK_CONNECT_PORT", "15102")
CONNECT_DIR = REPO / "var" / "spark-connect-test"
CONNECT_START_SECONDS = 300  # a cold JVM on a busy 2-core machine


def java_executable() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def _needs_spark() -> None:
    if java_executable() is None:
        pytest.skip("Java is not installed (PySpark needs a JVM; set JAVA_HOME or put java on PATH)")
    pytest.importorskip("pyspark", reason="PySpark is not installed")


def connect_script(command: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "SPARK_CONNECT_PORT": CONNECT_PORT, "SPARK_CONNECT_DIR": str(CONNECT_DIR)}
    env["SPARK_CONNECT_START_TIMEOUT"] = str(CONNECT_START_SECONDS)
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "spark_connect.sh"), command],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="session")
def spark_connect_server():
    """The sc:// URL of a Spark Connect server (scripts/spark_connect.sh), started once. Two
    test processes share it (the script starts one at a time); it is stopped at the end by
    the process that started it, unless xdist runs several (then `make test` stops it)."""
    _needs_spark()
    pytest.importorskip("grpc", reason="the Spark Connect client's packages (grpcio) are not installed")
    running = connect_script("status")
    started = connect_script("start", timeout=CONNECT_START_SECONDS + 30)
    if started.returncode != 0:
        pytest.fail(f"the Spark Connect server did not start: {started.stderr[-2000:]}")
    yield started.stdout.strip().splitlines()[-1]
    if running.returncode != 0 and not os.environ.get("PYTEST_XDIST_WORKER"):
        connect_script("stop")


def connect_mode() -> bool:
    return os.environ.get(CONNECT_ENV, "") in ("1", "true", "yes")


@pytest.fixture(scope="session")
def spark(request):
    _needs_spark()
    from tables.spark.session import get_spark, stop_spark

    if connect_mode():
        session = get_spark(remote=request.getfixturevalue("spark_connect_server"))
    else:
        session = get_spark()  # SPARK_MASTER or local[*], as the app would
    yield session
    stop_spark()
