"""RESTORE to a version a pin keeps: the files the table lost (VACUUM) brought back from the
pin's kept table into the table, under their own relative paths, before the RESTORE commits.

A pin keeps version N as a table of its own (tables/delta/write/keep.py): its latest version
holds N's add actions, each file at the key `kept_key` gives it, which for a relative path
inside the source table is that same path (so a deletion vector's 'u' descriptor stays valid).
A file whose path keep could not keep (absolute, '..', inside `_delta_log/`) sits under
`_kept/<digest>/<name>` and its add names that; such a file comes back to the same relative
key in the table (the original place lay outside it, and a restore writes only inside it).

The kept table's log is input like any other: every path it names is resolved by both
storages (confined to their roots) and must be a relative key that stays inside both tables and
out of their logs; a kept version whose adds name absolute objects (a pin by legal holds not yet
settled) or 'p' deletion vectors is refused, with why. Planning only looks (HEADs); the copy
happens when an approved restore runs (`bring_back`): a file already in the table with the
expected size is left alone, one with another size is never replaced, and every copy is checked
by its size before the commit. Copies left by a run that fails before its commit are harmless:
no version references them. Pure: no Django, no Spark.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow.compute as pc

from tables.delta.errors import MissingFilesError, PathOutsideRootsError, RestoreError
from tables.delta.restore.actions import file_sizes
from tables.delta.snapshot.dv import deletion_vector_file
from tables.delta.snapshot.state import Snapshot, load_snapshot
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import place_file
from tables.delta.write.keep import KEPT_DIR, kept_key

MAX_LISTED = 100  # files a refusal names
THREADS = 16  # concurrent copies and checks on an object store (one round trip each)
_MOVED = re.compile(rf"^{KEPT_DIR}/[0-9a-f]{{24}}/[^/]+$")  # where keep puts a path it could not keep


@dataclass(frozen=True, slots=True)
class PinnedFile:
    """A file of the version the table lacks and the pin keeps: its key (the same in the
    kept table and in the table) and its size in the pin store."""

    path: str
    size: int
    kind: str  # "data" | "dv"

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "kind": self.kind}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PinnedFile:
        return cls(str(d["path"]), int(d["size"]), str(d.get("kind") or "data"))


def pinned_target(kept: Storage, version: int, where: str) -> Snapshot:
    """The version as its pin keeps it (the kept table's latest), numbered `version`; refused
    when its adds name files outside the kept table (absolute paths, 'p' deletion vectors):
    those are a pin by legal holds whose objects were not copied into the pin store."""
    snap = load_snapshot(kept)
    files = snap.files
    if files.num_rows:
        paths = files.column("path")
        absolute = pc.sum(pc.or_(pc.match_substring(paths, "://"), pc.starts_with(paths, "/"))).as_py() or 0
        dv = files.column("deletionVector")
        on_path = pc.sum(pc.fill_null(pc.equal(pc.struct_field(dv, "storageType"), "p"), False)).as_py() or 0
        if absolute or on_path:
            raise RestoreError(
                f"{where}: the pin keeps version {version} by naming the table's own objects "
                f"({absolute + on_path} file(s)), not copies in the pin store; once the table's VACUUM deleted "
                f"them, the next sync copies the held objects into the pin store, then the restore can use them",
                version=version,
            )
    return dataclasses.replace(snap, version=version)


def file_key(table: Storage, kept: Storage, path: str) -> str:
    """The key of a path a kept add names, checked by both storages (each confines it to its
    roots) and by keep's own rule: a relative key inside the table and out of its log, or a
    key keep made under `_kept/`. PathOutsideRootsError otherwise, before anything is read."""
    key = table.resolve(path)
    if kept.resolve(path) != key or not _kept_place(key):
        raise PathOutsideRootsError(
            f"{unquote(path)[:300]!r}: the pin's kept table names a file that does not lie inside the table "
            f"(an absolute path, '..' or the log); it was not copied",
            file=unquote(path)[:300],
        )
    return key


def _kept_place(key: str) -> bool:
    into, moved = kept_key(key)
    return (not moved and into == key) or bool(_MOVED.match(key))


def _files_of(add: dict[str, Any]) -> list[tuple[str, str]]:
    out = [("data", add["path"])]
    dv = add.get("deletionVector")
    if isinstance(dv, dict) and dv.get("storageType") == "u":
        where = deletion_vector_file(dv)
        if where:
            out.append(("dv", where))
    return out


def _heads(storage: Storage, keys: list[str]) -> dict[str, int | None]:
    """{key: size, None when absent} (restore/actions.file_sizes: a listing or a HEAD each)."""
    return file_sizes(storage, keys)


def find_in_pin(
    table: Storage, kept: Storage, adds: list[dict[str, Any]], bad: set[int]
) -> tuple[list[PinnedFile], list[str], set[int]]:
    """For the adds (indexes `bad`) whose files the table lacks: (the files the pin brings
    back, the files neither has, the indexes of the adds still missing a file). Each file's
    key is checked (`file_key`); the table and the pin store are asked once per file."""
    wanted: dict[str, tuple[str, list[int], int | None]] = {}  # key -> (kind, its adds, add size)
    for i in sorted(bad):
        add = adds[i]
        for kind, path in _files_of(add):
            key = file_key(table, kept, path)
            size = add.get("size") if kind == "data" and isinstance(add.get("size"), int) else None
            wanted.setdefault(key, (kind, [], size))[1].append(i)  # one DV file may serve several adds
    in_table = _heads(table, list(wanted))
    absent = [k for k, size in in_table.items() if size is None]
    in_pin = _heads(kept, absent)
    back: list[PinnedFile] = []
    missing: list[str] = []
    still: set[int] = set()
    for key in absent:
        kind, owners, expected = wanted[key]
        size = in_pin[key]
        if size is None or (expected is not None and size != expected):
            missing.append(key)
            still.update(owners)
        else:
            back.append(PinnedFile(key, size, kind))
    for key, size in in_table.items():
        kind, _owners, expected = wanted[key]
        if size is not None and expected is not None and size != expected:
            raise RestoreError(
                f"{table.display(key)} holds another file ({size} bytes, version's add says {expected}); "
                f"the restore would not replace it",
                file=key,
            )
    # a file whose every add is left out (another of its files is missing) is not copied
    back = sorted((f for f in back if set(wanted[f.path][1]) - still), key=lambda f: f.path)
    return back, sorted(missing), still


def pin_missing_error(where: str, version: int, missing: list[str]) -> MissingFilesError:
    shown = missing[:MAX_LISTED]
    more = f" (showing {len(shown)} of {len(missing)})" if len(missing) > len(shown) else ""
    return MissingFilesError(
        f"{where}: {len(missing)} file(s) of version {version} are neither in the table nor in the pin that keeps "
        f"it{more} (the pin store lost them, or holds them with another size): {', '.join(shown)}. Nothing was "
        f"copied or committed.",
        files=shown,
        version=version,
        count=len(missing),
        fromPin=True,
    )


def bring_back(
    table: Storage,
    kept: Storage,
    files: list[PinnedFile],
    progress: Callable[[str, int, int | None], None] | None = None,
) -> dict[str, Any]:
    """Copy each file from the pin's kept table into the table under the same key (a hard
    link or a server-side copy where the storages allow, else its bytes), then check every
    one by its size. A file the table has already with the size is left as it is ("present");
    one with another size is never replaced (RestoreError). The summary: files, how each got
    there, the bytes written. Raises before any commit; the copies made stay, unreferenced."""
    report = progress or (lambda *a: None)
    total = len(files)
    for f in files:  # the keys again: a stored plan is input too
        file_key(table, kept, f.path)
    before = _heads(table, [f.path for f in files])
    placed: dict[str, int] = {}
    todo = []
    for f in files:
        have = before[f.path]
        if have is None:
            todo.append(f)
        elif have == f.size:
            placed["present"] = placed.get("present", 0) + 1
        else:
            raise RestoreError(
                f"{table.display(f.path)} exists already with {have} bytes, not the pinned file's {f.size}; "
                f"it was not replaced and nothing was committed",
                file=f.path,
            )
    done = [total - len(todo)]
    report("copying files from the pin", done[0], total)

    def one(f: PinnedFile) -> str:
        try:
            return place_file(kept, f.path, table, f.path)
        except OSError as exc:  # a store's refusal, a full disk: said as the restore's failure
            raise RestoreError(
                f"{table.display(f.path)}: copying it from the pin failed ({exc}); nothing was committed",
                file=f.path,
            ) from exc

    threads = THREADS if table.remote or kept.remote else 1
    pool = ThreadPoolExecutor(max_workers=min(threads, max(1, len(todo))))
    try:
        for how in pool.map(one, todo):
            placed[how] = placed.get(how, 0) + 1
            done[0] += 1
            if done[0] % 100 == 0 or done[0] == total:
                report("copying files from the pin", done[0], total)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # after a failure, no copy is started
    report("checking the copies", 0, total)
    after = _heads(table, [f.path for f in todo])
    wrong = [f for f in todo if after[f.path] != f.size]
    if wrong:
        shown = ", ".join(f"{f.path} ({after[f.path]} bytes, expected {f.size})" for f in wrong[:MAX_LISTED])
        raise RestoreError(
            f"{table.display()}: {len(wrong)} file(s) copied from the pin do not have the pinned size: {shown}; "
            f"nothing was committed",
            files=[f.path for f in wrong[:MAX_LISTED]],
        )
    report("checking the copies", total, total)
    return {
        "files": total,
        "copied": len(todo),
        "present": total - len(todo),
        "bytes": sum(f.size for f in todo),
        "placed": dict(sorted(placed.items())),
    }
