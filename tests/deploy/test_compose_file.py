"""docker-compose.yml as any runtime reads it, without starting it: every healthcheck a command
that survives podman 4.3's joining and splitting of a CMD array on spaces, and every container's
open-file and process limits set, at or below this machine's hard limits (a runtime cannot
raise them: podman refused every container with "error setting rlimits" when none were set).
The stack itself runs these checks inside the containers (tests/deploy/test_stack.py)."""

from __future__ import annotations

import os
import resource
import shutil
import socket
import subprocess
import sys
import time

import pytest
import yaml

from tests.conftest import REPO
from tests.deploy.stack import StackError, _health_flags, load

FILES = [REPO / "docker-compose.yml", REPO / "deploy" / "compose.stand-ins.yml"]
ENV = {
    k: "x"
    for k in (
        "POSTGRES_PASSWORD",
        "DELTAWEB_SECRET_KEY",
        "MINIO_ROOT_USER",
        "MINIO_ROOT_PASSWORD",
        "DELTAWEB_SPARK_CONNECT_TOKEN",
        "SPARK_AUTH_SECRET",
    )
}


def podman_compat(test: list[str]) -> list[str]:
    """What podman 4.3's Docker API (docker-compose's way in) makes of a healthcheck's test: the
    words joined with spaces, then for CMD split on whitespace again, for CMD-SHELL in two."""
    joined = " ".join(test)
    return joined.split() if test[0] == "CMD" else joined.split(" ", 1)


@pytest.mark.parametrize("files", [FILES[:1], FILES], ids=["as-published", "with-stand-ins"])
def test_every_healthcheck_is_run_as_written_by_podman(files) -> None:
    services = load(files, ENV)["services"]
    checked = []
    for name, spec in services.items():
        check = spec.get("healthcheck")
        if not check or check.get("disable"):
            continue
        test = [str(t) for t in check["test"]]
        assert test[0] in ("CMD", "CMD-SHELL"), f"{name}: {test}"
        assert podman_compat(test) == test, f"{name}'s healthcheck is split into other words by podman: {test}"
        assert _health_flags(check)[:2] == ["--health-cmd", " ".join(test)]
        checked.append(name)
    assert {"web", "worker", "beat", "events", "redis", "postgres", "minio", "spark-master"} <= set(checked)
    assert {"spark-connect", "spark-worker"} <= set(checked)


def test_a_healthcheck_with_a_spaced_argument_is_refused_by_the_runner() -> None:
    with pytest.raises(StackError, match="has a space"):
        _health_flags({"test": ["CMD", "python", "-c", "import socket; socket.create_connection(('x', 1))"]})


def test_every_service_declares_limits_within_the_machines_hard_limits() -> None:
    hard = {
        "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[1],
        "nproc": resource.getrlimit(resource.RLIMIT_NPROC)[1],
    }
    for files in (FILES[:1], FILES):
        for name, spec in load(files, ENV)["services"].items():
            limits = spec.get("ulimits") or {}
            assert set(limits) >= {"nofile", "nproc"}, f"{name} sets no ulimits: {limits}"
            for kind, value in limits.items():
                soft, high = (value["soft"], value["hard"]) if isinstance(value, dict) else (value, value)
                assert 1024 <= soft <= high, (name, kind, value)
                if hard[kind] != resource.RLIM_INFINITY:
                    assert high <= hard[kind], f"{name}: {kind} {high} above this machine's hard limit {hard[kind]}"


def test_the_files_ulimits_are_what_docker_compose_reads() -> None:
    """docker-compose itself (the runner docs/operations.md names) reads the same limits."""
    if shutil.which("docker-compose") is None:
        pytest.skip("docker-compose is not installed")
    shown = subprocess.run(
        ["docker-compose", *(a for f in FILES for a in ("-f", str(f))), "config"],
        capture_output=True,
        text=True,
        env={**ENV, "PATH": "/usr/bin:/bin"},
        cwd=REPO,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    services = yaml.safe_load(shown.stdout)["services"]
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    assert all(s["ulimits"]["nofile"]["hard"] <= hard for s in services.values())
    assert services["spark-master"]["healthcheck"]["test"][:4] == [
        "CMD",
        "deltaweb-healthcheck",
        "tcp",
        "spark-master:7077",
    ]


def test_the_checks_answer_for_a_live_and_a_dead_port(tmp_path) -> None:
    """deploy/healthcheck.py's tcp and fresh checks, as a container runs them: 0 healthy, 1 not."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    live = f"127.0.0.1:{listener.getsockname()[1]}"
    heartbeat = tmp_path / "beat"
    heartbeat.touch()

    def check(*args: str) -> int:
        return subprocess.run(
            [sys.executable, str(REPO / "deploy" / "healthcheck.py"), *args], cwd=REPO, timeout=60
        ).returncode

    assert check("tcp", live) == 0
    listener.close()
    assert check("tcp", live) == 1
    assert check("fresh", str(heartbeat), "120") == 0
    old = time.time() - 600
    os.utime(heartbeat, (old, old))
    assert check("fresh", str(heartbeat), "120") == 1
    assert check("nonsense") == 2
