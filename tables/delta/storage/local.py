"""The local file system behind the `Storage` protocol: `LocalStorage`, confined to the
allowed roots.

Confinement lives in each backend's `resolve` and opens: a path a table's log names (add,
remove and cdc files, deletion vectors, sidecars, checkpoints) is hostile input. `resolve`
turns it into a key under the table root or an absolute location, and every open checks,
after resolving `..` and symbolic links, that the file lies under the allowed roots; a path
outside is refused with `PathOutsideRootsError` before anything opens it."""

from __future__ import annotations

import errno
import mmap
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import unquote

from tables.delta.errors import CommitConflictError, PathOutsideRootsError, PathTooLongError, StorageError
from tables.delta.storage.api import (
    MAX_LOG_PATH_CHARS,
    MAX_PATH_BYTES,
    Capability,
    FileInfo,
    Storage,
    allowed_roots,
    is_under,
    is_uri,
    local_path,
    refuse_long_path,
)

NAME_MAX = 255  # bytes of one file name on Linux's file systems, when the root cannot be asked
# directories whose checked path a storage remembers: a table's few, not each of the 100,000
# directories a discovery walk lists through one storage (emptied when full)
CHECKED_DIRS_KEPT = 1024


def resolved(path: str) -> str | None:
    """A path with its links resolved, or None where the server may not read one (/proc/1/cwd)
    or they loop: a path that cannot be resolved cannot be shown to lie under the roots."""
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return None


