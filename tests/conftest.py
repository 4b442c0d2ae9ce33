"""Shared fixtures: where the golden tables are, and copies of them to write into."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GOLDEN = Path(os.environ.get("DELTAWEB_GOLDEN_TABLES", REPO.parent / "shared" / "delta-tables" / "golden"))


def golden_names() -> list[str]:
    if not GOLDEN.is_dir():
        return []
    return sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())


def golden_path(name: str) -> Path:
    path = GOLDEN / name
    if not path.is_dir():
        pytest.skip(f"golden table {name} not found under {GOLDEN} (set DELTAWEB_GOLDEN_TABLES)")
    return path


@pytest.fixture
def golden_copy(tmp_path):
    """Copy a golden table to a temporary directory (never write into the originals)."""

    def copy(name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(golden_path(name), dst)
        return dst

    return copy
