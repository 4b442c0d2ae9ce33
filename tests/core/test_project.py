"""Project-level promises: the core stays free of Django and Spark; the deployment file is valid."""

from __future__ import annotations

import os
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
    assert {"tables.delta.cli", "tables.delta.snapshot.state", "tables.delta.storage.local"} <= set(walked.split(","))
    assert bad == "", f"the core imported {bad}"


SECRETS = {
    "DELTAWEB_SECRET_KEY": "s" * 50,
    "POSTGRES_PASSWORD": "p",
    "MINIO_ROOT_USER": "u",
    "MINIO_ROOT_PASSWORD": "m" * 8,
    "DELTAWEB_SPARK_CONNECT_TOKEN": "t" * 32,
    "SPARK_AUTH_SECRET": "a" * 32,
}


def _compose(env: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in SECRETS}
    return subprocess.run(["docker-compose", "config"], cwd=REPO, capture_output=True, text=True, env={**clean, **env})


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="Debian's docker-compose is not installed")
def test_docker_compose_file_is_valid_and_safe() -> None:
    import yaml

    out = _compose(SECRETS)
    assert out.returncode == 0, out.stderr
    services = yaml.safe_load(out.stdout)["services"]
    # only the web port is published; Spark and MinIO stay on the internal network
    assert {name for name, svc in services.items() if svc.get("ports")} == {"web"}
    for name in ("web", "redis", "postgres", "minio"):
        assert services[name].get("healthcheck"), name
    # every service of the app's image has a check of its own (the image's asks the web port),
    # the one-shot seed none; push can be switched on (the queue reaches the events service)
    for name in ("worker", "beat", "events", "spark-master", "spark-worker", "spark-connect"):
        test = " ".join(services[name]["healthcheck"]["test"])
        assert "8000" not in test and "healthz" not in test, name
    assert services["seed"]["healthcheck"] in ({"disable": True}, {"test": ["NONE"]})
    assert "DELTAWEB_SQS_QUEUE_URL" in services["events"]["environment"]
    assert services["seed"]["depends_on"]["minio-setup"]["condition"] == "service_completed_successfully"
    assert services["worker"]["depends_on"]["spark-connect"]["condition"] == "service_healthy"
    for name in ("web", "worker", "beat"):
        assert services[name]["restart"] == "unless-stopped"
        needs = services[name]["depends_on"]
        assert all(needs[s]["condition"] == "service_healthy" for s in ("postgres", "redis")), name
    # secrets have no defaults: without them the file is refused, naming them
    for missing in SECRETS:
        refused = _compose({k: v for k, v in SECRETS.items() if k != missing})
        assert refused.returncode != 0 and missing in refused.stderr


def _copied_by_dockerfile() -> set[str]:
    lines = (REPO / "Dockerfile").read_text().splitlines()
    return {line.split()[1].rstrip("/") for line in lines if line.startswith("COPY ")}


def test_the_image_runs_as_a_user_and_takes_its_base_as_an_argument() -> None:
    lines = [line.strip() for line in (REPO / "Dockerfile").read_text().splitlines()]
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    assert "ARG BASE_IMAGE=python:3.11-slim-bookworm" in lines and "FROM ${BASE_IMAGE}" in lines


def test_the_image_copies_every_app_and_path_the_app_needs() -> None:
    from deltaweb import settings  # the settings module itself: no Django set-up needed

    copied = _copied_by_dockerfile()
    ours = {app.split(".")[0] for app in settings.INSTALLED_APPS if (REPO / app.split(".")[0]).is_dir()}
    assert ours and ours <= copied, f"INSTALLED_APPS not copied: {ours - copied}"
    needed = {"pyproject.toml", "manage.py", "deltaweb", "templates", "static"}
    assert needed <= copied, needed - copied
    assert (REPO / "deltaweb" / "wsgi.py").exists() and "deltaweb.wsgi" in (REPO / "Dockerfile").read_text()


def test_a_wheel_built_from_the_repository_holds_every_package_and_file(tmp_path) -> None:
    import zipfile

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    (wheel,) = tmp_path.glob("deltaweb-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for package in ("deltaweb", "tables", "alerts", "credentials"):
        assert f"{package}/__init__.py" in names, package
        assert any(n.startswith(f"{package}/") and "/migrations/0001" in n for n in names) or package == "deltaweb"
    for data in (
        "tables/api/catalog/openapi.yaml",
        "tables/templates/tables/_history_rows.html",
        "tables/templates/admin/tables/restorerequest/change_form.html",
        "alerts/templates/alerts/activity.html",
        "alerts/static/alerts/live.js",
    ):
        assert data in names, data
    sources = {str(p.relative_to(REPO)) for p in (REPO / "tables").rglob("*.py") if "__pycache__" not in p.parts}
    assert sources <= names, sorted(sources - names)[:5]
