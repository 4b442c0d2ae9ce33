"""Finding the Delta tables under a prefix: every directory that holds a `_delta_log/`,
breadth first, through the storage's directory listing (one listing per directory; an object
store's delimiter listing), so data files are never listed.

A table's own directories are not searched further: a directory with a log nested inside
another table's directory is, as far as readers of that table go, some of its files, so it is
not offered as a table of its own. Directories whose names start with `_` or `.` (a log, a
checkpoint area, a writer's temporary files) are not tables' parents and are not entered.
The walk is bounded (depth, directories listed, tables found) and says when it stopped early.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from tables.delta.storage.api import Storage

LOG_DIR = "_delta_log"
MAX_DEPTH = 12
MAX_DIRS = 20_000
MAX_TABLES = 10_000


@dataclass
class Discovery:
    tables: list[str] = field(default_factory=list)  # keys of table roots under the prefix ("" is the prefix)
    dirs_listed: int = 0
    truncated: str = ""  # why the walk stopped early, if it did


def find_tables(
    storage: Storage, max_depth: int = MAX_DEPTH, max_dirs: int = MAX_DIRS, max_tables: int = MAX_TABLES
) -> Discovery:
    """The table roots under `storage`'s location, in breadth-first order."""
    out = Discovery()
    queue: deque[tuple[str, int]] = deque([("", 0)])
    while queue:
        key, depth = queue.popleft()
        if out.dirs_listed >= max_dirs:
            out.truncated = f"stopped after listing {max_dirs:,} directories"
            break
        try:
            children = storage.list_dirs(key)
        except FileNotFoundError:
            continue  # gone since its parent was listed
        out.dirs_listed += 1
        if LOG_DIR in children:
            out.tables.append(key)
            if len(out.tables) >= max_tables:
                out.truncated = f"stopped at {max_tables:,} tables"
                break
            continue
        if depth >= max_depth:
            continue
        for name in children:
            if not name.startswith(("_", ".")):
                queue.append((f"{key}/{name}" if key else name, depth + 1))
    return out
