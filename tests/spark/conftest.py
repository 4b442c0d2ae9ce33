"""One Spark session for the whole test run, started once, stopped at the end: an in-process
session (SPARK_MASTER, else local), or, with DELTAWEB_TEST_SPARK_CONNECT=1 (`make test`'s
Connect pass), a Spark Connect client of a server the `spark_connect_server` fixture starts
with scripts/spark_connect.sh, with a token (`connect_token`) it refuses clients without.

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


def connect_token() -> str:
    """The test server's token: var/spark-connect-test/token (mode 0600), made by the first
    process that asks and read by the others (two test processes share one server)."""
    import secrets

    path = CONNECT_DIR / "token"
    if not path.exists():
        CONNECT_DIR.mkdir(parents=True, exist_ok=True)
        fresh = CONNECT_DIR / f".token-{os.getpid()}"
        fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32))
        try:
            os.link(fresh, path)  # the first one wins, whole
        except FileExistsError:
            pass
        finally:
            fresh.unlink()
    return path.read_text().strip()


def connect_script(command: str, timeout: float = 60) -> subprocess.CompletedProcess:
    from tables.spark.engine.connect import TOKEN_ENV

    env = {**os.environ, "SPARK_CONNECT_PORT": CONNECT_PORT, "SPARK_CONNECT_DIR": str(CONNECT_DIR)}
    env[TOKEN_ENV] = connect_token()
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
    """The sc:// URL of a Spark Connect server (scripts/spark_connect.sh), started once, with
    the test token (`connect_token`), which this process's clients then send
    (DELTAWEB_SPARK_CONNECT_TOKEN, also for the processes it starts). Two test processes share
    it (the script starts one at a time); it is stopped at the end by the process that started
    it, unless xdist runs several (then `make test` stops it)."""
    from tables.spark.engine.connect import TOKEN_ENV

    _needs_spark()
    pytest.importorskip("grpc", reason="the Spark Connect client's packages (grpcio) are not installed")
    running = connect_script("status")
    started = connect_script("start", timeout=CONNECT_START_SECONDS + 30)
    if started.returncode != 0:
        pytest.fail(f"the Spark Connect server did not start: {started.stderr[-2000:]}")
    os.environ[TOKEN_ENV] = connect_token()
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


@pytest.fixture(params=["on the driver", "in two passes", "by pyarrow"])
def diff_route(request, monkeypatch):
    """Each keyed-diff test runs every way a diff is made: small versions in one job whose rows
    the driver writes, the two passes larger ones take (forced here on the same tables), and
    pyarrow's route for larger local versions of flat columns (taken where it answers as Spark
    would: the others fall back to the two passes). The driver's route must have been taken
    where it was asked for."""
    from tables.spark.jobs import rowdiff, rowdiff_arrow

    taken = []
    on_driver = rowdiff._diff_on_driver

    def recorded(*args, **kwargs):
        taken.append(True)
        return on_driver(*args, **kwargs)

    monkeypatch.setattr(rowdiff, "_diff_on_driver", recorded)
    if request.param != "on the driver":
        monkeypatch.setattr(rowdiff, "DRIVER_BYTES", -1)
    if request.param == "in two passes":
        monkeypatch.setattr(rowdiff_arrow, "ARROW_BYTES", -1)
    yield request.param
    assert bool(taken) == (request.param == "on the driver")
