"""Typed actions (Protocol, Metadata) and the JSON form of the log, read columnar.

Commit files are newline-delimited JSON with one action per line. At scale they are parsed
by pyarrow's JSON reader against an explicit schema that keeps only what replay needs; the
rare non-file actions (metaData, protocol, txn, domainMetadata) are re-read from their
lines with orjson, because their maps (configuration, options) do not fit that reader.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from tables.delta.errors import CorruptLogError
from tables.delta.log.jsonline import loads_line
from tables.delta.log.model import (  # noqa: F401 (re-exported: their home before log.model)
    NON_FILE_ACTIONS,
    SKIP_PREFIXES,
    Metadata,
    Protocol,
    dv_unique_id,
)

DV_TYPE = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
    ]
)


def empty_table(schema: pa.Schema) -> pa.Table:
    """A table of no rows: pyarrow's Schema.empty_table() imports pandas to build it, a
    quarter of a second of every `delta` command that met an empty batch."""
    return pa.Table.from_batches([], schema=schema)


def partition_type(keys: list[str]) -> pa.DataType:
    return pa.struct([(k, pa.string()) for k in keys])


def file_batch_schema(keys: list[str]) -> pa.Schema:
    """The columnar form every reader (commits, checkpoints, sidecars) produces for replay."""
    return pa.schema(
        [
            ("version", pa.int64()),
            ("seq", pa.int64()),  # order within the version's file(s)
            ("is_add", pa.bool_()),
            ("path", pa.string()),
            ("size", pa.int64()),
            ("modificationTime", pa.int64()),
            ("dataChange", pa.bool_()),
            ("deletionTimestamp", pa.int64()),
            ("partitionValues", partition_type(keys)),
            ("deletionVector", DV_TYPE),
        ]
    )


def _json_schema(keys: list[str], lean: bool = False) -> pa.Schema:
    """What pyarrow parses of each line. `lean`: adds without their deletion vector's
    fields and removes by path only, for a chunk that names no remove (a quarter less work
    than the full schema); the two stay in it, one field each, so that a deletion vector,
    or a remove the search missed (its key spelled with escapes), still shows and the chunk
    is parsed again in full."""
    pv = partition_type(keys)
    add = [
        ("path", pa.string()),
        ("partitionValues", pv),
        ("size", pa.int64()),
        ("modificationTime", pa.int64()),
        ("dataChange", pa.bool_()),
        ("deletionVector", _DV_PROBE if lean else DV_TYPE),
    ]
    if lean:
        return pa.schema([("add", pa.struct(add)), ("remove", _REMOVE_PROBE)])
    remove = pa.struct(
        [
            ("path", pa.string()),
            ("deletionTimestamp", pa.int64()),
            ("dataChange", pa.bool_()),
            ("partitionValues", pv),
            ("size", pa.int64()),
            ("deletionVector", DV_TYPE),
        ]
    )
    return pa.schema([("add", pa.struct(add)), ("remove", remove)])


_DV_PROBE = pa.struct([("storageType", pa.string())])
_REMOVE_PROBE = pa.struct([("path", pa.string())])


@dataclass(slots=True)
class ActionBatch:
    """Actions of a run of log files: file actions columnar, the others as dicts in order."""

    files: pa.Table
    others: list[tuple[int, str, dict[str, Any]]]  # (version, action name, body)


# Sources are (file name, version, content); content is bytes, or a read-only memory map for
# big files (anything with find/rfind/slicing/len and the buffer protocol).
Source = tuple[str, int, Any]


def parse_actions(data: bytes, name: str) -> list[tuple[str, dict[str, Any]]]:
    """(action name, body) of every action of one log file, in file order, one line at a time
    (for the few files read whole, not for replay); `name` goes into the error."""
    out = []
    for lineno, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        obj = loads_line(line, name, lineno)
        if isinstance(obj, dict):
            out.extend((k, v) for k, v in obj.items() if isinstance(v, dict))
    return out


def _nonblank_lines(data: Any) -> list[bytes]:
    return [line for line in bytes(data).split(b"\n") if line.strip()]


def _blank(data: Any) -> bool:
    return len(data) < (1 << 16) and not bytes(data).strip()


def _line_counts(datas: list[bytes], rows: int) -> list[int]:
    """Rows per file as pyarrow's reader produces them (it skips blank lines).

    Counting newlines is exact for well-formed files; only when the total disagrees with
    the reader's row count are the files split to count non-blank lines.
    """
    counts = [d.count(b"\n") + (0 if d.endswith(b"\n") else 1) if d else 0 for d in datas]
    if sum(counts) != rows:
        counts = [len(_nonblank_lines(d)) for d in datas]
    return counts


def _locate_error(sources: list[Source], fallback: str) -> CorruptLogError:
    """Find the first line that is not a JSON object, to name its file and line."""
    for name, _version, data in sources:
        for lineno, line in enumerate(bytes(data).split(b"\n"), start=1):
            if not line.strip():
                continue
            try:
                obj = loads_line(line, name, lineno)
            except CorruptLogError as exc:
                return exc
            if not isinstance(obj, dict):
                return CorruptLogError(f"{name}: line {lineno} is not a JSON object", file=name, line=lineno)
            for key in ("add", "remove"):
                body = obj.get(key)
                if body is not None and (not isinstance(body, dict) or not isinstance(body.get("path"), str)):
                    return CorruptLogError(f"{name}: line {lineno}: malformed '{key}' action", file=name, line=lineno)
    return CorruptLogError(f"{sources[0][0]}..{sources[-1][0]}: unreadable actions ({fallback})")


_CHUNK_BYTES = 16 << 20
# pyarrow's parse unit: 4 MB balanced the cores better than 8 or 16 MB on a 40 MB commit
_BLOCK_BYTES = 4 << 20


def _parse(buf: Any, keys: list[str], sources: list[Source]) -> pa.Table:
    if _lean_enough(buf):
        table = _parse_with(buf, _json_schema(keys, lean=True), sources)
        if not _probed_out(table):
            return table
    return _parse_with(buf, _json_schema(keys), sources)


def _lean_enough(buf: Any) -> bool:
    """No remove named in the chunk: a search that stops at the first one, so a commit with
    removes is told at once. Deletion vectors are left to the probe (searching 40 MB costs
    15-25 ms, and holds the interpreter): an add with one and no remove beside it is rare."""
    find = buf.find if hasattr(buf, "find") else bytes(buf).find
    return find(b'"remove"') < 0


def _probed_out(table: pa.Table) -> bool:
    """A lean parse met a remove or a deletion vector after all (a key spelled with escapes)."""
    if table.column("remove").null_count != table.num_rows:
        return True
    add = table.column("add")
    has_dv = pc.and_(add.is_valid(), pc.struct_field(add, "deletionVector").is_valid())
    return bool(pc.any(has_dv).as_py())


def _parse_with(buf: Any, schema: pa.Schema, sources: list[Source]) -> pa.Table:
    opts = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    for block in (_BLOCK_BYTES, len(buf) + 1):
        try:
            return pj.read_json(
                pa.BufferReader(pa.py_buffer(buf)), read_options=pj.ReadOptions(block_size=block), parse_options=opts
            )
        except pa.ArrowInvalid as exc:
            if "straddling" in str(exc) or "block size" in str(exc).lower():
                continue
            raise _locate_error(sources, str(exc).splitlines()[0]) from exc
    raise _locate_error(sources, "a line larger than the whole input")


def _chunks(sources: list[Source]) -> list[list[Source]]:
    """Group small consecutive files so that a log of many small commits costs few parses;
    a big file is a chunk of its own (parsed in place, never copied)."""
    out: list[list[Source]] = []
    size = 0
    for src in sources:
        n, mapped = len(src[2]), not isinstance(src[2], bytes)
        if not out or mapped or size + n > _CHUNK_BYTES:
            out.append([])
            size = 0
        out[-1].append(src)
        size = _CHUNK_BYTES if mapped else size + n  # nothing joins a mapped file's chunk
    return out


def _parse_chunk(chunk: list[Source], keys: list[str]) -> tuple[pa.Table, list[int]]:
    """A chunk's actions and how many rows each of its files gave."""
    if len(chunk) == 1:
        table = _parse(chunk[0][2], keys, chunk)
        return table, [table.num_rows]
    datas = [d if not d or d.endswith(b"\n") else d + b"\n" for _n, _v, d in chunk]
    table = _parse(b"".join(datas), keys, chunk)
    return table, _line_counts(datas, table.num_rows)


