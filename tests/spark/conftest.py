"""One Spark session for the whole test run (local, started once, stopped at the end).

Skipped, with the reason, where there is no Java or no PySpark: the core and web suites do
not need either.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest


def java_executable() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


@pytest.fixture(scope="session")
def spark():
    if java_executable() is None:
        pytest.skip("Java is not installed (PySpark needs a JVM; set JAVA_HOME or put java on PATH)")
    pytest.importorskip("pyspark", reason="PySpark is not installed")
    from tables.spark.session import get_spark, stop_spark

    session = get_spark()  # SPARK_MASTER or local[*], as the app would
    yield session
    stop_spark()
