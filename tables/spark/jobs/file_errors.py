"""A data file a job cannot read, named: which version, which file (relative to the table) and
what to do, instead of the reader's own words ("ArrowInvalid: Parquet magic bytes not found").

The readers fail in their own ways: pyarrow reading a footer on the driver, the storage
finding a file gone, Spark's executors (their Java exception names the file's URI). Each is
mapped here to one of three cases, the file found in the failure or given by the caller:
- missing: the file is gone (FileNotFound);
- truncated: it begins as Parquet (`PAR1`) but its end, the footer, is missing;
- not Parquet: neither its head nor its tail is Parquet's magic bytes.
Anything else is left as it was raised.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import unquote, urlparse

from tables.delta.errors import StorageError
from tables.delta.storage.api import Storage

MAGIC = b"PAR1"
FIX = "Restore it from a backup or restore the table to a version that does not use it."
MAX_NAME = 300  # a path from the log is hostile input: bounded in a message

_MISSING = ("FileNotFoundException", "Path does not exist", "No such file", "data file(s) are missing")
_NOT_PARQUET = (
    "magic bytes not found",
    "is not a Parquet file",
    "Expected magic number",
    "Could not read footer",
    "Parquet file size is",  # "... 7 bytes, smaller than the minimum file footer", "... 0 bytes"
    "Couldn't deserialize thrift",
    "CorruptedParquet",
    "ParquetDecodingException",
)
# a file's URI or path as Spark and pyarrow write it in their messages
_PATH = re.compile(
    r"""
    (?<![^\s'"\[\],;()])     # from a token's start, never from inside one ("o2546" -> "2546")
    (?!o\d+\.\w+\b(?!/))     # never py4j's call name: "calling o2546.parquet." names no file
    ((?:file:|[a-z0-9]+://)?/?[^\s'"\[\],;()]+\.parquet)
    """,
    re.IGNORECASE | re.VERBOSE,
)


class DataFileError(StorageError):
    """A data file of a version that cannot be read: `file` relative to the table."""

    code = "data_file_unreadable"


class MissingDataFileError(DataFileError):
    code = "data_file_missing"


def _root_forms(storage: Storage) -> list[str]:
    root = storage.display().rstrip("/")
    forms = {root}
    if root.startswith("file://"):
        root = root[len("file://") :]
    if root.startswith("/"):
        forms |= {root, "file:" + root, "file://" + root, os.path.realpath(root)}
    return sorted(forms, key=len, reverse=True)


def relative(storage: Storage, path: str) -> str:
    """`path` (the log's, a local path or a URI) relative to the table when it lies inside it,
    bounded; else as given (bounded), never longer than MAX_NAME."""
    text = unquote(str(path))
    if "://" not in text and not text.startswith(("/", "file:")):
        return text[:MAX_NAME]  # the log's own relative path
    plain = urlparse(text).path if text.startswith("file:") else text
    for form in _root_forms(storage):
        for candidate in (text, plain, os.path.normpath(plain) if plain.startswith("/") else plain):
            if candidate.startswith(form + "/"):
                return candidate[len(form) + 1 :][:MAX_NAME]
    return text[:MAX_NAME]


def _kind(exc: BaseException) -> str | None:
    text = str(exc)
    if isinstance(exc, FileNotFoundError) or any(n.lower() in text.lower() for n in _MISSING):
        return "missing"
    if any(n.lower() in text.lower() for n in _NOT_PARQUET):
        return "unreadable"
    return None


def _file_in(exc: BaseException) -> str | None:
    files = getattr(exc, "details", {}).get("files") if hasattr(exc, "details") else None
    if files:
        return str(files[0])
    found = _PATH.search(str(exc))
    return found.group(1) if found else None


def _head(storage: Storage, name: str) -> bytes | None:
    """The first bytes of the file `name` (relative to the table), read through the storage;
    None when it cannot be read (then not told apart)."""
    if name.startswith("/") or "://" in name or name.startswith(".."):
        return None  # not inside the table: not opened
    try:
        return storage.read(storage.resolve(name), range=(0, len(MAGIC)))
    except Exception:  # a file that cannot be opened is judged by the reader's words alone
        return None


def named(
    exc: BaseException, storage: Storage, version: int, action: str, file: str | None = None
) -> DataFileError | None:
    """The failure `exc` of reading `version` as a DataFileError naming the file (`file`, or
    the one the failure names) and the fix; None when it is no data file's failure."""
    if isinstance(exc, DataFileError):
        return exc
    kind = _kind(exc)
    if kind is None:
        return None
    path = file or _file_in(exc)
    name = relative(storage, path) if path else ""
    if name.startswith("/") or "://" in name or name.startswith(("file:", "..")):
        path, name = None, ""  # not inside the table (a spooled copy of an object's): not named
    more = ""
    files = getattr(exc, "details", {}).get("files") if hasattr(exc, "details") else None
    if files and len(files) > 1:
        more = f" (and {len(files) - 1} more)"
    what = f"data file {name}{more}" if path else "a data file"
    start = f"Version {version} cannot be {action}: {what}"
    if kind == "missing":
        return MissingDataFileError(
            f"{start} is missing (FileNotFound: removed by VACUUM or by hand?). {FIX}",
            file=name,
            version=version,
        )
    head = _head(storage, name) if path else None
    if head == MAGIC:
        why = "is truncated (it begins as Parquet but its footer is missing)"
    else:
        why = "is not a valid Parquet file (magic bytes not found)"
    return DataFileError(f"{start} {why}. {FIX}", file=name, version=version)


@contextmanager
def files_named(storage: Storage, version: int, action: str) -> Iterator[None]:
    """A data file's failure inside the block raised as a DataFileError (see `named`)."""
    try:
        yield
    except Exception as exc:
        mapped = named(exc, storage, version, action)
        if mapped is None or mapped is exc:
            raise
        raise mapped from exc