_PARSERS = 4  # chunks parsed at once


def _parsed(chunks: list[list[Source]], keys: list[str]) -> list[tuple[pa.Table, list[int]]]:
    """Every chunk parsed, in order. Several at once: pyarrow splits one chunk into blocks
    across the cores but waits for a chunk's last block before the next chunk starts, and
    the parser releases the interpreter, so chunks side by side keep every core busy (three
    40 MB commits: 0.74 -> 0.65 s). The first chunk that fails, in order, raises."""
    if len(chunks) < 2:
        return [_parse_chunk(c, keys) for c in chunks]
    with ThreadPoolExecutor(min(len(chunks), _PARSERS), thread_name_prefix="json-actions") as pool:
        return list(pool.map(lambda c: _parse_chunk(c, keys), chunks))


def read_json_actions(sources: list[Source], keys: list[str]) -> ActionBatch:
    """Parse JSON log files given as (name, version, content) into one ActionBatch.

    Files are parsed in chunks by pyarrow against a schema of add and remove only; each
    row's version comes from the per-file row counts of its chunk. Rows that are neither
    (commitInfo, metaData, protocol, txn, ...) are few and re-read from their lines.
    """
    schema = file_batch_schema(keys)
    tables, others = [], []
    chunks = [c for c in _chunks(sources) if not all(_blank(d) for _n, _v, d in c)]  # empty commits: no actions
    for chunk, (table, counts) in zip(chunks, _parsed(chunks, keys), strict=True):
        if sum(counts) != table.num_rows:
            raise _locate_error(chunk, "line count mismatch")
        versions = np.repeat(np.array([v for _n, v, _d in chunk], dtype=np.int64), counts)
        add_valid = table.column("add").is_valid()
        remove_valid = table.column("remove").is_valid()
        tables.append(_file_rows(table, versions, schema, add_valid, remove_valid))
        neither = pc.invert(pc.or_(add_valid, remove_valid))
        others.extend(_other_actions(np.flatnonzero(bool_mask(neither)), chunk, counts))
    if not tables:
        return ActionBatch(empty_table(schema), [])
    return ActionBatch(pa.concat_tables(tables) if len(tables) > 1 else tables[0], others)


