"""Opening a location: the one place that picks a storage implementation by the location's
scheme (`open_storage`, `as_storage`), and what is known of a location before or across
storages: the table a location lies inside, its canonical form, whether two name the same
table, and a file put from one storage into another (`place_file`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tables.delta.storage.api import Capability, Storage, is_uri, local_path, options_for
from tables.delta.storage.local import LocalStorage, resolved


def open_storage(location: str | os.PathLike[str], options: dict[str, Any] | None = None) -> Storage:
    """Storage for a table location; the one place that picks an implementation: an object
    store for s3://, s3a://, gs://, az://, abfs(s):// (with `options`, or else the options the
    installed provider stores for the location, over the environment's credentials), else the local file system (which refuses other schemes)."""
    text = os.fspath(location)
    if is_uri(text):
        from tables.delta.storage.objectstore import ObjectStoreStorage, is_object_location

        if is_object_location(text):
            return ObjectStoreStorage(text, options=options if options is not None else options_for(text))
    return LocalStorage(location)


def as_storage(location: Storage | str | os.PathLike[str]) -> Storage:
    """A storage given one already, or opened for a location."""
    return open_storage(location) if isinstance(location, (str, os.PathLike)) else location


def place_file(source: Storage, key: str, dest: Storage, into: str) -> str:
    """Put the file `key` of `source` at `into` in `dest` the cheapest way the two allow: a
    hard link ("link"), a server-side copy ("server-copy"), else its bytes read and written
    once ("copy"); "present" when `into` holds it already. Both ends confined."""
    if Capability.PLACE in dest.capabilities:
        return dest.place(source, key, into)
    return "copy" if dest.put(into, source.read(key)) else "present"


def same_table(a: Storage | str, b: Storage | str) -> bool:
    """Whether two locations name the same table root."""
    return as_storage(a).display() == as_storage(b).display()


LOG_DIR_NAME = "_delta_log"


def _local_table_around(location: str, itself: bool) -> str | None:
    # both where its symbolic links lead (the writes land there) and the path as written, with
    # '..' taken away (a reader may list a table through a link)
    raw = os.path.abspath(local_path(location))
    real = resolved(raw)
    for path in dict.fromkeys(p for p in (real, raw) if p):
        for parent in [Path(path)][: int(itself)] + list(Path(path).parents):
            try:
                if os.path.isdir(os.path.join(parent, LOG_DIR_NAME)):
                    return str(parent)
            except (OSError, ValueError):
                continue
    return None


def _object_table_around(location: str, options: dict[str, Any] | None, itself: bool) -> str | None:
    from tables.delta.storage.objectstore import ObjectStoreStorage
    from tables.delta.storage.objectstore_config import parse_location

    loc = parse_location(location)
    parts = loc.prefix.split("/") if loc.prefix else []
    opts = options if options is not None else options_for(location)
    for n in range(len(parts) - (0 if itself else 1), -1, -1):  # the nearest prefix first, the bucket's root last
        above = loc.uri("/".join(parts[:n]))
        storage = ObjectStoreStorage(above, roots=(above,), options=opts)
        if storage.is_dir(LOG_DIR_NAME):  # one listing of `<prefix>/_delta_log/` each
            return above
    return None


def table_around(
    location: str | os.PathLike[str], options: dict[str, Any] | None = None, itself: bool = False
) -> str | None:
    """The Delta table a location lies inside, or None: the nearest directory (object-store
    prefix) above it (with `itself`, the location too) that holds a `_delta_log`, whether any catalog knows the table or
    not. A local location is looked at as written (its '..' taken away) and with its symbolic
    links resolved; an object-store location by one listing per prefix above it, up to its
    bucket. Whatever is written there, that table's VACUUM would count as its own to delete."""
    text = os.fspath(location)
    if is_uri(text):
        from tables.delta.storage.objectstore import is_object_location

        if is_object_location(text):
            return _object_table_around(text, options, itself)
    return _local_table_around(text, itself)


def canonical(location: str | os.PathLike[str]) -> str:
    """A location as confinement compares it: a local one absolute with its symbolic links and
    '..' resolved, an object-store one as its canonical prefix URI (no trailing slash)."""
    text = os.fspath(location)
    if is_uri(text):
        from tables.delta.storage.objectstore import is_object_location
        from tables.delta.storage.objectstore_config import parse_location

        if is_object_location(text):
            return parse_location(text).root
    raw = os.path.abspath(local_path(text))
    return resolved(raw) or raw
