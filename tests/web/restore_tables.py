"""Tables and users for the restore tests (written with delta-rs): the table, its rows and log
are the Delta core's RESTORE tests' own (tests.core.test_restore), registered here for the app's."""

from __future__ import annotations

from pathlib import Path

from django.contrib.auth.models import Group, User

from tables.services.access.roles import ANALYST, APPROVER
from tests.core.test_restore import log_versions, rows, rs_paths, rs_table

__all__ = ["log_versions", "make_user", "people", "restore_table", "rows", "rs_ids", "rs_paths"]


def restore_table(path: Path) -> Path:
    """0 create (10 rows), 1-2 appends, 3 overwrite (5 rows), 4 append, 5 delete, each commit a
    second after the last (timestamps resolve deterministically)."""
    return rs_table(path.parent, path.name)


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
