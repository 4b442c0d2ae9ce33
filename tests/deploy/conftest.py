"""The deployment's tests share the machine's podman: one image build at a time (the two
modules may run in two processes; the second finds every layer cached)."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.conftest import REPO


@contextmanager
def podman_builds() -> Iterator[None]:
    """Hold the machine's build lock (var/podman-build.lock) while building."""
    (REPO / "var").mkdir(exist_ok=True)
    with open(REPO / "var" / "podman-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def build_image(tag: str, dockerfile: str = "Dockerfile") -> str:
    """scripts/image.sh under the lock; the tag built."""
    if shutil.which("podman") is None or shutil.which("mmdebstrap") is None:
        pytest.skip("Debian's podman and mmdebstrap are not installed")
    with podman_builds():
        built = subprocess.run(
            ["bash", "scripts/image.sh", tag, dockerfile], cwd=REPO, capture_output=True, text=True, timeout=1800
        )
    assert built.returncode == 0, built.stderr[-3000:]
    return built.stdout.strip().splitlines()[-1]
