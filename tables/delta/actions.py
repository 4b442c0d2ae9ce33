"""Typed actions (Protocol, Metadata) and the JSON form of the log, read columnar.

Commit files are newline-delimited JSON with one action per line. At scale they are parsed
by pyarrow's JSON reader against an explicit schema that keeps only what replay needs; the
rare non-file actions (metaData, protocol, txn, domainMetadata) are re-read from their
lines with orjson, because their maps (configuration, options) do not fit that reader.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.json as pj

from .errors import CorruptLogError

DV_TYPE = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
    ]
)

NON_FILE_ACTIONS = ("metaData", "protocol", "txn", "domainMetadata", "sidecar", "checkpointMetadata")
# one field of each non-file action, enough for the JSON reader to say which rows hold one
_PROBES = {
    "metaData": "id",
    "protocol": "minReaderVersion",
    "txn": "appId",
    "domainMetadata": "domain",
    "sidecar": "path",
    "checkpointMetadata": "version",
}


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


def _json_schema(keys: list[str]) -> pa.Schema:
    pv = partition_type(keys)
    add = pa.struct(
        [
            ("path", pa.string()),
            ("partitionValues", pv),
            ("size", pa.int64()),
            ("modificationTime", pa.int64()),
            ("dataChange", pa.bool_()),
            ("deletionVector", DV_TYPE),
        ]
    )
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
    probes = [
        (name, pa.struct([(f, pa.int64() if f in ("minReaderVersion", "version") else pa.string())]))
        for name, f in _PROBES.items()
    ]
    return pa.schema([("add", add), ("remove", remove), *probes])


@dataclass(frozen=True, slots=True)
class Protocol:
    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Protocol:
        rf, wf = d.get("readerFeatures"), d.get("writerFeatures")
        return cls(
            int(d.get("minReaderVersion") or 1),
            int(d.get("minWriterVersion") or 2),
            tuple(rf) if rf is not None else None,
            tuple(wf) if wf is not None else None,
        )

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"minReaderVersion": self.min_reader_version, "minWriterVersion": self.min_writer_version}
        if self.reader_features is not None:
            d["readerFeatures"] = list(self.reader_features)
        if self.writer_features is not None:
            d["writerFeatures"] = list(self.writer_features)
        return d

    def has_writer_feature(self, name: str) -> bool:
        return self.min_writer_version >= 7 and name in (self.writer_features or ())


@dataclass(frozen=True, slots=True)
class Metadata:
    id: str
    name: str | None
    description: str | None
    format: dict[str, Any]
    schema_string: str
    partition_columns: tuple[str, ...]
    configuration: dict[str, str] = field(default_factory=dict)
    created_time: int | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Metadata:
        return cls(
            id=d.get("id") or "",
            name=d.get("name"),
            description=d.get("description"),
            format=d.get("format") or {"provider": "parquet", "options": {}},
            schema_string=d.get("schemaString") or '{"type":"struct","fields":[]}',
            partition_columns=tuple(d.get("partitionColumns") or ()),
            configuration=dict(d.get("configuration") or {}),
            created_time=d.get("createdTime"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "format": self.format,
            "schemaString": self.schema_string,
            "partitionColumns": list(self.partition_columns),
            "configuration": self.configuration,
            "createdTime": self.created_time,
        }

    @property
    def schema(self) -> dict[str, Any]:
        return orjson.loads(self.schema_string)

    def partition_keys(self) -> list[str]:
        """Keys of `partitionValues`: physical names when column mapping gives them."""
        physical = {}
        try:
            for f in self.schema.get("fields", []):
                pn = (f.get("metadata") or {}).get("delta.columnMapping.physicalName")
                physical[f["name"]] = pn or f["name"]
        except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError):
            pass
        return [physical.get(c, c) for c in self.partition_columns]


def dv_unique_id(dv: dict[str, Any] | None) -> str | None:
    """The protocol's deletion-vector unique id: storageType + pathOrInlineDv [+ '@' offset]."""
    if not dv:
        return None
    uid = f"{dv.get('storageType')}{dv.get('pathOrInlineDv')}"
    return f"{uid}@{dv['offset']}" if dv.get("offset") is not None else uid


