"""Version checksum files (`_delta_log/<v>.crc`) compared with the core's own replay.

A writer may leave beside a commit a checksum of the state it produced (the protocol's
"Version Checksum File"): the table's size and file count, one metadata and one protocol, the
live set transactions and domain metadata, often a file-size histogram and every live add.
Comparing it with a replay of the log finds a log or a checksum changed after the fact, and
a checksum once found to agree can stand in for the replay's counts afterwards.

Each check is `{"version", "ok", "mismatches": [{"field", "expected", "found"}]}`: `expected`
is the checksum's value, `found` the replay's; and `notRecorded`, the fields this checksum does
not carry (older writers wrote only the counts), which are no disagreement. A checksum file is hostile input like the log:
it is read bounded in size and nesting, and every value shown back is bounded (text_bounds).
A checksum file that cannot be decoded is a failed check with an `error`, not a broken table.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from tables.delta.errors import CorruptLogError
from tables.delta.log.actions import Metadata, Protocol
from tables.delta.log.jsonline import MAX_NESTING, deeper_than
from tables.delta.log.listing import LogFile, LogListing, available_versions, list_log
from tables.delta.snapshot.replay import action_identity, identity_keys
from tables.delta.snapshot.state import Snapshot, load_snapshot
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import as_storage
from tables.delta.text_bounds import MAX_ECHOED_PATH, cut, echoed_json

MAX_CHECKSUM_BYTES = 512 << 20  # a checksum listing a million files is about 300 MB
MAX_LISTED = 20  # differing entries named per list field (histogram bins, files, transactions)
READ_BATCH = 64  # checksum files fetched together by `delta verify`
MAX_BINS = 10_000  # a histogram with more bins is not a histogram any writer makes
HISTOGRAM_KEYS = ("fileSizeHistogram", "histogramOpt")  # the protocol's name, Delta Spark's
# The fast path reads checksum files up to this size: one that lists every file (`allFiles`)
# of a large table decodes slower than the log replays (benchmarks/checksum_fast_path.py:
# 21 MB for 100,000 files, 0.86 s against a 0.30-0.62 s replay)
FAST_PATH_MAX_BYTES = 1 << 20


@dataclass(slots=True)
class Checksum:
    """A decoded checksum file and the SHA-256 of its bytes (what a later look compares)."""

    version: int
    body: dict[str, Any]
    sha256: str


@dataclass(slots=True)
class ReplayedState:
    """What a replay knows of a version, as far as a checksum can be compared with it.

    From a snapshot every field is set; from counts alone (a sync's growth pass) only the
    counts, and the other fields of the checksum are not compared (None)."""

    version: int
    num_files: int
    size_bytes: int
    protocol: Protocol | None = None
    metadata: Metadata | None = None
    txns: dict[str, dict[str, Any]] | None = None
    domains: dict[str, dict[str, Any]] | None = None
    files: pa.Table | None = None  # the live adds (file batch schema)

    @property
    def complete(self) -> bool:
        return self.files is not None


def replayed_state(snap: Snapshot) -> ReplayedState:
    """Every field of a snapshot a checksum names."""
    return ReplayedState(
        snap.version,
        snap.num_files,
        snap.size_bytes,
        snap.protocol,
        snap.metadata,
        snap.txns,
        snap.domains,
        snap.files,
    )


def checksum_path(version: int) -> str:
    return f"_delta_log/{version:020d}.crc"


def read_checksum(storage: Storage, lf: LogFile) -> Checksum:
    """The checksum file `lf`, decoded; CorruptLogError when it is too big, not JSON, nested
    too deep or not one JSON object."""
    _check_size(storage, lf)
    try:
        data = storage.read(lf.path)
    except FileNotFoundError as exc:
        raise CorruptLogError(f"{lf.path}: checksum file disappeared while reading", file=lf.path) from exc
    return decode_checksum(storage, lf, data)


def read_checksums(storage: Storage, lfs: list[LogFile]) -> list[Checksum | CorruptLogError]:
    """Each checksum file of `lfs` decoded, or the reason it could not be: an object store
    fetches them concurrently (a sync meets one per new commit), a local disk one by one."""
    if not storage.remote or len(lfs) < 2:
        return [_read_or_reason(storage, lf) for lf in lfs]
    out: list[Checksum | CorruptLogError] = []
    try:
        for lf in lfs:
            if lf.stat_known:  # sizes a listing gave; the others are not asked one by one
                _check_size(storage, lf)
        datas = storage.read_many([lf.path for lf in lfs])
    except (CorruptLogError, FileNotFoundError):
        return [_read_or_reason(storage, lf) for lf in lfs]  # one by one says which
    for lf, data in zip(lfs, datas, strict=True):
        try:
            if len(data) > MAX_CHECKSUM_BYTES:
                raise CorruptLogError(
                    f"{lf.path}: checksum file of {len(data)} bytes (at most {MAX_CHECKSUM_BYTES})",
                    file=lf.path,
                )
            out.append(decode_checksum(storage, lf, data))
        except CorruptLogError as exc:
            out.append(exc)
    return out


def _read_or_reason(storage: Storage, lf: LogFile) -> Checksum | CorruptLogError:
    try:
        return read_checksum(storage, lf)
    except CorruptLogError as exc:
        return exc


def _check_size(storage: Storage, lf: LogFile) -> None:
    if lf.size > MAX_CHECKSUM_BYTES:
        where = lf.path  # as the table knows it: never the server's own path
        raise CorruptLogError(f"{where}: checksum file of {lf.size} bytes (at most {MAX_CHECKSUM_BYTES})", file=lf.path)


def decode_checksum(storage: Storage, lf: LogFile, data: bytes) -> Checksum:
    """A checksum file's bytes decoded: one JSON object, nested at most MAX_NESTING levels.
    Errors name the file relative to its table (`_delta_log/N.crc`), not where it lies."""
    where = lf.path
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise CorruptLogError(f"{where}: checksum file is not JSON ({cut(str(exc), 200)})", file=lf.path) from exc
    if not isinstance(body, dict):
        raise CorruptLogError(f"{where}: checksum file is not one JSON object", file=lf.path)
    # fewer brackets than the limit cannot nest deeper: only a file with many is walked
    if data.count(b"{") + data.count(b"[") > MAX_NESTING and deeper_than(body, MAX_NESTING):
        raise CorruptLogError(f"{where}: checksum file nests deeper than {MAX_NESTING} levels", file=lf.path)
    return Checksum(lf.version, body, hashlib.sha256(data).hexdigest())


def _mismatch(field: str, expected: Any, found: Any) -> dict[str, Any]:
    return {"field": cut(field, MAX_ECHOED_PATH), "expected": echoed_json(expected), "found": echoed_json(found)}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


COUNTS = ("tableSizeBytes", "numFiles", "numMetadata", "numProtocol")
STATE_FIELDS = ("metadata", "protocol")  # compared against a whole replay only


def not_recorded(crc: dict[str, Any], state: ReplayedState) -> list[str]:
    """The fields the protocol's checksum names and this one does not carry, of those the
    check would compare: older writers (Delta before 1.0, some delta-rs releases) wrote only
    the counts. Not a disagreement: nothing was said."""
    fields = COUNTS + (STATE_FIELDS if state.complete else ())
    return [name for name in fields if crc.get(name) is None]


def compare(crc: dict[str, Any], state: ReplayedState) -> list[dict[str, Any]]:
    """The fields where checksum `crc` and the replayed `state` disagree (empty: they agree).
    A field the checksum does not carry is no disagreement (`not_recorded`); one present with
    another value (or the wrong type) is."""
    out = []
    for name, found in (
        ("tableSizeBytes", state.size_bytes),
        ("numFiles", state.num_files),
        ("numMetadata", 1),  # a replay always ends with exactly one of each
        ("numProtocol", 1),
    ):
        if crc.get(name) is not None and _int(crc.get(name)) != found:
            out.append(_mismatch(name, crc.get(name), found))
    if not state.complete:
        return out
    if crc.get("metadata") is not None:
        out += _compare_metadata(crc["metadata"], state.metadata)
    if crc.get("protocol") is not None:
        out += _compare_protocol(crc["protocol"], state.protocol)
    if "setTransactions" in crc:
        out += _compare_keyed("setTransactions", crc["setTransactions"], state.txns or {}, "appId", _txn)
    if "domainMetadata" in crc:
        out += _compare_keyed("domainMetadata", crc["domainMetadata"], state.domains or {}, "domain", _domain)
    for key in HISTOGRAM_KEYS:
        if crc.get(key) is not None:
            out += _compare_histogram(key, crc[key], state.files)
    if crc.get("allFiles") is not None:
        out += _compare_files(crc["allFiles"], state.files)
    out += _compare_deletion_vectors(crc, state.files)
    return out


def _schema_value(text: Any) -> Any:
    """A schema string decoded, so that spacing and key order do not count (text when not JSON)."""
    try:
        return orjson.loads(text) if isinstance(text, str) else text
    except orjson.JSONDecodeError:
        return text


def _compare_metadata(body: Any, found: Metadata | None) -> list[dict[str, Any]]:
    mine = found.to_dict() if found is not None else None
    if not isinstance(body, dict) or mine is None:
        return [_mismatch("metadata", body, mine)]
    try:
        theirs = Metadata.from_dict(body).to_dict()
    except (TypeError, ValueError):
        return [_mismatch("metadata", body, mine)]
    out = []
    for key, value in mine.items():
        other = theirs.get(key)
        same = _schema_value(other) == _schema_value(value) if key == "schemaString" else other == value
        if not same:
            out.append(_mismatch(f"metadata.{key}", body.get(key), value))
    return out


def _protocol_view(p: Protocol) -> dict[str, Any]:
    return {
        "minReaderVersion": p.min_reader_version,
        "minWriterVersion": p.min_writer_version,
        "readerFeatures": sorted(p.reader_features) if p.reader_features is not None else None,
        "writerFeatures": sorted(p.writer_features) if p.writer_features is not None else None,
    }


def _compare_protocol(body: Any, found: Protocol | None) -> list[dict[str, Any]]:
    mine = _protocol_view(found) if found is not None else None
    if not isinstance(body, dict) or mine is None:
        return [_mismatch("protocol", body, mine)]
    try:
        theirs = _protocol_view(Protocol.from_dict(body))
    except (TypeError, ValueError):
        return [_mismatch("protocol", body, mine)]
    return [_mismatch(f"protocol.{k}", body.get(k), v) for k, v in mine.items() if theirs[k] != v]


def _txn(body: dict[str, Any]) -> dict[str, Any]:
    return {"appId": body.get("appId"), "version": body.get("version"), "lastUpdated": body.get("lastUpdated")}


def _domain(body: dict[str, Any]) -> dict[str, Any]:
    return {"domain": body.get("domain"), "configuration": body.get("configuration"), "removed": False}


def _compare_keyed(field: str, listed: Any, found: dict[str, dict[str, Any]], key: str, view) -> list[dict[str, Any]]:
    """A list of actions keyed by `key` (set transactions by appId, domains by name), entry by entry."""
    if not isinstance(listed, list) or not all(isinstance(e, dict) for e in listed):
        return [_mismatch(field, listed, [view(v) for v in found.values()])]
    theirs = {str(e.get(key)): view(e) for e in listed}
    mine = {k: view(v) for k, v in found.items()}
    out = []
    for name in sorted(set(theirs) | set(mine)):
        if theirs.get(name) != mine.get(name):
            out.append(_mismatch(f"{field}[{name}]", theirs.get(name), mine.get(name)))
    return _capped(field, out, len(listed), len(mine))


def _capped(field: str, out: list[dict[str, Any]], expected: int, found: int) -> list[dict[str, Any]]:
    """At most MAX_LISTED differing entries, then one line with the list's lengths."""
    if len(out) <= MAX_LISTED:
        return out
    return [*out[:MAX_LISTED], _mismatch(f"{field} (entries)", expected, found)]


def _sizes(files: pa.Table | None) -> np.ndarray:
    if files is None or files.num_rows == 0:
        return np.zeros(0, dtype=np.int64)
    return pc.fill_null(files.column("size"), 0).to_numpy().astype(np.int64, copy=False)


def _histogram_lists(body: Any) -> tuple[list[int], list[int], list[int]] | None:
    """(boundaries, counts, bytes) of a checksum's histogram, or None when it is not one."""
    if not isinstance(body, dict):
        return None
    lists = [body.get(k) for k in ("sortedBinBoundaries", "fileCounts", "totalBytes")]
    if not all(isinstance(v, list) and all(_int(x) is not None for x in v) for v in lists):
        return None
    bounds, counts, sizes = lists
    if not 0 < len(bounds) <= MAX_BINS or len(counts) != len(bounds) or len(sizes) != len(bounds):
        return None
    if bounds[0] != 0 or any(b <= a for a, b in pairwise(bounds)):
        return None
    return bounds, counts, sizes


def _compare_histogram(key: str, body: Any, files: pa.Table | None) -> list[dict[str, Any]]:
    """The replay's sizes binned at the checksum's own boundaries, bin by bin."""
    lists = _histogram_lists(body)
    if lists is None:
        return [_mismatch(key, body, "not a valid histogram (sorted boundaries from 0, three lists of one length)")]
    bounds, counts, totals = lists
    sizes = _sizes(files)
    edges = np.asarray(bounds, dtype=np.int64)
    idx = np.searchsorted(edges, sizes, side="right") - 1
    idx = np.clip(idx, 0, len(edges) - 1)  # a negative size (hostile log) counts in the first bin
    my_counts = np.bincount(idx, minlength=len(edges))
    my_totals = np.zeros(len(edges), dtype=np.int64)
    np.add.at(my_totals, idx, sizes)
    out = []
    for i, lo in enumerate(bounds):
        label = f"[{lo}, {bounds[i + 1] if i + 1 < len(bounds) else '∞'})"
        if counts[i] != int(my_counts[i]):
            out.append(_mismatch(f"{key}.fileCounts{label}", counts[i], int(my_counts[i])))
        if totals[i] != int(my_totals[i]):
            out.append(_mismatch(f"{key}.totalBytes{label}", totals[i], int(my_totals[i])))
    return _capped(key, out, int(sum(counts)), len(sizes))


def _file_view(size: Any) -> dict[str, Any]:
    return {"size": size}


def _compare_files(listed: Any, files: pa.Table | None) -> list[dict[str, Any]]:
    """The checksum's live adds against the replay's, by file identity (path and deletion vector)."""
    mine: dict[str, int] = {}
    if files is not None and files.num_rows:
        keys = identity_keys(files).to_pylist()
        mine = dict(zip(keys, files.column("size").to_pylist(), strict=True))
    if not isinstance(listed, list) or not all(isinstance(a, dict) and isinstance(a.get("path"), str) for a in listed):
        return [_mismatch("allFiles", listed, f"{len(mine)} live files")]
    theirs: dict[str, Any] = {}
    for add in listed:
        try:
            theirs[action_identity(add)] = add.get("size")
        except (TypeError, AttributeError):
            return [_mismatch("allFiles", add, "an add action")]
    out = []
    for key in _differing(theirs, mine):
        name = key.replace("\x00", " with deletion vector ")
        out.append(
            _mismatch(
                f"allFiles[{name}]",
                _file_view(theirs[key]) if key in theirs else None,
                _file_view(mine[key]) if key in mine else None,
            )
        )
    return _capped("allFiles", out, len(theirs), len(mine))


def _differing(theirs: dict[str, Any], mine: dict[str, Any]) -> Iterator[str]:
    """Keys on one side only or with other values, sorted, stopping after MAX_LISTED + 1."""
    n = 0
    for key in sorted(theirs.keys() ^ mine.keys() | {k for k in theirs.keys() & mine.keys() if theirs[k] != mine[k]}):
        yield key
        n += 1
        if n > MAX_LISTED:
            return


def _compare_deletion_vectors(crc: dict[str, Any], files: pa.Table | None) -> list[dict[str, Any]]:
    """numDeletionVectorsOpt and numDeletedRecordsOpt, where the checksum has them."""
    if "numDeletionVectorsOpt" not in crc and "numDeletedRecordsOpt" not in crc:
        return []
    count, records = 0, 0
    if files is not None and files.num_rows:
        dv = files.column("deletionVector")
        count = len(dv) - dv.null_count
        records = int(pc.sum(pc.struct_field(dv, "cardinality")).as_py() or 0) if count else 0
    out = []
    for name, found in (("numDeletionVectorsOpt", count), ("numDeletedRecordsOpt", records)):
        if name in crc and _int(crc[name]) != found:
            out.append(_mismatch(name, crc[name], found))
    return out


def check(crc: Checksum, state: ReplayedState) -> dict[str, Any]:
    """One version's check: `{"version", "ok", "mismatches"}`."""
    mismatches = compare(crc.body, state)
    out = {"version": crc.version, "ok": not mismatches, "mismatches": mismatches}
    missing = not_recorded(crc.body, state)
    if missing:
        out["notRecorded"] = missing
    return out


def failed_read(version: int, error: CorruptLogError) -> dict[str, Any]:
    """The check of a checksum file that could not be decoded: not ok, with the reason."""
    return {"version": version, "ok": False, "mismatches": [], "error": cut(str(error), 1000)}


def checksum_files(
    listing: LogListing, from_version: int | None = None, to_version: int | None = None
) -> list[LogFile]:
    """The checksum files of the versions in range that the log can still rebuild, by version."""
    span = available_versions(listing)
    if span is None:
        return []
    lo = max(span[0], from_version if from_version is not None else span[0])
    hi = min(span[1], to_version if to_version is not None else span[1])
    return [lf for v, lf in sorted(listing.checksums.items()) if lo <= v <= hi]


def verify_version(
    storage: Storage, crc: Checksum | CorruptLogError, version: int, listing: LogListing
) -> dict[str, Any]:
    """The check of a version's decoded checksum (or why it could not be decoded) against a
    replay of the version."""
    if isinstance(crc, CorruptLogError):
        return failed_read(version, crc)
    return check(crc, replayed_state(load_snapshot(storage, version, listing=listing)))


def verify_checksums(location: Any, from_version: int | None = None, to_version: int | None = None) -> dict[str, Any]:
    """`delta verify`: every checksum file in range checked against a replay of its version.

    `{"checksums": [...], "ok": all agree, "checked": how many}`; versions the log can no
    longer rebuild (their commits cleaned up) are not checked."""
    if from_version is not None and to_version is not None and from_version > to_version:
        raise ValueError(f"--from ({from_version}) must not be after --to ({to_version})")
    if (from_version is not None and from_version < 0) or (to_version is not None and to_version < 0):
        raise ValueError("versions are >= 0")
    storage = as_storage(location)
    listing = list_log(storage)
    lfs = checksum_files(listing, from_version, to_version)
    checks = []
    for i in range(0, len(lfs), READ_BATCH):  # a batch in memory at a time: checksums may list every file
        batch = lfs[i : i + READ_BATCH]
        for lf, crc in zip(batch, read_checksums(storage, batch), strict=True):
            checks.append(verify_version(storage, crc, lf.version, listing))
    return {"checksums": checks, "ok": all(c["ok"] for c in checks), "checked": len(checks)}


def checksum_summary(crc: Checksum) -> dict[str, Any] | None:
    """A version's summary as `Snapshot.summary(files=False)` shapes it, from a checksum that
    was found to agree with the replay in every field: the fast path that needs no replay.
    None when the checksum leaves out the (optional) set transactions or domain metadata."""
    body = crc.body
    if not isinstance(body.get("setTransactions"), list) or not isinstance(body.get("domainMetadata"), list):
        return None
    return {
        "version": crc.version,
        "protocol": Protocol.from_dict(body["protocol"]).to_dict(),
        "metadata": Metadata.from_dict(body["metadata"]).summary(),
        "numFiles": body["numFiles"],
        "sizeBytes": body["tableSizeBytes"],
        "setTransactions": list(body.get("setTransactions") or []),
        "domainMetadata": [d for d in body.get("domainMetadata") or [] if not d.get("removed")],
    }


def summary_if_unchanged(storage: Storage, version: int, sha256: str) -> dict[str, Any] | None:
    """The fast path: a version's summary from its checksum file, when the file is still the
    one with `sha256` (found to agree with the replay in every field) and small enough to be
    worth it (FAST_PATH_MAX_BYTES); else None, and the caller replays the log."""
    lf = LogFile("crc", version, checksum_path(version), fmt="json", storage=storage)
    try:
        if lf.size > FAST_PATH_MAX_BYTES:
            return None
        crc = read_checksum(storage, lf)
    except (CorruptLogError, OSError):
        return None
    if crc.sha256 != sha256:
        return None  # rewritten since it was checked: the replay decides
    return checksum_summary(crc)
