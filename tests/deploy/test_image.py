"""The image a deployment runs, built here with podman (scripts/image.sh: the python base, or
one made from Debian's packages where docker.io cannot be reached) and run as a container: it
runs as a user, not root; its gunicorn serves the sign-in page and /healthz; /readyz names
what is down (no broker here); the machine's CA bundle, mounted
for pip during the build, is not in it."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.conftest import REPO
from tests.deploy.conftest import build_image
from tests.deploy.stack import LIMITS

pytestmark = [
    pytest.mark.skipif(shutil.which("podman") is None, reason="Debian's podman is not installed"),
    pytest.mark.skipif(shutil.which("mmdebstrap") is None, reason="Debian's mmdebstrap is not installed"),
]
SMOKE = """
import json, time, urllib.request, urllib.error
def get(path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:8000" + path, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
for _ in range(120):
    try:
        get("/healthz"); break
    except OSError:
        time.sleep(0.5)
print(json.dumps({"healthz": get("/healthz"), "login": get("/accounts/login/")[0], "readyz": get("/readyz")}))
"""


@pytest.fixture(scope="module")
def image() -> str:
    return build_image("deltaweb:test")


def run(image: str, *command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    flags = [f"--env={k}={v}" for k, v in (env or {}).items()]
    return subprocess.run(
        ["podman", "run", "--rm", *LIMITS, *flags, image, *command], capture_output=True, text=True, timeout=300
    )


def test_the_image_runs_as_a_user_and_serves_its_pages(image) -> None:
    who = run(image, "id", "-u")
    assert who.returncode == 0, who.stderr[-2000:]
    assert who.stdout.strip() not in ("", "0")
    env = {
        "DELTAWEB_SECRET_KEY": "image-test-only-key",
        "DATABASE_URL": "sqlite:////tmp/deltaweb.sqlite3",
        "CELERY_BROKER_URL": "redis://127.0.0.1:6399/0",  # nobody answers there
    }
    script = (
        "python manage.py migrate --noinput >/dev/null && "
        "(gunicorn deltaweb.wsgi --bind 127.0.0.1:8000 --workers 1 --threads 2 >/tmp/gunicorn.log 2>&1 &) && "
        f"python -c '{SMOKE}'"
    )
    out = run(image, "sh", "-c", script, env=env)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["healthz"] == [200, "ok\n"] and found["login"] == 200
    status, body = found["readyz"]
    assert status == 503 and "broker" in json.loads(body)["down"]


def test_the_machines_ca_bundle_is_not_in_the_image(image) -> None:
    ca = "/etc/ssl/certs/ca-certificates.crt"
    inside = run(image, "sha256sum", ca)
    host = subprocess.run(["sha256sum", ca], capture_output=True, text=True)
    if host.returncode != 0:
        pytest.skip(f"this machine has no {ca}")
    assert inside.stdout.split()[:1] != host.stdout.split()[:1]
    assert not any(
        "ca-certificates" in line
        for line in (REPO / "Dockerfile").read_text().splitlines()
        if line.startswith(("COPY", "ADD"))
    )
