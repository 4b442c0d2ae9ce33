"""Project-level promises: the core stays free of Django and Spark; the deployment file is valid."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO


def test_core_imports_neither_django_nor_spark() -> None:
    """Every module of the tables.delta package, found by walking it, not from a list to keep up."""
    code = (
        "import importlib, pkgutil, sys, tables.delta as pkg\n"
        "names = sorted(m.name for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'))\n"
        "for name in names: importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'pyspark', 'py4j', 'celery'))\n"
        "print(','.join(names)); print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    walked, bad = out.stdout.splitlines()
    # the walk found the package's modules (a broken walk must not pass by checking nothing)
    assert {"tables.delta.cli", "tables.delta.snapshot.state", "tables.delta.storage.boundary"} <= set(
        walked.split(",")
    )
    assert bad == "", f"the core imported {bad}"


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="Debian's docker-compose is not installed")
def test_docker_compose_file_is_valid() -> None:
    out = subprocess.run(["docker-compose", "config", "-q"], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