@dataclass(slots=True)
class ActionBatch:
    """Actions of a run of log files: file actions columnar, the others as dicts in order."""

    files: pa.Table
    others: list[tuple[int, str, dict[str, Any]]]  # (version, action name, body)


def _nonblank_lines(data: bytes) -> list[bytes]:
    return [line for line in data.split(b"\n") if line.strip()]


def _line_counts(datas: list[bytes], rows: int) -> list[int]:
    """Rows per file as pyarrow's reader produces them (it skips blank lines).

    Counting newlines is exact for well-formed files; only when the total disagrees with
    the reader's row count are the files split to count non-blank lines.
    """
    counts = [d.count(b"\n") + (0 if d.endswith(b"\n") else 1) if d else 0 for d in datas]
    if sum(counts) != rows:
        counts = [len(_nonblank_lines(d)) for d in datas]
    return counts


def _locate_error(sources: list[tuple[str, int, bytes]], fallback: str) -> CorruptLogError:
    """Find the first line that is not a JSON object, to name its file and line."""
    for name, _version, data in sources:
        lineno = 0
        for lineno, line in enumerate(data.split(b"\n"), start=1):
            if not line.strip():
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                return CorruptLogError(f"{name}: line {lineno} is not valid JSON ({exc})", file=name, line=lineno)
            if not isinstance(obj, dict):
                return CorruptLogError(f"{name}: line {lineno} is not a JSON object", file=name, line=lineno)
            for key in ("add", "remove"):
                body = obj.get(key)
                if body is not None and (not isinstance(body, dict) or not isinstance(body.get("path"), str)):
                    return CorruptLogError(f"{name}: line {lineno}: malformed '{key}' action", file=name, line=lineno)
    return CorruptLogError(f"{sources[0][0]}..{sources[-1][0]}: unreadable actions ({fallback})")


_CHUNK_BYTES = 16 << 20


def _parse(buf: bytes, keys: list[str], sources: list[tuple[str, int, bytes]]) -> pa.Table:
    opts = pj.ParseOptions(explicit_schema=_json_schema(keys), unexpected_field_behavior="ignore")
    for block in (8 << 20, len(buf) + 1):
        try:
            return pj.read_json(io.BytesIO(buf), read_options=pj.ReadOptions(block_size=block), parse_options=opts)
        except pa.ArrowInvalid as exc:
            if "straddling" in str(exc) or "block size" in str(exc).lower():
                continue
            raise _locate_error(sources, str(exc).splitlines()[0]) from exc
    raise _locate_error(sources, "a line larger than the whole input")


def _chunks(sources: list[tuple[str, int, bytes]]) -> list[list[tuple[str, int, bytes]]]:
    """Group small consecutive files so that a log of many small commits costs few parses."""
    out: list[list[tuple[str, int, bytes]]] = []
    size = _CHUNK_BYTES
    for src in sources:
        if size + len(src[2]) > _CHUNK_BYTES:
            out.append([])
            size = 0
        out[-1].append(src)
        size += len(src[2])
    return out


def read_json_actions(sources: list[tuple[str, int, bytes]], keys: list[str]) -> ActionBatch:
    """Parse JSON log files given as (name, version, bytes) into one ActionBatch.

    Files are parsed in chunks by pyarrow; each row's version comes from the per-file row
    counts of its chunk.
    """
    schema = file_batch_schema(keys)
    tables, others = [], []
    for chunk in _chunks(sources):
        datas = [d if not d or d.endswith(b"\n") else d + b"\n" for _n, _v, d in chunk]
        table = _parse(datas[0] if len(datas) == 1 else b"".join(datas), keys, chunk)
        counts = [table.num_rows] if len(chunk) == 1 else _line_counts(datas, table.num_rows)
        if sum(counts) != table.num_rows:
            raise _locate_error(chunk, "line count mismatch")
        versions = np.repeat(np.array([v for _n, v, _d in chunk], dtype=np.int64), counts)
        tables.append(_file_rows(table, versions, schema))
        others.extend(_other_actions(table, chunk, counts))
    if not tables:
        return ActionBatch(schema.empty_table(), [])
    return ActionBatch(pa.concat_tables(tables) if len(tables) > 1 else tables[0], others)


