"""The storage interface and its rules, apart from any implementation: the `Storage` protocol
every backend speaks, the optional `Capability`s a backend declares beyond it, `FileInfo`, and
the allowed roots every backend confines paths to (set
by the web app, else from the environment, else each table's own root)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol, runtime_checkable
from urllib.parse import unquote, urlparse

from tables.delta.errors import NotADeltaTableError, PathTooLongError

ROOTS_ENV = "DELTAWEB_ALLOWED_ROOTS"

# The longest path of a table's file, in bytes: Linux's PATH_MAX, and more than an object
# store's key (1,024 bytes on S3, GCS and Azure). A log naming a longer one is refused before
# the path is decoded, joined or opened: a 50 MB add path cost the web process 300 MB of copies
# on its way to the OS's "File name too long".
MAX_PATH_BYTES = 4096
# A URL-encoded character is 3 characters: a path as the log writes it is at most this long
MAX_LOG_PATH_CHARS = 3 * MAX_PATH_BYTES


def refuse_long_path(text: str, limit: int = MAX_PATH_BYTES, what: str = "a path the log names") -> None:
    """PathTooLongError when `text` is longer than `limit` bytes (UTF-8). A long text is not
    encoded whole to measure it: more characters than `limit` is enough to refuse."""
    n = len(text)
    if n * 4 <= limit:  # a UTF-8 character is at most 4 bytes
        return
    size = n if n > limit else len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise PathTooLongError(
            f"{what} is too long ({size:,} {'characters' if n > limit else 'bytes'}, {text[:60]!r}...): "
            f"no storage holds a path over {MAX_PATH_BYTES:,} bytes; it was not opened",
            file=text[:300],
            reason="path_too_long",
        )


@dataclass(frozen=True, slots=True)
class FileInfo:
    """A file under the table root: its path relative to the root, size and mtime (ms)."""

    path: str
    size: int
    modification_time: int


class Capability(StrEnum):
    """What a backend offers beyond the `Storage` protocol. Each backend lists its own in
    `capabilities`; a caller asks `Capability.X in storage.capabilities` before it calls the
    method named here, and takes the protocol's plain way otherwise."""

    # read_with_info(path) -> (bytes, FileInfo): the bytes and their size and time from one open
    READ_WITH_INFO = "read_with_info"
    # file_times(rel_dir, names) -> {name: (size, mtime ms)}: a stat per name, no listing
    FILE_TIMES = "file_times"
    # open_input(path) -> a seekable pyarrow file: a Parquet footer read in place, not the whole file
    OPEN_INPUT = "open_input"
    # place(source, key, into) -> "link" | "server-copy" | "copy" | "present": a file of another
    # storage put here without writing its bytes again where the two allow
    PLACE = "place"
    # store_options() -> the options (credentials included) another process builds the same store with
    STORE_OPTIONS = "store_options"
    # requests: int, the requests made so far (a sync's and a benchmark's report)
    REQUEST_COUNT = "requests"
    # open_file(path) -> a real file object, for a web server's sendfile
    OPEN_FILE = "open_file"
    # set_mtime(path, millis): a file's modification time set (a kept copy keeps its source's)
    SET_MTIME = "set_mtime"


@runtime_checkable
class Storage(Protocol):
    """A table root; paths are keys relative to it (or absolute locations `resolve` returned)."""

    location: str
    # whether a read costs a round trip (an object store): callers batch reads (read_many)
    # and never fetch a file at a time where they can avoid it
    remote: bool
    # the optional methods this backend has (see Capability)
    capabilities: frozenset[Capability]

    def list_from(self, prefix: str, start_after: str | None = None) -> Iterator[FileInfo]:
        """Files directly under the directory `prefix`, sorted by name, after `start_after`."""
        ...

    def read(self, path: str, range: tuple[int, int] | None = None) -> bytes:
        """The file's bytes, or `range` = (start, end) of them; FileNotFoundError when absent."""
        ...

    def head(self, path: str) -> FileInfo: ...

    def list_tree(self, prefix: str = "", exclude: tuple[str, ...] = ()) -> Iterator[str]:
        """Every file below `prefix` (recursively), as keys, in no order."""
        ...

    def put(self, path: str, data: bytes, overwrite: bool = False) -> bool:
        """Write whole or not at all; without `overwrite`, False when the file exists already."""
        ...

    def delete(self, path: str) -> None: ...

    def list_dirs(self, prefix: str = "") -> list[str]:
        """The names of the directories directly under `prefix` (an object store's common
        prefixes), sorted; a symbolic link is not followed (no loops, no escape)."""
        ...

    def make_dir(self, path: str) -> None:
        """The directory `path` exists afterwards, created with its parents where the storage
        has directories (an object store has none: nothing to do)."""
        ...

    def read_many(self, paths: list[str]) -> list[bytes]:
        """The bytes of every path, in order (an object store fetches them concurrently)."""
        ...

    def resolve(self, log_path: str) -> str:
        """The key of a path as a log names it (URL-encoded relative, absolute, or a URI);
        PathOutsideRootsError when it lies outside the allowed roots."""
        ...

    def uri(self, path: str = "") -> str:
        """A URI an engine (Spark, pyarrow) opens for a key `resolve` or a listing returned."""
        ...

    def display(self, path: str = "") -> str:
        """How messages name the table root or a file under it."""
        ...


# --- allowed roots ------------------------------------------------------------------------------

_roots_provider: Callable[[], Iterable[str]] | None = None


def roots_provider() -> Callable[[], Iterable[str]] | None:
    """The provider set_roots_provider installed (None: the environment, else each table's root)."""
    return _roots_provider


def set_roots_provider(provider: Callable[[], Iterable[str]] | None) -> None:
    """Where the allowed roots come from (the web app passes its setting, read at each open so
    a changed setting applies at once); None: the environment variable, else each table's
    own root (the command line, run by an operator on a table they name)."""
    global _roots_provider
    _roots_provider = provider


_options_provider: Callable[[str], dict[str, str] | None] | None = None


def options_provider() -> Callable[[str], dict[str, str] | None] | None:
    """The provider set_options_provider installed (None: the environment's variables only)."""
    return _options_provider


def set_options_provider(provider: Callable[[str], dict[str, str] | None] | None) -> None:
    """Where per-location storage options (credentials an administrator stored) come from: the
    web app installs a lookup by the location's longest matching prefix; None (the command
    line): only the environment's standard variables."""
    global _options_provider
    _options_provider = provider


def options_for(location: str) -> dict[str, str] | None:
    """The stored options of an object-store location, None when none apply (use the environment)."""
    return _options_provider(location) if _options_provider is not None else None


def allowed_roots() -> tuple[str, ...]:
    """The allowed roots: local ones resolved (symlinks and '..'), object-store prefixes
    (`s3://bucket/prefix`) as given, without a trailing slash."""
    if _roots_provider is not None:
        given = list(_roots_provider())
    else:
        given = [r.strip() for r in os.environ.get(ROOTS_ENV, "").split(",") if r.strip()]
    return tuple(str(r).strip().rstrip("/") if is_uri(str(r)) else os.path.realpath(local_path(str(r))) for r in given)


def is_uri(location: str | os.PathLike[str]) -> bool:
    """Whether a location names a storage scheme other than the local file system."""
    text = location if isinstance(location, str) else os.fspath(location)
    return "://" in text and not text.startswith("file:")


def is_under(real: str, roots: Iterable[str]) -> bool:
    """Whether the resolved path `real` is one of `roots` or lies below one."""
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


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
