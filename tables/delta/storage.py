"""Storage over a table root: the only module of the core that touches files.

The interface is the small one object stores offer too (list sorted from a prefix, read,
stat, put with or without overwrite), so an S3 or ABFS implementation can follow.
"""

from __future__ import annotations

import mmap
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from .errors import CommitConflictError, NotADeltaTableError, StorageError


@dataclass(frozen=True, slots=True)
class FileInfo:
    """A file under the table root: its path relative to the root, size and mtime (ms)."""

    path: str
    size: int
    modification_time: int


def local_path(location: str) -> Path:
    """The local directory of a location given as a path or a `file://` URI."""
    if location.startswith("file:"):
        parsed = urlparse(location)
        if parsed.netloc not in ("", "localhost"):
            raise NotADeltaTableError(f"{location}: file URIs with a host are not supported")
        return Path(unquote(parsed.path))
    if "://" in location:
        scheme = location.split("://", 1)[0]
        raise NotADeltaTableError(f"{location}: storage scheme '{scheme}' is not supported yet")
    return Path(location)


class LocalStorage:
    """A table root on the local file system."""

    def __init__(self, location: str | os.PathLike[str]) -> None:
        self.location = str(location)
        self.root = Path(os.path.normpath(local_path(self.location).absolute()))

    def __repr__(self) -> str:
        return f"LocalStorage({str(self.root)!r})"

    def _full(self, rel: str) -> Path:
        return self.root / rel

    def list_dir(self, rel_dir: str) -> list[FileInfo]:
        """Files (not directories) directly in `rel_dir`, sorted by name."""
        base = self._full(rel_dir)
        out: list[FileInfo] = []
        try:
            with os.scandir(base) as it:
                for entry in it:
                    if entry.is_file():
                        try:
                            st = entry.stat()
                        except FileNotFoundError:
                            continue  # gone since the scan (a writer's temporary file)
                        out.append(FileInfo(f"{rel_dir}/{entry.name}", st.st_size, st.st_mtime_ns // 1_000_000))
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise StorageError(f"{base}: cannot list ({exc.strerror})") from exc
        out.sort(key=lambda f: f.path)
        return out

    def list_names(self, rel_dir: str) -> list[str]:
        """Names of the files directly in `rel_dir`, sorted; no stat (the directory entry's
        type is enough), so listing a log of 100,000 commits costs one directory scan."""
        base = self._full(rel_dir)
        try:
            with os.scandir(base) as it:
                names = [e.name for e in it if e.is_file()]
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise StorageError(f"{base}: cannot list ({exc.strerror})") from exc
        names.sort()
        return names

    def read(self, rel: str) -> bytes:
        try:
            return self._full(rel).read_bytes()
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise StorageError(f"{self._full(rel)}: cannot read ({exc.strerror})") from exc

    def read_mapped(self, rel: str) -> bytes | mmap.mmap:
        """The file's content as a read-only memory map (bytes when empty): big commits are
        parsed in place instead of being copied into memory first."""
        try:
            with open(self._full(rel), "rb") as fh:
                if os.fstat(fh.fileno()).st_size == 0:
                    return b""
                return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise StorageError(f"{self._full(rel)}: cannot read ({exc.strerror})") from exc

    def stat(self, rel: str) -> FileInfo:
        st = self._full(rel).stat()
        return FileInfo(rel, st.st_size, st.st_mtime_ns // 1_000_000)

    def exists(self, rel: str) -> bool:
        return self._full(rel).exists()

    def is_dir(self, rel: str) -> bool:
        return self._full(rel).is_dir()

    def put_if_absent(self, rel: str, data: bytes) -> None:
        """Write `rel` whole or not at all; never overwrite an existing file.

        The data goes to a temporary file in the same directory first, then a hard link
        creates the target atomically and fails when it exists (the put-if-absent that
        object stores offer as a conditional PUT).
        """
        target = self._full(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            try:
                os.link(tmp, target)
            except FileExistsError as exc:
                raise CommitConflictError(f"{target} exists already", version=-1) from exc
        finally:
            os.unlink(tmp)

    def put(self, rel: str, data: bytes) -> None:
        """Write `rel` atomically, replacing it if present (for hints such as _last_checkpoint)."""
        target = self._full(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)

    def set_mtime(self, rel: str, millis: int) -> None:
        os.utime(self._full(rel), ns=(millis * 1_000_000, millis * 1_000_000))

    def uri(self, rel: str = "") -> str:
        return (self.root / rel).as_uri() if rel else self.root.as_uri()


def open_storage(location: str | os.PathLike[str]) -> LocalStorage:
    """Storage for a table location; the one place that picks an implementation."""
    return LocalStorage(location)
