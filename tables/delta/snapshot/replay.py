"""State reconstruction (the seed's in-memory log replay), columnar.

Rules: the latest protocol and metaData win; txn by appId; domainMetadata by domain
(removed=true deletes it); for file actions the last action per identity wins, where a
file's identity is its canonical path plus its deletion vector's unique id: an add makes it
active, a remove leaves a tombstone. commitInfo and cdc do not change state.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tables.delta.log.actions import dv_unique_id, empty_table, int64_array
from tables.delta.log.model import FILE_URI as _FILE_URI
from tables.delta.log.model import (  # noqa: F401 (re-exported: their home before log.model)
    NonFileState,
    canonical_path,
)


def dv_id_column(dv: pa.Array) -> pa.Array:
    """storageType || pathOrInlineDv || ('@' || offset), null without a deletion vector."""
    base = pc.binary_join_element_wise(dv.field("storageType"), dv.field("pathOrInlineDv"), "")
    offset = dv.field("offset")
    with_offset = pc.binary_join_element_wise(base, pc.cast(offset, pa.string()), "@")
    out = pc.if_else(pc.is_valid(offset), with_offset, base)
    return pc.if_else(pc.is_valid(dv), out, pa.scalar(None, pa.string()))


def canonical_paths(path: pa.Array) -> pa.Array:
    """`file:/x`, `file:///x` and `/x` name the same file (Delta Lake canonicalizes them)."""
    if not pc.any(pc.starts_with(path, "file:")).as_py():
        return path
    return pc.replace_substring_regex(path, _FILE_URI, "/")


def action_identity(body: dict[str, Any]) -> str:
    """The key identity_keys gives the same file: canonical path [NUL dv unique id]."""
    path = canonical_path(body["path"])
    dv = dv_unique_id(body.get("deletionVector"))
    return path if dv is None else f"{path}\x00{dv}"


def identity_keys(files: pa.Table, contiguous: bool = True) -> pa.Array | pa.ChunkedArray:
    """path, or path NUL dv-id for files with a deletion vector: the same key in any batch.

    `contiguous`: one array (hashing a chunked column for uniqueness or group_by costs up to
    4x more); without it, a table without deletion vectors keeps its chunks (no copy of every
    path, for a lookup with is_in)."""
    path = canonical_paths(files.column("path"))
    dvs = files.column("deletionVector")
    if not contiguous and dvs.null_count == len(dvs):
        return path
    path = path.combine_chunks() if isinstance(path, pa.ChunkedArray) else path
    dv = dvs.combine_chunks()
    if dv.null_count == len(dv):
        return path
    return pc.if_else(pc.is_valid(dv), pc.binary_join_element_wise(path, dv_id_column(dv), "\x00"), path)


def reconcile_files(files: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(active adds, tombstones) from file actions: checkpoint rows (seq -1) first, then
    commit rows in any order (sorted here by version, seq).

    A checkpoint holds one action per file, so its rows need no reconciliation among
    themselves: only the identities the later commits touch are looked up in it.
    """
    if files.num_rows == 0:
        return files, files
    seq = files.column("seq").to_numpy()
    cp_rows = int(np.argmax(seq != -1)) if (seq != -1).any() else len(seq)
    if cp_rows:
        base, rest = files.slice(0, cp_rows), files.slice(cp_rows)
        if rest.num_rows == 0:
            return _split_by_kind(base)
        rest_adds, rest_tombs = _reconcile_commits(rest)
        touched = pc.is_in(
            identity_keys(base, contiguous=False), value_set=pa.chunked_array([identity_keys(rest)]).combine_chunks()
        )
        kept = base.filter(pc.invert(touched)) if pc.any(touched).as_py() else base
        kept_adds, kept_tombs = _split_by_kind(kept)
        return pa.concat_tables([kept_adds, rest_adds]), pa.concat_tables([kept_tombs, rest_tombs])
    return _reconcile_commits(files)


def _split_by_kind(files: pa.Table) -> tuple[pa.Table, pa.Table]:
    is_add = files.column("is_add")
    if pc.all(is_add).as_py():
        return files, empty_table(files.schema)
    return files.filter(is_add), files.filter(pc.invert(is_add))


def _reconcile_commits(files: pa.Table) -> tuple[pa.Table, pa.Table]:
    """The last action per identity wins; ties cannot happen within one version."""
    if not _in_order(files):
        files = files.take(pc.sort_indices(files, sort_keys=[("version", "ascending"), ("seq", "ascending")]))
    all_adds = pc.all(files.column("is_add")).as_py()
    if files.num_rows > _SMALL and all_adds and _all_unique(identity_keys(files, contiguous=False)):
        return files, empty_table(files.schema)
    keys = identity_keys(files)
    if files.num_rows <= _SMALL:
        # a few commits after a checkpoint: a dict beats starting a group_by (10-20 ms cold)
        last = {k: i for i, k in enumerate(keys.to_pylist())}
        if all_adds and len(last) == files.num_rows:
            return files, empty_table(files.schema)
        winners = np.sort(np.fromiter(last.values(), dtype=np.int64, count=len(last)))
        return _split_by_kind(files.take(int64_array(winners)))
    last_t = (
        pa.table({"k": keys, "i": int64_array(np.arange(files.num_rows))})
        .group_by("k", use_threads=False)
        .aggregate([("i", "max")])
    )
    winners = np.sort(last_t.column("i_max").to_numpy())
    return _split_by_kind(files.take(int64_array(winners)))


_SMALL = 20_000  # file actions reconciled with a dict rather than a group_by


def _in_order(files: pa.Table) -> bool:
    if files.num_rows < 2:
        return True
    v = files.column("version").to_numpy()
    s = files.column("seq").to_numpy()
    return bool(np.all((v[1:] > v[:-1]) | ((v[1:] == v[:-1]) & (s[1:] > s[:-1]))))


def _all_unique(keys: pa.Array | pa.ChunkedArray) -> bool:
    """Whether no key repeats (a null counts as one key, as pc.unique counts it).

    A set of the keys as Python strings, chunk by chunk: in a fresh process (the `delta`
    command) this costs half of pc.unique on 300,000 paths, whose hash table and output land
    in memory the process never touched, after a copy of every path to combine the chunks."""
    seen: set[str | None] = set()
    for chunk in keys.chunks if isinstance(keys, pa.ChunkedArray) else (keys,):
        seen.update(chunk.to_pylist())
    return len(seen) == len(keys)
