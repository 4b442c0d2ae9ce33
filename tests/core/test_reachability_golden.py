"""Reachability on EVERY golden table against an oracle that knows nothing of intervals: each
version is rebuilt on its own (our replay, `load_snapshot`) and the files it names checked on
disk one by one. Each table is checked as it is and, where some version holds a file the latest
version no longer does, with that file deleted as VACUUM would delete it."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from tables.delta.errors import DeltaError
from tables.delta.history.reachability.compute import reachability
from tables.delta.snapshot.dv import deletion_vector_file
from tables.delta.snapshot.state import load_snapshot
from tests.conftest import golden_names, golden_path

NOW = int(time.time() * 1000)


def local(root: Path, log_path: str) -> Path:
    if log_path.startswith("file:"):
        return Path(unquote(urlparse(log_path).path))
    p = Path(unquote(log_path))
    return p if p.is_absolute() else root / p


def files_of(snap) -> list[str]:
    """Data files as the log names them (URL-encoded), then the deletion-vector files."""
    out = snap.files.column("path").to_pylist()
    for d in snap.file_dicts():
        dv = deletion_vector_file(d.get("deletionVector"))
        if dv is not None:
            out.append(dv)
    return out


def oracle(root: Path) -> dict[int, tuple[bool, bool, int]] | None:
    """version -> (readable, restorable, missing count), each version rebuilt on its own; None
    when not even the latest version can be rebuilt."""
    try:
        latest = load_snapshot(str(root))
    except DeltaError:
        return None
    latest_files = {unquote(p) for p in files_of(latest)}
    out = {}
    for v in range(latest.version + 1):
        try:
            snap = load_snapshot(str(root), version=v)
        except DeltaError:
            out[v] = (False, False, -1)
            continue
        missing = [p for p in files_of(snap) if not local(root, p).exists()]
        restorable = all(unquote(p) in latest_files for p in missing)
        out[v] = (not missing, restorable, len(missing))
    return out


def ours(root: Path) -> dict[int, tuple[bool, bool, int]] | None:
    try:
        r = reachability(str(root), NOW)
    except DeltaError:
        return None
    return {
        v.version: (
            v.readable,
            v.restorable,
            v.missing_count if v.reason == "files_missing" else (0 if v.readable else -1),
        )
        for v in r.versions
    }


def vacuum_one(root: Path) -> str | None:
    """Delete one data file some version holds and the latest does not (as VACUUM would)."""
    try:
        latest = load_snapshot(str(root))
    except DeltaError:
        return None
    live = {unquote(p) for p in latest.files.column("path").to_pylist()}
    for v in range(latest.version - 1, -1, -1):
        try:
            snap = load_snapshot(str(root), version=v)
        except DeltaError:
            continue
        for p in sorted(snap.files.column("path").to_pylist()):
            path = local(root, p)
            if unquote(p) not in live and path.is_file() and root in path.parents:
                path.unlink()
                return str(path.relative_to(root))
    return None


@pytest.mark.parametrize("name", golden_names() or ["(no golden tables)"])
def test_reachability_agrees_with_rebuilding_each_version(name: str, tmp_path: Path) -> None:
    root = tmp_path / name
    shutil.copytree(golden_path(name), root, symlinks=True)
    expected = oracle(root)
    assert ours(root) == expected
    deleted = vacuum_one(root)
    if deleted is None:
        return
    expected = oracle(root)
    assert expected is not None and any(not readable for readable, _r, _n in expected.values())
    assert ours(root) == expected, deleted
    assert os.path.exists(golden_path(name) / deleted)  # the original is untouched
