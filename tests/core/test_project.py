"""Project-level promises: the core stays free of Django and Spark; the deployment file is valid."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO


def test_core_imports_neither_django_nor_spark() -> None:
    code = (
        "import sys, tables.delta.snapshot, tables.delta.timestamps, tables.delta.history, "
        "tables.delta.commit, tables.delta.report, tables.delta.checkpoint, tables.delta.owner, "
        "tables.delta.fs_owner, tables.delta.managed\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'pyspark', 'py4j', 'celery'))\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="Debian's docker-compose is not installed")
def test_docker_compose_file_is_valid() -> None:
    out = subprocess.run(["docker-compose", "config", "-q"], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
