"""Tables and users for the restore tests (written with delta-rs)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
from django.contrib.auth.models import Group, User

from tables.services.access.roles import ANALYST, APPROVER

BASE_MS = 1_700_000_000_000


def rows(ids) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "s": pa.array([f"r{i}" for i in ids], pa.string())})


def log_versions(path: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in (path / "_delta_log").glob("*.json") if p.name[:20].isdigit())


def set_commit_times(path: Path) -> None:
    """Commit v at BASE_MS + v seconds, so that timestamps resolve deterministically."""
    for v in log_versions(path):
        ns = (BASE_MS + v * 1000) * 1_000_000
        os.utime(path / "_delta_log" / f"{v:020d}.json", ns=(ns, ns))


def restore_table(path: Path) -> Path:
    """0 create (10 rows), 1-2 appends, 3 overwrite (5 rows), 4 append, 5 delete."""
    from deltalake import DeltaTable, write_deltalake

    write_deltalake(str(path), rows(range(0, 10)))
    write_deltalake(str(path), rows(range(10, 20)), mode="append")
    write_deltalake(str(path), rows(range(20, 30)), mode="append")
    write_deltalake(str(path), rows(range(100, 105)), mode="overwrite")
    write_deltalake(str(path), rows(range(105, 110)), mode="append")
    DeltaTable(str(path)).delete("id < 102")
    set_commit_times(path)
    return path


def rs_paths(path: Path, version: int | None = None) -> set[str]:
    from deltalake import DeltaTable

    dt = DeltaTable(str(path)) if version is None else DeltaTable(str(path), version=version)
    return set(pa.table(dt.get_add_actions(flatten=True)).column("path").to_pylist())


def rs_ids(path: Path, version: int | None = None) -> list[int]:
    from deltalake import DeltaTable

    dt = DeltaTable(str(path)) if version is None else DeltaTable(str(path), version=version)
    return sorted(dt.to_pyarrow_table().column("id").to_pylist())


def make_user(username: str, *, staff: bool = False, group: str | None = None) -> User:
    user = User.objects.create_user(username, password="pw-" + username, is_staff=staff)
    if group:
        user.groups.add(Group.objects.get_or_create(name=group)[0])
    return user


def people() -> dict[str, User]:
    return {
        "analyst": make_user("ana", group=ANALYST),
        "approver": make_user("appro", group=APPROVER),
        "approver2": make_user("appro2", group=APPROVER),
        "staff": make_user("boss", staff=True),
        "reader": make_user("reader"),
    }
