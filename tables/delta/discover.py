"""Finding the Delta tables under a prefix: every directory that holds a `_delta_log/`,
depth first in name order, through the storage's directory listing (one listing per directory;
an object store's delimiter listing), so data files are never listed.

The walk is a generator: each table root is yielded as it is found, and what it holds at once
is the path from the prefix down to where it is, with each level's names still to visit (a
directory's listing), never the tables found so far: a hundred thousand tables under a prefix
are found in the memory of one listing per level. The caller keeps what it needs (a page of
them, counts).

A table's own directories are not searched further: a directory with a log nested inside
another table's directory is, as far as readers of that table go, some of its files, so it is
not offered as a table of its own. Directories whose names start with `_` or `.` (a log, a
checkpoint area, a writer's temporary files) are not tables' parents and are not entered.
The walk is bounded (depth, directories listed) and says when it stopped early.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from tables.delta.storage.api import Storage

LOG_DIR = "_delta_log"
MAX_DEPTH = 12
MAX_DIRS = 250_000  # about 100,000 tables two levels under the prefix, with their parents


@dataclass
class Walk:
    """What a walk did: directories listed, and why it stopped early ("" if it did not)."""

    dirs_listed: int = 0
    truncated: str = ""


def walk_tables(
    storage: Storage, walk: Walk | None = None, max_depth: int = MAX_DEPTH, max_dirs: int = MAX_DIRS
) -> Iterator[str]:
    """The keys of the table roots under `storage`'s location ("" is the location itself),
    yielded as found, depth first in name order; `walk` (when given) counts the listings and
    says why the walk stopped early."""
    walk = walk if walk is not None else Walk()
    # each level: the directory's key, its depth, and its children not yet visited
    stack: list[tuple[str, int, Iterator[str]]] = []
    pending: tuple[str, int] | None = ("", 0)
    while pending is not None or stack:
        if pending is not None:
            key, depth = pending
            pending = None
            if walk.dirs_listed >= max_dirs:
                walk.truncated = f"stopped after listing {max_dirs:,} directories"
                return
            try:
                children = storage.list_dirs(key)
            except FileNotFoundError:
                continue  # gone since its parent was listed
            walk.dirs_listed += 1
            if LOG_DIR in children:
                yield key
            elif depth < max_depth:
                stack.append((key, depth, iter(children)))
            continue
        parent, depth, names = stack[-1]
        name = next(names, None)
        if name is None:
            stack.pop()
        elif not name.startswith(("_", ".")):
            pending = (f"{parent}/{name}" if parent else name, depth + 1)
