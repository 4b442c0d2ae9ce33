"""The latest state's summary without its file list, replayed from JSON commits in plain Python.

`delta snapshot --no-files` prints the protocol, the metadata, the number and total size of the
live files, the set transactions and the domain metadata: nothing that needs the files as a
table. For a log of JSON commits alone (no checkpoint in the segment), replaying them line by
line with orjson and keeping one size per live file is faster, whole process, than the
columnar replay of snapshot.state: that needs pyarrow and numpy imported (a quarter of a second
of a cold process) and a hash of every path in a fresh process's untouched memory.

This path only ever answers what load_snapshot(...).summary(files=False) answers. On anything
it does not handle in exactly the same way (a checkpoint, a remote store, a managed table, a
line that is not a JSON object, a file action whose fields the columnar reader would type
differently or refuse, a missing protocol) it returns None and the caller runs the full load,
which answers or names the error as it always has.
"""

from __future__ import annotations

from typing import Any

import orjson

from tables.delta.log.listing import LogListing, build_segment
from tables.delta.log.model import (
    NON_FILE_ACTIONS,
    SKIP_PREFIXES,
    NonFileState,
    canonical_path,
    check_reader_protocol,
    dv_unique_id,
)
from tables.delta.managed.owner import managed_config
from tables.delta.storage.boundary import Storage

_I64 = (-(1 << 63), (1 << 63) - 1)
_I32 = (-(1 << 31), (1 << 31) - 1)
# the fields the columnar reader types, per file action: a value of another type (which it
# would refuse, or read otherwise) sends the table to the full load
_INT_FIELDS = {"add": ("size", "modificationTime"), "remove": ("size", "deletionTimestamp")}
_INT = frozenset({int})
_INT_OR_NONE = frozenset({int, type(None)})
_STR_OR_NONE = frozenset({str, type(None)})
_BOOL_OR_NONE = frozenset({bool, type(None)})


class _Unhandled(Exception):
    """Something this path leaves to the full load."""


def latest_summary(storage: Storage, listing: LogListing) -> dict[str, Any] | None:
    """Snapshot.summary(files=False) of the latest version in `listing`, or None when the
    full load must answer (see the module's docstring)."""
    if getattr(storage, "remote", False):
        return None  # the full load fetches a remote log's commits concurrently
    try:
        return _summary(storage, listing)
    except Exception:  # any surprise: the full load answers, or names the error
        return None


def _summary(storage: Storage, listing: LogListing) -> dict[str, Any] | None:
    segment = build_segment(storage, listing, None)
    if segment.checkpoint or not segment.commits:
        return None
    state = NonFileState()
    live: dict[str, int | None] = {}  # file identity -> size, of the live adds
    for commit in segment.commits:
        _replay_commit(storage.read(commit.path), commit.version, state, live)
    if state.protocol is None or state.metadata is None:
        return None
    check_reader_protocol(state.protocol, f"{storage.display()} at version {segment.version}")
    if managed_config(state.protocol, state.metadata, "") is not None:
        return None  # staleness warnings and the owner's view: the full load's
    sizes = live.values()
    if sizes and not (_INT.issuperset(map(type, sizes)) and _I64[0] <= min(sizes) and max(sizes) <= _I64[1]):
        return None  # a size that is null, not an integer or out of range: the full load's reading
    size = sum(sizes)
    if not _I64[0] <= size <= _I64[1]:
        return None
    return {
        "version": segment.version,
        "protocol": state.protocol.to_dict(),
        "metadata": state.metadata.summary(),
        "numFiles": len(live),
        "sizeBytes": size,
        "setTransactions": list(state.txns.values()),
        "domainMetadata": list(state.domains.values()),
    }


def _replay_commit(data: bytes, version: int, state: NonFileState, live: dict[str, int | None]) -> None:
    """One commit's actions in file order: the last action per file identity wins."""
    # one line per file action (hundreds of thousands): names bound once, and the usual add
    # checked inline, leaning on what raises by itself (a line that is not an object has no
    # .get, a path that is not a string no .startswith); sizes are checked once, at the end
    loads, ints, bools, strs, skip = orjson.loads, _INT_OR_NONE, _BOOL_OR_NONE, _STR_OR_NONE, SKIP_PREFIXES
    for line in data.split(b"\n"):
        if not line:
            continue
        obj = loads(line)  # not JSON (or a blank line of spaces): the full load names it
        add = obj.get("add")
        if add is not None:
            if add.get("deletionVector") is None and obj.get("remove") is None:
                path, values = add["path"], add.get("partitionValues")
                if (
                    type(add.get("modificationTime")) in ints
                    and type(add.get("dataChange")) in bools
                    and (values is None or strs.issuperset(map(type, values.values())))
                ):
                    live[canonical_path(path) if path.startswith("file:") else path] = add.get("size")
                    continue
            if obj.get("remove") is not None:
                raise _Unhandled
            live[_identity(add, "add")] = add.get("size")
            continue
        remove = obj.get("remove")
        if remove is not None:
            live.pop(_identity(remove, "remove"), None)
        elif not line.lstrip()[:16].startswith(skip):
            for name in NON_FILE_ACTIONS:
                body = obj.get(name)
                if isinstance(body, dict):
                    state.apply(version, name, body)


def _identity(body: Any, kind: str) -> str:
    """The file's identity as snapshot.replay keys it (canonical path [NUL dv unique id]),
    after checking every field the columnar reader types holds what it would read alike."""
    if type(body) is not dict:
        raise _Unhandled
    path = body.get("path")
    if type(path) is not str:
        raise _Unhandled
    for name in _INT_FIELDS[kind]:
        _check_int(body.get(name), _I64)
    if body.get("dataChange") is not None and type(body["dataChange"]) is not bool:
        raise _Unhandled
    values = body.get("partitionValues")
    if values is not None and (
        type(values) is not dict or any(v is not None and type(v) is not str for v in values.values())
    ):
        raise _Unhandled
    dv = body.get("deletionVector")
    if dv is None:
        return canonical_path(path)
    if type(dv) is not dict or type(dv.get("storageType")) is not str or type(dv.get("pathOrInlineDv")) is not str:
        raise _Unhandled
    _check_int(dv.get("offset"), _I32)
    _check_int(dv.get("sizeInBytes"), _I32)
    _check_int(dv.get("cardinality"), _I64)
    return f"{canonical_path(path)}\x00{dv_unique_id(dv)}"


def _check_int(value: Any, bounds: tuple[int, int]) -> None:
    if value is not None and (type(value) is not int or not bounds[0] <= value <= bounds[1]):
        raise _Unhandled
