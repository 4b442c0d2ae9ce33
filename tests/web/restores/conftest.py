"""Fixtures the restore tests share: the people of the approval flow, and the restore table
(tests.web.restore_tables) written under an allowed root, registered as `events` and synced."""

from __future__ import annotations

from pathlib import Path

import pytest

from tables.models import Table
from tests.web.restore_tables import people, restore_table


@pytest.fixture
def users() -> dict:
    return people()


@pytest.fixture
def table_path(settings, tmp_path) -> Path:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    return restore_table(tmp_path / "events")


@pytest.fixture
def table(table_path) -> Table:
    from tests.web.kept_tables import register

    return register(table_path)
