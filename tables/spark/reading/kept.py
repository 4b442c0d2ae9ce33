"""A table's storage that reads a file the table no longer has from a kept table that has it.

A pin keeps a version as a table of its own (tables.delta.write.keep): its adds keep their
relative paths, its deletion vectors stored beside the data keep theirs. Once VACUUM deleted
those files from the table, a reader of a range of the table's history (change data, a row's
history) still plans from the table's log but finds some files only in a kept table. `WithKept`
is that table's storage for such a reader: every log read, listing and name is the table's;
a file the table does not have is opened from the first kept table that has the same key, and
from the table itself otherwise (so that its reader says which file is missing, as before).

Only relative keys are looked for in a kept table (a path the log names absolutely may have
been kept under `_kept/`, elsewhere): a kept table is a storage of its own, confined as any
other. The log is never read from a kept table.
"""

from __future__ import annotations

from typing import Any

from tables.delta.errors import DeltaError
from tables.delta.storage.api import Capability, Storage
from tables.delta.storage.opening import as_storage

LOG_PREFIX = "_delta_log/"


class WithKept:
    """The table's storage, falling back file by file on kept tables (see the module)."""

    def __init__(self, table: Storage, kept: list[Storage]) -> None:
        self._table = table
        self._kept = kept
        self._owners: dict[str, Storage] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)

    @property
    def remote(self) -> bool:
        return self._table.remote

    @property
    def capabilities(self) -> frozenset[Capability]:
        """The table's: each method it names opens a file from the table or a kept table."""
        return self._table.capabilities

    def owner(self, key: str) -> Storage:
        """The storage to open `key` from: the table while it has it, else a kept table."""
        found = self._owners.get(key)
        if found is not None:
            return found
        found = self._table
        if self._kept and not key.startswith(LOG_PREFIX) and "://" not in key and not key.startswith("/"):
            if not _has(self._table, key):
                found = next((k for k in self._kept if _has(k, key)), self._table)
        self._owners[key] = found
        return found

    @property
    def from_kept(self) -> int:
        """How many files were found only in a kept table."""
        return sum(1 for s in self._owners.values() if s is not self._table)

    def read(self, path: str, range: tuple[int, int] | None = None) -> bytes:
        return self.owner(path).read(path, range)

    def read_many(self, paths: list[str]) -> list[bytes]:
        if not self._kept or all(self.owner(p) is self._table for p in paths):
            return self._table.read_many(paths)
        return [self.owner(p).read(p) for p in paths]

    def read_mapped(self, path: str) -> Any:
        return self.owner(path).read_mapped(path)

    def open_input(self, path: str) -> Any:
        return self.owner(path).open_input(path)

    def head(self, path: str) -> Any:
        return self.owner(path).head(path)

    def exists(self, path: str) -> bool:
        return _has(self.owner(path), path)

    def local_file(self, path: str) -> str:
        return self.owner(path).local_file(path)

    def uri(self, path: str = "") -> str:
        return self.owner(path).uri(path) if path else self._table.uri(path)


def _has(storage: Storage, key: str) -> bool:
    try:
        return bool(storage.exists(key))
    except (DeltaError, OSError, ValueError):
        return False


def with_kept(location: str | Storage, kept: list[str] | tuple[str, ...] = ()) -> Storage:
    """The table's storage, with the kept tables at `kept` to fall back on (none: as it is)."""
    storage = as_storage(location)
    places = [as_storage(k) for k in dict.fromkeys(kept) if k]
    return WithKept(storage, places) if places else storage  # type: ignore[return-value]