class LocalStorage:
    """A table root on the local file system, confined to the allowed roots."""

    remote = False  # reads are cheap one by one (and big commits are memory-mapped)
    capabilities = frozenset(
        {
            Capability.READ_WITH_INFO,
            Capability.FILE_TIMES,
            Capability.OPEN_INPUT,
            Capability.OPEN_FILE,
            Capability.PLACE,
            Capability.SET_MTIME,
        }
    )

    def __init__(self, location: str | os.PathLike[str], roots: Iterable[str] | None = None) -> None:
        self.location = str(location)
        self.root = Path(os.path.normpath(local_path(self.location).absolute()))
        self._root_text = str(self.root)
        if roots is not None:
            configured = tuple(roots)
            given = tuple(os.path.realpath(r) for r in configured if not is_uri(r))
        else:
            configured = allowed_roots()
            given = tuple(r for r in configured if not is_uri(r))
        # with no roots configured (a command line on one table) the table root is the only one;
        # roots that are all object-store prefixes allow no local directory
        self.roots = given if configured else (os.path.realpath(self.root),)
        self._dirs: dict[str, str] = {}  # directory -> its resolved path, checked against the roots
        # a key's directory part, as written, -> its checked directory: only parts that were
        # already normal (no '..', '.', '//', not absolute), so the next key in the same
        # directory (a log's next commit) skips the join, normpath and split
        self._key_dirs: dict[str, str] = {}
        self._name_max: int | None = None  # asked of the file system once, when a long name comes

    def __repr__(self) -> str:
        return f"LocalStorage({self._root_text!r})"

    # -- confinement

    def _checked_dir(self, directory: str, key: str) -> str:
        real = self._dirs.get(directory)
        if real is None:
            real = resolved(directory)
            if real is None or not is_under(real, self.roots):
                raise PathOutsideRootsError(self.refusal(key), file=self.shown(key))
            if len(self._dirs) >= CHECKED_DIRS_KEPT:
                self._dirs.clear()
            self._dirs[directory] = real
        return real

    def _full(self, key: str) -> str:
        """The checked local path of a key: its directory resolved and under the roots (the
        file itself is opened without following a symlink, or resolved and checked too)."""
        if "\x00" in key:
            raise PathOutsideRootsError(self.refusal(key), file=self.shown(key))
        refuse_long_path(key)  # a key that skipped `resolve`: no copy of a huge one is made below
        head, _sep, name = key.rpartition("/")
        checked = self._key_dirs.get(head)
        if checked is not None and name not in ("", ".", ".."):
            return f"{checked}{os.sep}{name}"
        full = os.path.normpath(os.path.join(self._root_text, key))
        directory, name = os.path.split(full)
        checked = self._checked_dir(directory, key)
        if head and directory == f"{self._root_text}{os.sep}{head}":  # `head` was normal
            if len(self._key_dirs) >= CHECKED_DIRS_KEPT:
                self._key_dirs.clear()
            self._key_dirs[head] = checked
        return os.path.join(checked, name)

    def _checked_file(self, key: str) -> str:
        """`_full` with a symlinked file resolved and checked (for openers that follow links)."""
        full = self._full(key)
        if os.path.islink(full):
            real = resolved(full)
            if real is None or not is_under(real, self.roots):
                raise PathOutsideRootsError(self.refusal(key), file=self.shown(key))
            return real
        return full

    def shown(self, key: str) -> str:
        """A path for messages that never tells the server's directories: relative to the table
        root when below it, as the log wrote it when relative, else only its file name."""
        full = os.path.normpath(os.path.join(self._root_text, key))
        if full.startswith(self._root_text + os.sep):
            return full[len(self._root_text) + 1 :]
        if not os.path.isabs(key):
            return key[:300]
        return ".../" + os.path.basename(full)[:200]

    def _refuse_long_names(self, key: str, full: str) -> None:
        """PathTooLongError for a path the OS would refuse as "File name too long" wherever it
        is opened (pyarrow, Spark): PATH_MAX bytes in all, or a name over the file system's
        limit. Said with the path as the log wrote it, never the server's directories."""
        if len(full) * 4 < MAX_PATH_BYTES and len(key) * 4 <= NAME_MAX:
            return  # the usual path: short enough whatever its characters
        size = len(full.encode("utf-8", "surrogatepass"))
        longest = max(len(part.encode("utf-8", "surrogatepass")) for part in key.split("/"))
        if size < MAX_PATH_BYTES and longest <= self._name_limit():
            return
        shown = repr(self.shown(key)[:60]) + "..."
        if size >= MAX_PATH_BYTES:
            what = f"a path too long for this file system ({size:,} bytes here, at most {MAX_PATH_BYTES - 1:,})"
        else:
            what = f"a file name too long for this file system ({longest:,} bytes, at most {self._name_limit():,})"
        raise PathTooLongError(
            f"{shown}: the log names {what}; no such file can exist, so it was not opened",
            file=self.shown(key)[:300],
            reason="path_too_long",
        )

    def _name_limit(self) -> int:
        if self._name_max is None:
            try:
                self._name_max = int(os.pathconf(self._root_text, "PC_NAME_MAX"))
            except (OSError, ValueError):
                self._name_max = NAME_MAX  # the root is not there yet, or cannot say
        return self._name_max

    def refusal(self, key: str) -> str:
        return (
            f"{self.shown(key)!r} lies outside the allowed roots (an absolute path, '..' or a symbolic "
            "link leading out of them); it was not read"
        )

    def _open(self, key: str) -> int:
        full = self._full(key)
        try:
            return os.open(full, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            if exc.errno != 40:  # ELOOP: the file itself is a symbolic link
                raise
        return os.open(self._checked_file(key), os.O_RDONLY)

    def _open_read(self, key: str) -> int:
        """`_open`, with failures other than a missing file as a StorageError."""
        try:
            return self._open(key)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise StorageError(f"{self.display(key)}: cannot read ({exc.strerror})") from exc

    def _dir(self, rel_dir: str) -> str:
        """The resolved, checked local directory of a directory key ("" is the root)."""
        return self._checked_dir(os.path.normpath(os.path.join(self._root_text, rel_dir)), rel_dir or ".")

    def resolve(self, log_path: str) -> str:
        """The key of a path as the log names it: URL-decoded and relative to the root, an
        absolute path, or a `file:` URI (made a path). Checked against the roots here, so a
        refused path fails before any engine is handed it, as is one no file system holds."""
        refuse_long_path(log_path, MAX_LOG_PATH_CHARS)  # before any copy of a huge one is made
        if log_path.startswith("file:"):
            key = str(local_path(log_path))
        else:
            key = unquote(log_path)
            if "://" in key:
                scheme = key.split("://", 1)[0][:20]
                raise StorageError(f"a file on '{scheme}' storage cannot be read beside a local table", file=key[:300])
        full = self._full(key)  # the directory checked now; the file itself when it is opened
        self._refuse_long_names(key, full)
        return key

    # -- the interface

    def list_from(self, prefix: str, start_after: str | None = None) -> Iterator[FileInfo]:
        if start_after is None:
            return iter(self.list_dir(prefix))
        # one listing of bare names (no entry objects), then a stat of only the names after
        # `start_after`: the tail of a log of 100,000 commits costs one directory read
        base = self._dir(prefix)
        head = f"{prefix}/"
        try:
            if start_after.startswith(head):
                after = start_after[len(head) :]
                names = [n for n in os.listdir(base) if n > after]
            else:
                names = [n for n in os.listdir(base) if head + n > start_after]
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise StorageError(f"{self.display(prefix)}: cannot list ({exc.strerror})") from exc
        out = []
        for name in sorted(names):
            try:
                st = os.stat(os.path.join(base, name))
            except FileNotFoundError:
                continue  # gone since the listing (a writer's temporary file)
            if stat.S_ISREG(st.st_mode):
                out.append(FileInfo(head + name, st.st_size, st.st_mtime_ns // 1_000_000))
        return iter(out)

    def list_dir(self, rel_dir: str) -> list[FileInfo]:
        """Files (not directories) directly in `rel_dir`, sorted by name."""
        base = self._dir(rel_dir)
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
            raise StorageError(f"{self.display(rel_dir)}: cannot list ({exc.strerror})") from exc
        out.sort(key=lambda f: f.path)
        return out

    def list_tree(self, prefix: str = "", exclude: tuple[str, ...] = ()) -> Iterator[str]:
        """Every file below `prefix`, as keys relative to the root, in no order; top-level
        directories in `exclude` are skipped. Symbolic links are not followed into
        directories, and a linked file counts only when it resolves inside the roots.
        One scandir per directory: the entry's type comes with it (no stat per file)."""
        base = self._dir(prefix)
        stack = [(base, prefix.rstrip("/") + "/" if prefix else "", True)]
        while stack:
            directory, rel, top = stack.pop()
            try:
                with os.scandir(directory) as it:
                    for entry in it:
                        if entry.is_dir(follow_symlinks=False):
                            if not (top and entry.name in exclude):
                                stack.append((entry.path, f"{rel}{entry.name}/", False))
                        elif entry.is_symlink():
                            real = os.path.realpath(entry.path)
                            if os.path.isfile(real) and is_under(real, self.roots):
                                yield rel + entry.name
                        elif entry.is_file(follow_symlinks=False):
                            yield rel + entry.name
            except (FileNotFoundError, NotADirectoryError):
                continue  # removed while listing

    def list_names(self, rel_dir: str) -> list[str]:
        """Names of the files directly in `rel_dir`, sorted; no stat (the directory entry's
        type is enough), so listing a log of 100,000 commits costs one directory scan."""
        base = self._dir(rel_dir)
        try:
            with os.scandir(base) as it:
                names = [e.name for e in it if e.is_file()]
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise StorageError(f"{self.display(rel_dir)}: cannot list ({exc.strerror})") from exc
        names.sort()
        return names

    def file_times(self, rel_dir: str, names: list[str]) -> dict[str, tuple[int, int]]:
        """(size, modification time in ms) of those of `names` that are regular files directly
        in `rel_dir`: a stat per name relative to the directory, opened once and checked,
        without resolving any path again (with the names a listing gave, a quarter cheaper
        than scanning the directory again). Symbolic links are left out (their targets are
        checked where they are opened or stat'ed)."""
        base = self._dir(rel_dir)
        out: dict[str, tuple[int, int]] = {}
        try:
            fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError as exc:
            raise StorageError(f"{self.display(rel_dir)}: cannot list ({exc.strerror})") from exc
        try:
            stat_at, regular = os.stat, stat.S_ISREG
            for name in names:
                if "/" in name:
                    continue  # not directly in the directory (and never a way out of it)
                try:
                    st = stat_at(name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue  # removed since the listing: stat'ed (and reported) when asked for
                except OSError as exc:
                    raise StorageError(f"{self.display(rel_dir)}: cannot list ({exc.strerror})") from exc
                if regular(st.st_mode):
                    out[name] = (st.st_size, st.st_mtime_ns // 1_000_000)
        finally:
            os.close(fd)
        return out

    def read(self, path: str, range: tuple[int, int] | None = None) -> bytes:
        with os.fdopen(self._open_read(path), "rb") as fh:
            if range is None:
                return fh.read()
            start, end = range
            fh.seek(start)
            return fh.read(max(0, end - start))

    def read_with_info(self, path: str) -> tuple[bytes, FileInfo]:
        """The file's bytes and its size and time, from one open (an fstat of the file read,
        instead of a second lookup of the path)."""
        fd = self._open_read(path)
        try:
            st = os.fstat(fd)
            # plain reads into one buffer (no file object): a sync reads 100,000 small commits
            parts, want = [], st.st_size + 1
            while chunk := os.read(fd, want):
                parts.append(chunk)
                if len(chunk) < want:  # a short read of a regular file: its end
                    break
                want = 1 << 20  # the file grew since the fstat: read it to its end
        finally:
            os.close(fd)
        return (parts[0] if len(parts) == 1 else b"".join(parts)), FileInfo(
            path, st.st_size, st.st_mtime_ns // 1_000_000
        )

    def read_many(self, paths: list[str]) -> list[bytes]:
        """The bytes of every path, in order (a plain loop: local reads need no batching)."""
        return [self.read(p) for p in paths]

    def read_mapped(self, rel: str) -> bytes | mmap.mmap:
        """The file's content as a read-only memory map (bytes when empty): big commits are
        parsed in place instead of being copied into memory first."""
        with os.fdopen(self._open_read(rel), "rb") as fh:
            if os.fstat(fh.fileno()).st_size == 0:
                return b""
            return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)

    def open_input(self, path: str) -> Any:
        """A seekable native file for pyarrow (Parquet checkpoints and data), opened after the
        check; FileNotFoundError when absent."""
        import pyarrow as pa

        real = self._checked_file(path)
        if not os.path.exists(real):
            raise FileNotFoundError(2, "No such file or directory", self.shown(path))
        return pa.OSFile(real, "rb")

    def open_file(self, path: str) -> BinaryIO:
        """The file opened for reading, after the same confinement check as every read: a real
        file object, so that a web server can send it with sendfile (Delta Sharing's file URLs).
        FileNotFoundError when absent; the caller closes it."""
        return os.fdopen(self._open_read(path), "rb")

    def head(self, path: str) -> FileInfo:
        st = os.stat(self._checked_file(path))
        return FileInfo(path, st.st_size, st.st_mtime_ns // 1_000_000)

    stat = head

    def exists(self, path: str) -> bool:
        return os.path.exists(self._checked_file(path))

    def is_dir(self, rel: str) -> bool:
        full = os.path.normpath(os.path.join(self._root_text, rel))
        if not os.path.isdir(full):
            return False
        self._checked_dir(full, rel)
        return True

    def put(self, path: str, data: bytes, overwrite: bool = False) -> bool:
        """Write `path` whole or not at all. Without `overwrite` an existing file is never
        replaced and False says so: the data goes to a temporary file in the same directory,
        then a hard link creates the target atomically and fails when it exists (the
        put-if-absent object stores offer as a conditional PUT). With it, an atomic rename."""
        try:
            return self._put(path, data, overwrite)
        except OSError as exc:
            if isinstance(exc, FileNotFoundError | PermissionError | IsADirectoryError | NotADirectoryError):
                raise
            # a full disk, a quota, a read-only file system: nothing was linked in (the
            # temporary file is gone), and the error says what and where, not a traceback
            reason = os.strerror(exc.errno) if exc.errno else str(exc)
            raise StorageError(f"could not write {self.display(path)}: {reason.lower()}") from exc

    def _put(self, path: str, data: bytes, overwrite: bool) -> bool:
        directory = os.path.dirname(os.path.normpath(os.path.join(self._root_text, path)))
        os.makedirs(directory, exist_ok=True)
        target = self._full(path)
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=os.path.dirname(target))
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                if not overwrite:
                    os.fsync(fh.fileno())
            if overwrite:
                os.replace(tmp, target)
                return True
            try:
                os.link(tmp, target)
            except FileExistsError:
                return False
            return True
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def put_if_absent(self, rel: str, data: bytes) -> None:
        """`put` without overwrite, raising CommitConflictError when the file exists."""
        if not self.put(rel, data):
            raise CommitConflictError(f"{self.display(rel)} exists already", version=-1)

    def list_dirs(self, prefix: str = "") -> list[str]:
        base = self._dir(prefix)
        try:
            with os.scandir(base) as entries:
                return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise StorageError(f"{self.display(prefix)}: cannot list ({exc.strerror})") from exc

    def make_dir(self, path: str) -> None:
        full = os.path.normpath(os.path.join(self._root_text, path))
        self._checked_dir(full, path)  # resolved (its existing part) and confined before anything is made
        os.makedirs(full, exist_ok=True)

    def delete(self, path: str) -> None:
        try:
            os.unlink(self._full(path))
        except FileNotFoundError:
            pass

    def place(self, source: Storage, key: str, into: str) -> str:
        """Put the file `key` of `source` at `into` here without writing its bytes again where
        the file system allows: a hard link ("link"), else a copy ("copy"); "present" when
        `into` holds the same file already. Both ends are confined: the source's file to its
        roots (links resolved), `into` to this storage's."""
        directory = os.path.dirname(os.path.normpath(os.path.join(self._root_text, into)))
        self._checked_dir(directory, into)  # confined before anything is made
        os.makedirs(directory, exist_ok=True)
        target = self._full(into)
        if not isinstance(source, LocalStorage):  # another store: its bytes come over once
            data = source.read(key)
            return "copy" if self.put(into, data) else self._present(target, len(data))
        real = source.local_file(key)
        try:
            os.link(real, target)
            return "link"
        except FileExistsError:
            return self._present(target, os.stat(real).st_size, real)
        except OSError as exc:
            # another device, a file system without hard links, or too many links to one file
            if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EACCES):
                raise StorageError(f"could not link {source.display(key)}: {exc.strerror}") from exc
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=directory)
        os.close(fd)
        try:
            shutil.copyfile(real, tmp)
            try:
                os.link(tmp, target)  # whole or not at all, never over another file
            except FileExistsError:
                return self._present(target, os.stat(real).st_size, real)
            return "copy"
        finally:
            os.unlink(tmp)

    def _present(self, target: str, size: int, real: str | None = None) -> str:
        """ "present" when `target` is the same file (or one of the same size: a copy made
        before); otherwise the key holds another file and nothing is replaced."""
        st = os.stat(target, follow_symlinks=False)
        if (real is not None and os.path.samefile(real, target)) or (stat.S_ISREG(st.st_mode) and st.st_size == size):
            return "present"
        raise StorageError(f"{self.shown(target)} exists already and holds another file; it was not replaced")

    def set_mtime(self, rel: str, millis: int) -> None:
        os.utime(self._full(rel), ns=(millis * 1_000_000, millis * 1_000_000))

    def uri(self, path: str = "") -> str:
        return Path(self._checked_file(path)).as_uri() if path else self.root.as_uri()

    def local_file_unchecked(self, path: str) -> str:
        """The local path of a key with its directory checked; the file itself may still be a
        symbolic link (for a check that runs elsewhere and resolves links itself)."""
        return self._full(path)

    def local_file(self, path: str) -> str:
        """The checked local path of a key (for engines that take paths, not URIs)."""
        return self._checked_file(path)

    def display(self, path: str = "") -> str:
        if not path:
            return self._root_text
        return os.path.join(self._root_text, path) if not os.path.isabs(path) else path
