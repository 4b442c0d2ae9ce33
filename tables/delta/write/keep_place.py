"""Where a kept version may be written: never inside a Delta table (registered or not: its
VACUUM would delete the kept files), never at an allowed root's top (the kept table would hold
every table under it); and the pin store's own rule (`check_pin_store`), which the web app
applies when it starts and before each pin it writes. Light on purpose (no pyarrow): the app's
start imports it. Pure: no Django, no Spark.
"""

from __future__ import annotations

from tables.delta.errors import KeepAtRootError, KeepInsideTableError, ObjectStoreAccessError, PinStoreRefusedError
from tables.delta.storage.api import allowed_roots, is_uri
from tables.delta.storage.opening import canonical, table_around

# where no pin store may be: the root and the operating system's own trees
SYSTEM_DIRS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run",
               "/sbin", "/sys", "/usr", "/var/lib/dpkg", "/var/run", "/var/lock")  # fmt: skip


def _holds(outer: str, inner: str) -> bool:
    """Whether canonical location `inner` is `outer` or lies below it."""
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def _table_around(location: str, itself: bool = False) -> str | None:
    try:
        return table_around(location, itself=itself)
    except ObjectStoreAccessError:
        # credentials limited to a prefix may not list the ones above it: nothing can be
        # said of them (a table there could not be written into with them either)
        return None


def check_keep_place(location: str, roots: list[str] | tuple[str, ...] | None = None) -> None:
    """Refuse a kept table's location that lies inside a Delta table (a `_delta_log` in one of
    its ancestors, as written or after its symbolic links and '..'; registered anywhere or not:
    its VACUUM would delete the kept files), or that is an allowed root itself or holds one
    (`roots`, default the storage's allowed roots; none on a command line without them)."""
    where = canonical(location)
    for root in allowed_roots() if roots is None else roots:
        if _holds(where, canonical(root)):
            raise KeepAtRootError(
                f"{location} is an allowed root (or holds one): a kept table there would hold every table under "
                f"it; choose a new folder below the root, beside the tables"
            )
    table = _table_around(location)
    if table is not None:
        raise KeepInsideTableError(
            f"{location} lies inside the Delta table {table}: its VACUUM would delete what is kept there; "
            f"choose a location outside every table"
        )


def check_pin_store(store: str, roots: list[str] | tuple[str, ...], look: bool = True) -> None:
    """The pin store's rule (PinStoreRefusedError): not a system directory (`/`, /etc, /usr,
    ...), not one of the tables' allowed `roots` nor a directory holding one (it would widen
    what the app may read to everything around them), and not inside a Delta table, nor one
    itself (its VACUUM would delete the kept versions). A directory inside an allowed root,
    beside the tables, or anywhere else the app may write is fine. Without `look`, an
    object-store store is judged by its name alone (no request: a process's start)."""
    where = canonical(store)
    fix = "set DELTAWEB_PIN_STORE to a directory of its own (such as the app's var/pins), outside every table"
    if not is_uri(store) and (where == "/" or any(_holds(d, where) for d in SYSTEM_DIRS)):
        raise PinStoreRefusedError(f"the pin store {store} is a system directory; {fix}", why="a system directory")
    for root in roots:
        if _holds(where, canonical(root)):
            raise PinStoreRefusedError(
                f"the pin store {store} is an allowed root (or holds one); {fix}", why="an allowed root (or holds one)"
            )
    table = _table_around(store, itself=True) if look or not is_uri(store) else None
    if table is not None:
        raise PinStoreRefusedError(
            f"the pin store {store} lies inside the Delta table {table}; {fix}", why="inside a Delta table"
        )
