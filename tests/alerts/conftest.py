"""Fixtures of the alerts tests: allowed roots under tmp_path and a table whose log arrives
in two steps (a first sync stores its past, the second stores the commits rules look at)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tables.models import Table
from tables.services.catalog import registration
from tables.services.sync import store as sync
from tests.alerts.receivers import receiver  # noqa: F401 (a fixture of the delivery tests)


@pytest.fixture
def roots(settings, tmp_path):
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    return tmp_path


def hold_back(path: Path, from_version: int) -> Path:
    """Move the log files of versions >= from_version (and checkpoint hints) aside; returns
    the directory they went to (see `bring_back`)."""
    aside = path.parent / f"{path.name}-later"
    aside.mkdir()
    for f in sorted((path / "_delta_log").iterdir()):
        if f.name == "_last_checkpoint" or (f.name[:20].isdigit() and int(f.name[:20]) >= from_version):
            shutil.move(str(f), aside / f.name)
    return aside


def bring_back(path: Path, aside: Path) -> None:
    for f in sorted(aside.iterdir()):
        shutil.move(str(f), path / "_delta_log" / f.name)


def register_and_sync(name: str, path: Path) -> Table:
    table = registration.register_table(name, str(path))
    sync.sync_table(table.pk)
    table.refresh_from_db()
    return table
