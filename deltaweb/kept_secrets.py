"""Secrets a process keeps for itself: from the environment when a deployment passes one, else a
random value kept in a file under the var directory (mode 0600), generated the first time.

Never derived from anything public (a path, a host name). The file is published whole and
exclusively (written to a temporary file of its own, then hard-linked to its name, which fails
if another process got there first): processes starting at once all read the one value that
won. `rotate_secret` replaces it atomically with a new value.

    from deltaweb.kept_secrets import kept_secret
    KEY = kept_secret("DELTAWEB_SOME_KEY", "some.key")

Imported by the settings module itself: no Django here beyond its exception type."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
# the directory of files the process keeps (settings.DELTAWEB_VAR_DIR); DELTAWEB_VAR_DIR moves it
VAR_DIR = Path(os.environ.get("DELTAWEB_VAR_DIR") or BASE_DIR / "var").resolve()


def new_secret() -> str:
    """A fresh random value: 64 bytes, URL-safe text (86 characters)."""
    return secrets.token_urlsafe(64)


def _write_private(path: Path, value: str) -> None:
    """`value` into a new file at `path` (it must not exist), mode 0600 whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, (value + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _temporary(directory: Path, file_name: str) -> Path:
    return directory / f".{file_name}.{os.getpid()}.{secrets.token_hex(8)}.tmp"


def _read(path: Path) -> str:
    value = path.read_text().strip()
    if not value:
        raise ImproperlyConfigured(f"{path} is empty: remove it and a new secret is generated")
    return value


def kept_secret(env_name: str, file_name: str, *, directory: Path | None = None) -> str:
    """The environment variable `env_name` when set (an empty one is refused), else the content
    of `file_name` under the var directory, generated (random, mode 0600) when absent."""
    if env_name in os.environ:
        value = os.environ[env_name].strip()
        if not value:
            raise ImproperlyConfigured(f"{env_name} is empty: set it to a long random string")
        return value
    return kept_file(file_name, directory=directory)


def kept_file(file_name: str, *, directory: Path | None = None, make: Callable[[], str] = new_secret) -> str:
    """The content of `file_name` under the var directory, made by `make` (random, mode 0600,
    published exclusively) when absent."""
    directory = Path(directory or VAR_DIR)
    path = directory / file_name
    if path.exists():
        return _read(path)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = _temporary(directory, file_name)
    _write_private(tmp, make())
    try:
        os.link(tmp, path)  # exclusive: fails when another process published its value first
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return _read(path)


def rotate_secret(file_name: str, *, directory: Path | None = None) -> None:
    """Replace the kept `file_name` with a new random value, atomically (readers see the old
    value or the new one, never a partial file), mode 0600."""
    directory = Path(directory or VAR_DIR)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = _temporary(directory, file_name)
    _write_private(tmp, new_secret())
    try:
        os.replace(tmp, directory / file_name)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
