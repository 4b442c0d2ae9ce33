"""The signing key: never derived from anything public. A development start without
DELTAWEB_SECRET_KEY keeps a random key in a file of its own (mode 0600, created once even when
processes start together); a production start (the image) refuses to run without the variable."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

PRINT_KEY = "from django.conf import settings; import django; django.setup(); print(settings.SECRET_KEY)"


def _env(var_dir: Path, **extra: str) -> dict[str, str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DELTAWEB_SECRET_KEY", "DELTAWEB_PRODUCTION", "DELTAWEB_VAR_DIR")
    }
    return {**clean, "DJANGO_SETTINGS_MODULE": "deltaweb.settings", "DELTAWEB_VAR_DIR": str(var_dir), **extra}


def _start(var_dir: Path, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", PRINT_KEY], cwd=REPO, env=_env(var_dir, **extra), capture_output=True, text=True
    )


def test_a_start_without_a_key_keeps_a_random_one_that_is_not_derived_from_the_checkout(tmp_path) -> None:
    first = _start(tmp_path / "var")
    assert first.returncode == 0, first.stderr[-2000:]
    key = first.stdout.strip()
    assert str(REPO) not in key and "dev-only" not in key and len(key) >= 50
    kept = tmp_path / "var" / "secret.key"
    assert kept.read_text().strip() == key
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    # the next start reads the same key back; another place gets another key
    assert _start(tmp_path / "var").stdout.strip() == key
    other = _start(tmp_path / "elsewhere").stdout.strip()
    assert other and other != key


def test_processes_starting_at_once_agree_on_the_kept_key(tmp_path) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PRINT_KEY],
            cwd=REPO,
            env=_env(tmp_path / "var"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    keys = set()
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
        keys.add(out.strip())
    assert len(keys) == 1 and "" not in keys
    assert {p.name for p in (tmp_path / "var").iterdir()} == {"secret.key"}  # no temporary file left


def test_a_production_start_refuses_to_run_without_a_key(tmp_path) -> None:
    refused = _start(tmp_path / "var", DELTAWEB_PRODUCTION="1")
    assert refused.returncode != 0
    assert "ImproperlyConfigured" in refused.stderr and "DELTAWEB_SECRET_KEY" in refused.stderr
    assert not (tmp_path / "var" / "secret.key").exists()
    given = _start(tmp_path / "var", DELTAWEB_PRODUCTION="1", DELTAWEB_SECRET_KEY="k" * 50)
    assert given.returncode == 0 and given.stdout.strip() == "k" * 50
    empty = _start(tmp_path / "var", DELTAWEB_SECRET_KEY=" ")
    assert empty.returncode != 0 and "DELTAWEB_SECRET_KEY is empty" in empty.stderr


def test_the_image_starts_in_production_mode() -> None:
    lines = [line.strip() for line in (REPO / "Dockerfile").read_text().splitlines()]
    envs = " ".join(line for line in lines if line.startswith("ENV "))
    assert "DELTAWEB_PRODUCTION=1" in envs
    compose = (REPO / "docker-compose.yml").read_text()
    assert "DELTAWEB_SECRET_KEY: ${DELTAWEB_SECRET_KEY:?set DELTAWEB_SECRET_KEY}" in compose


def test_a_kept_secret_is_reusable_and_rotates_in_place(tmp_path, monkeypatch) -> None:
    from deltaweb.kept_secrets import kept_secret, rotate_secret

    monkeypatch.delenv("SOME_TEST_KEY", raising=False)
    first = kept_secret("SOME_TEST_KEY", "some.key", directory=tmp_path)
    assert first and kept_secret("SOME_TEST_KEY", "some.key", directory=tmp_path) == first
    rotate_secret("some.key", directory=tmp_path)
    second = kept_secret("SOME_TEST_KEY", "some.key", directory=tmp_path)
    assert second and second != first
    assert stat.S_IMODE((tmp_path / "some.key").stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["some.key"]
    monkeypatch.setenv("SOME_TEST_KEY", "from-the-environment")
    assert kept_secret("SOME_TEST_KEY", "some.key", directory=tmp_path) == "from-the-environment"
    monkeypatch.setenv("SOME_TEST_KEY", "  ")
    with pytest.raises(Exception, match="SOME_TEST_KEY is empty"):
        kept_secret("SOME_TEST_KEY", "some.key", directory=tmp_path)


def test_the_settings_name_the_var_directory() -> None:
    from django.conf import settings

    assert Path(settings.DELTAWEB_VAR_DIR).is_absolute()