_SKIP_PREFIXES = SKIP_PREFIXES
_WALK_LIMIT = 64  # rows per file located by walking from an end; more and the file is split


def _nth_line(data: Any, k: int, total: int) -> bytes | None:
    """The k-th non-blank line (0-based) of `total`, walking from the nearer end."""
    if k < total - k:
        pos, seen = 0, -1
        while pos <= len(data):
            end = data.find(b"\n", pos)
            end = len(data) if end == -1 else end
            line = data[pos:end]
            if line.strip():
                seen += 1
                if seen == k:
                    return line
            pos = end + 1
        return None
    end, seen = len(data), -1
    target = total - 1 - k
    while end >= 0:
        start = data.rfind(b"\n", 0, end) + 1
        line = data[start:end]
        if line.strip():
            seen += 1
            if seen == target:
                return line
        end = start - 1
    return None


def _other_actions(rows: np.ndarray, chunk: list[Source], counts: list[int]) -> list[tuple[int, str, dict[str, Any]]]:
    """Non-file actions of the rows that hold neither an add nor a remove, in file order."""
    out: list[tuple[int, str, dict[str, Any]]] = []
    if not len(rows):
        return out
    starts = np.concatenate([[0], np.cumsum(counts)])
    files = np.searchsorted(starts, rows, side="right") - 1
    # the distinct file numbers of a sorted array by hand: np.unique imports numpy.ma (30-60 ms
    # of a cold `delta snapshot`) to ask whether its input is masked
    for fi in files[np.flatnonzero(np.diff(files, prepend=-1))]:
        name, version, data = chunk[fi]
        local = rows[files == fi] - starts[fi]
        if len(local) > _WALK_LIMIT or len(data) < (1 << 20):
            lines = _nonblank_lines(data)
            picked = [lines[k] for k in local]
        else:
            picked = [_nth_line(data, int(k), counts[fi]) for k in local]
        for k, line in zip(local, picked, strict=True):
            if line is None or line.lstrip()[:16].startswith(_SKIP_PREFIXES):
                continue
            try:
                obj = loads_line(line, name)
            except CorruptLogError:
                # pyarrow took the line (it skips what its schema leaves out, however deep); the
                # line's number is counted only on the way to the error, decoding it again raises
                obj = loads_line(line, name, _line_number(data, int(k)))
            if isinstance(obj, dict):
                out.extend((version, n, obj[n]) for n in NON_FILE_ACTIONS if isinstance(obj.get(n), dict))
    return out