def _other_actions(
    table: pa.Table, chunk: list[tuple[str, int, bytes]], counts: list[int]
) -> list[tuple[int, str, dict[str, Any]]]:
    """Re-read, with orjson, the few lines that hold non-file actions.

    The lines are found by their action's marker, and the finds are checked against the
    reader's own count per file; a file where they disagree is split line by line.
    """
    starts = np.concatenate([[0], np.cumsum(counts)])
    per_file: dict[int, dict[str, int]] = {}
    for name in NON_FILE_ACTIONS:
        rows = np.flatnonzero(table.column(name).is_valid().to_numpy(zero_copy_only=False))
        for fi in np.searchsorted(starts, rows, side="right") - 1:
            want = per_file.setdefault(int(fi), {})
            want[name] = want.get(name, 0) + 1
    out: list[tuple[int, str, dict[str, Any]]] = []
    for fi, want in sorted(per_file.items()):
        _name, version, data = chunk[fi]
        found = _find_actions(data, want)
        if found is None:
            found = []
            for line in _nonblank_lines(data):
                obj = orjson.loads(line)
                found.extend((n, obj[n]) for n in NON_FILE_ACTIONS if n in want and obj.get(n) is not None)
        out.extend((version, n, body) for n, body in found)
    return out


def _find_actions(data: bytes, want: dict[str, int]) -> list[tuple[str, dict[str, Any]]] | None:
    found: list[tuple[int, str, dict[str, Any]]] = []
    for name, expected in want.items():
        marker = f'"{name}"'.encode()
        hits = 0
        pos = data.find(marker)
        while pos != -1:
            start = data.rfind(b"\n", 0, pos) + 1
            end = data.find(b"\n", pos)
            end = len(data) if end == -1 else end
            obj = orjson.loads(data[start:end])
            if isinstance(obj, dict) and obj.get(name) is not None:
                found.append((start, name, obj[name]))
                hits += 1
                if hits == expected:
                    break  # the reader counted them: no need to scan the rest of a big file
            pos = data.find(marker, end)
        if hits != expected:
            return None
    found.sort(key=lambda t: t[0])
    return [(n, body) for _s, n, body in found]


def _file_rows(table: pa.Table, versions: np.ndarray, schema: pa.Schema) -> pa.Table:
    """Stack the add and remove structs of a parsed table into the file batch schema."""
    parts = []
    for kind in ("add", "remove"):
        col = table.column(kind).combine_chunks()
        valid = col.is_valid()
        if not pa.compute.any(valid).as_py():
            continue
        idx = np.flatnonzero(valid.to_numpy(zero_copy_only=False))
        sub = col.filter(valid)
        n = len(sub)
        fields = {f.name: sub.field(f.name) for f in sub.type}
        null_i64 = pa.nulls(n, pa.int64())
        parts.append(
            pa.table(
                {
                    "version": pa.array(versions[idx]),
                    "seq": pa.array(idx.astype(np.int64)),  # row within the chunk
                    "is_add": pa.array(np.full(n, kind == "add")),
                    "path": fields["path"],
                    "size": fields["size"],
                    "modificationTime": fields.get("modificationTime", null_i64),
                    "dataChange": fields["dataChange"],
                    "deletionTimestamp": fields.get("deletionTimestamp", null_i64),
                    "partitionValues": fields["partitionValues"],
                    "deletionVector": fields["deletionVector"],
                },
                schema=schema,
            )
        )
    if not parts:
        return schema.empty_table()
    return pa.concat_tables(parts).combine_chunks() if len(parts) > 1 else parts[0]