def _line_number(data: Any, k: int) -> int | None:
    """The 1-based line number of the k-th non-blank line (0-based) of a file."""
    seen = -1
    for lineno, line in enumerate(bytes(data).split(b"\n"), start=1):
        if line.strip():
            seen += 1
            if seen == k:
                return lineno
    return None


def int64_array(values: np.ndarray) -> pa.Array:
    """An int64 Arrow array over a numpy array's memory (zero-copy).

    pa.array(ndarray) would do, but its first call imports numpy.ma (30-60 ms of a cold
    `delta snapshot`, more than the rest of a checkpoint's replay)."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def bool_array(mask: np.ndarray) -> pa.Array:
    """A boolean Arrow array of a numpy mask (bit-packed; see int64_array for why not pa.array)."""
    bits = np.packbits(np.asarray(mask, dtype=bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(mask), [None, pa.py_buffer(bits)])


def bool_mask(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A numpy mask of a boolean Arrow array, a null as False (its bits unpacked:
    Array.to_numpy copies a boolean array through pandas' conversion, importing pandas)."""
    if isinstance(arr, pa.ChunkedArray):
        return np.concatenate([bool_mask(c) for c in arr.chunks]) if arr.num_chunks else np.zeros(0, bool)
    n, off = len(arr), arr.offset
    validity, data = arr.buffers()[:2]

    def unpack(buf: pa.Buffer) -> np.ndarray:
        return np.unpackbits(np.frombuffer(buf, np.uint8), count=off + n, bitorder="little")[off:].astype(bool)

    mask = unpack(data) if n else np.zeros(0, bool)
    if validity is not None and arr.null_count:
        mask &= unpack(validity)
    return mask


def true_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) runs of True in a boolean mask."""
    edges = np.flatnonzero(np.diff(np.concatenate([[False], mask, [False]]).astype(np.int8)))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))


def chunk_slices(col: pa.ChunkedArray, runs: list[tuple[int, int]]) -> list[tuple[pa.Array, np.ndarray]]:
    """Zero-copy slices of the chunks of `col` covering `runs`, with their row numbers."""
    out = []
    offset = 0
    for chunk in col.chunks:
        lo, hi = offset, offset + len(chunk)
        for a, b in runs:
            s, e = max(a, lo), min(b, hi)
            if s < e:
                out.append((chunk.slice(s - lo, e - s), np.arange(s, e)))
        offset = hi
    return out


def _file_rows(
    table: pa.Table, versions: np.ndarray, schema: pa.Schema, add_valid: pa.Array, remove_valid: pa.Array
) -> pa.Table:
    """Stack the add and remove structs of a parsed table into the file batch schema.

    Actions of one kind usually come in a few long runs, taken as zero-copy slices.
    """
    parts = []
    for kind, valid in (("add", add_valid), ("remove", remove_valid)):
        mask = bool_mask(valid)
        runs = true_runs(mask)
        if not runs:
            continue
        col = table.column(kind)
        if len(runs) <= 16:
            pieces = chunk_slices(col, runs)
        else:
            pieces = [(col.filter(valid).combine_chunks(), np.flatnonzero(mask))]
        for sub, idx in pieces:
            n = len(sub)
            fields = {f.name: sub.field(f.name) for f in sub.type}
            null_i64 = pa.nulls(n, pa.int64())
            parts.append(
                pa.table(
                    {
                        "version": int64_array(versions[idx]),
                        "seq": int64_array(idx),  # row within the chunk
                        "is_add": bool_array(np.full(n, kind == "add")),
                        "path": fields["path"],
                        "size": fields["size"],
                        "modificationTime": fields.get("modificationTime", null_i64),
                        "dataChange": fields["dataChange"],
                        "deletionTimestamp": fields.get("deletionTimestamp", null_i64),
                        "partitionValues": fields["partitionValues"],
                        # a lean parse's probe is all null (or the chunk was parsed again in full)
                        "deletionVector": dv
                        if (dv := fields["deletionVector"]).type == DV_TYPE
                        else pa.nulls(n, DV_TYPE),
                    },
                    schema=schema,
                )
            )
    if not parts:
        return empty_table(schema)
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]
