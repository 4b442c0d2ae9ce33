"""What a recipient's request is answered: the protocol and metaData lines in either format,
a version's files (pruned by the partition hints, cut by the limit hint) and the change data
of a range of versions, each file with a URL that expires. Every answer is an `Answer`: its
lines, the version it is of, and what it served (recorded by tables.services.sharing.records)."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from typing import Any

import orjson

from tables.delta.errors import DeltaError
from tables.delta.history.changes import commit_actions
from tables.delta.log.actions import Metadata, Protocol
from tables.delta.snapshot.dv import dv_location
from tables.delta.snapshot.files import file_rows, footer_rows, log_add_actions
from tables.delta.snapshot.state import Snapshot, load_snapshot, load_table_config
from tables.delta.storage.opening import as_storage
from tables.services.sharing.errors import INVALID, SharingError, from_core
from tables.services.sharing.file_urls import Grant, Signer
from tables.services.sharing.predicates import PartitionFilter
from tables.services.sharing.window import DELTA, Resolved, SharedView, int_param, response_format
from tables.services.versions.source import Source

MAX_HINTS = 100


@dataclass
class Answer:
    version: int
    format: str
    lines: list[dict[str, Any]] = field(default_factory=list)
    files: int = 0
    bytes: int = 0
    start: int | None = None
    end: int | None = None
    rule: str | None = None  # how a timestamp was resolved

    def ndjson(self) -> bytes:
        return b"".join(orjson.dumps(line) + b"\n" for line in self.lines)


def _protocol_line(protocol: Protocol, fmt: str) -> dict[str, Any]:
    if fmt == DELTA:
        return {"protocol": {"deltaProtocol": protocol.to_dict()}}
    return {"protocol": {"minReaderVersion": 1}}


def _metadata_line(view: SharedView, md: Metadata, fmt: str, version: int | None = None, **more: Any) -> dict[str, Any]:
    body = view.metadata_body(md)
    if fmt == DELTA:
        out: dict[str, Any] = {"deltaMetadata": body, **more}
    else:
        out = {
            k: body[k] for k in ("id", "name", "description", "format", "schemaString", "partitionColumns") if k in body
        }
        out["configuration"] = body.get("configuration", {})
        out.update(more)
    if version is not None:
        out["version"] = version
    return {"metaData": out}


def _pinned_snapshot(source: Source, version: int) -> Snapshot:
    """The version as its pin keeps it: the kept table's latest, numbered as the table's."""
    return dataclasses.replace(load_snapshot(source.location, source.version), version=version)


def metadata(view: SharedView, caps: dict[str, list[str]]) -> Answer:
    """The protocol and metadata of the latest version the window shares (its pin's, when the
    table lost it)."""
    version = view.latest
    try:
        source = view.source(version)
        if source.from_pin:
            config = _pinned_snapshot(source, version)
        else:
            config = load_table_config(view.storage, view.listing, version)
    except DeltaError as exc:
        raise from_core(exc, view.shared.table) from exc
    fmt = response_format(caps, config.protocol)
    lines = [_protocol_line(config.protocol, fmt), _metadata_line(view, config.metadata, fmt)]
    return Answer(version, fmt, lines)


class _Urls:
    """Each file's URL, signed once per answer with one expiry, for the recipient, the shared
    table and the versions (first..last) the answer covers; with `pin`, of its kept table's
    files, the grant naming the pin (file_urls: such a URL serves that kept table only)."""

    def __init__(self, view: SharedView, base: str, first: int, last: int, pin: Source | None = None) -> None:
        self.view = view
        self.storage = as_storage(pin.location) if pin is not None else view.storage
        store = pin.pin.pk if pin is not None and pin.pin is not None else 0
        grant = Grant(view.recipient_id, view.shared.pk, view.shared.table_id, first, last, store)
        self.sign = Signer(self.storage, grant, base)
        self.expires = self.sign.expires

    def key(self, log_path: str) -> str:
        return self.storage.resolve(log_path)

    def __call__(self, log_path: str) -> str:
        return self.sign(self.key(log_path))

    def dv(self, descriptor: dict[str, Any] | None) -> dict[str, Any] | None:
        """An on-disk deletion vector as an absolute URL the recipient can fetch ('p')."""
        if not descriptor or descriptor.get("storageType") == "i":
            return descriptor
        where = dv_location(descriptor)
        key = self.storage.resolve(where) if "://" in where else where
        return {**descriptor, "storageType": "p", "pathOrInlineDv": self.sign(key)}


def file_id(path: str) -> str:
    return hashlib.md5(path.encode(), usedforsecurity=False).hexdigest()


def _file_line(
    kind: str, body: dict[str, Any], fmt: str, urls: _Urls, version: int | None, ts: int | None, wrapper: str = ""
) -> dict[str, Any]:
    """One file action in the chosen format (`kind`: add, remove or cdc as the log says it;
    `wrapper`: the parquet format's name for it, `file` in a snapshot)."""
    if fmt == DELTA:
        action = {**body, "path": urls(body["path"])}
        if body.get("deletionVector"):
            action["deletionVector"] = urls.dv(body["deletionVector"])
        out: dict[str, Any] = {"id": file_id(body["path"]), "expirationTimestamp": urls.expires}
        if version is not None:
            out.update(version=version, timestamp=ts)
        out["deltaSingleAction"] = {kind: action}
        return {"file": out}
    out = {
        "url": urls(body["path"]),
        "id": file_id(body["path"]),
        "partitionValues": body.get("partitionValues") or {},
        "size": int(body.get("size") or 0),
        "expirationTimestamp": urls.expires,
    }
    if body.get("stats") and kind == "add":
        out["stats"] = body["stats"]
    if version is not None:
        out.update(version=version, timestamp=ts)
    return {wrapper or {"cdc": "cdf"}.get(kind, kind): out}


def _within_limit(urls: _Urls, adds: list[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    """The first files that hold `limit` live rows (their stats, else their Parquet footers);
    a file whose rows cannot be told counts for none, so never fewer rows than asked."""
    if limit is None:
        return adds
    footers = footer_rows(urls.storage, adds) if any(file_rows(a) is None for a in adds) else {}
    out, rows = [], 0
    for add in adds:
        if rows >= limit:
            break
        out.append(add)
        known = file_rows(add)
        rows += known if known is not None else footers.get(add["path"], 0)
    return out


def _hints(body: dict[str, Any]) -> tuple[str | None, list[str] | None, int | None]:
    json_hint = body.get("jsonPredicateHints")
    if json_hint is not None and not isinstance(json_hint, str):
        json_hint = orjson.dumps(json_hint).decode() if isinstance(json_hint, dict) else None
    sql = body.get("predicateHints")
    sql = [h for h in sql[:MAX_HINTS] if isinstance(h, str)] if isinstance(sql, list) else None
    limit = int_param(body.get("limitHint"), "limitHint")
    return json_hint, sql, limit


def snapshot_version(view: SharedView, body: dict[str, Any]) -> Resolved:
    """The version a query reads: `version`, `timestamp` (TIMESTAMP AS OF), else the latest shared."""
    version = int_param(body.get("version"), "version")
    stamp = body.get("timestamp")
    if version is not None and stamp is not None:
        raise SharingError(INVALID, "Give version or timestamp, not both.")
    if stamp is not None:
        if not isinstance(stamp, str):
            raise SharingError(INVALID, "timestamp must be a string")
        return view.at_or_before(stamp)
    if version is not None:
        return Resolved(view.check(version))
    return Resolved(view.latest)


def _timestamp(view: SharedView, version: int) -> int | None:
    """A version's commit timestamp; None for a pinned version whose commit the log lost."""
    try:
        return view.timestamp_of(version)
    except (DeltaError, IndexError, KeyError):
        return None


def query(view: SharedView, body: dict[str, Any], caps: dict[str, list[str]], base: str) -> Answer:
    """A query: a version's files, or (startingVersion) the files its versions added and removed."""
    if body.get("startingVersion") is not None:
        start = int_param(body.get("startingVersion"), "startingVersion")
        end = int_param(body.get("endingVersion"), "endingVersion")
        return changes(view, start, end, caps, base, cdf=False)  # type: ignore[arg-type]
    resolved = snapshot_version(view, body)
    json_hint, sql_hints, limit = _hints(body)
    try:
        # the table while it has the version, else the pin that keeps it; neither: refused
        source = view.source(resolved.version)
        if source.from_pin:
            snap = _pinned_snapshot(source, resolved.version)
            adds, _found = log_add_actions(as_storage(source.location), snap, snap.files)
        else:
            snap = load_snapshot(view.storage, resolved.version, view.listing)
            adds, _found = log_add_actions(view.storage, snap, snap.files)
    except DeltaError as exc:
        raise from_core(exc, view.shared.table) from exc
    fmt = response_format(caps, snap.protocol)
    urls = _Urls(view, base, snap.version, snap.version, source if source.from_pin else None)
    pruning = PartitionFilter(snap.metadata, json_hint, sql_hints)
    asked = body.get("version") is not None or body.get("timestamp") is not None
    ts = _timestamp(view, snap.version) if asked else None
    answer = Answer(snap.version, fmt, rule=resolved.rule)
    head = _metadata_line(
        view, snap.metadata, fmt, snap.version if asked else None, size=snap.size_bytes, numFiles=snap.num_files
    )
    answer.lines += [_protocol_line(snap.protocol, fmt), head]
    kept = [
        a
        for a in sorted(adds, key=lambda a: a["path"])
        if not pruning.active or pruning.keeps(a.get("partitionValues"))
    ]
    for add in _within_limit(urls, kept, limit):
        answer.lines.append(_file_line("add", add, fmt, urls, snap.version if asked else None, ts, "file"))
        answer.files += 1
        answer.bytes += int(add.get("size") or 0)
    return answer


def change_range(view: SharedView, params: dict[str, Any]) -> tuple[int, int, str | None]:
    """The versions a changes request covers, by versions or timestamps, inside the window."""
    start = int_param(params.get("startingVersion"), "startingVersion")
    end = int_param(params.get("endingVersion"), "endingVersion")
    rule = None
    if start is None and params.get("startingTimestamp"):
        found = view.at_or_after(str(params["startingTimestamp"]))
        start, rule = found.version, found.rule
    if end is None and params.get("endingTimestamp"):
        found = view.at_or_before(str(params["endingTimestamp"]))
        end, rule = found.version, found.rule
    if start is None:
        raise SharingError(INVALID, "startingVersion or startingTimestamp is required.")
    end = view.latest if end is None else end
    if end < start:
        raise SharingError(INVALID, "The ending version is before the starting version.")
    view.check(start, "startingVersion")
    view.check(end, "endingVersion")
    return start, end, rule


def changes(
    view: SharedView, start: int, end: int | None, caps: dict[str, list[str]], base: str, cdf: bool = True
) -> Answer:
    """Versions start..end's file actions: with `cdf` (the changes endpoint) a version's change
    data files when it has some, else its added and removed files (`dataChange`); without
    (a query's startingVersion), its added and removed files."""
    end = view.latest if end is None else end
    if end < start:
        raise SharingError(INVALID, "endingVersion is before startingVersion.")
    view.check(start, "startingVersion")
    view.check(min(end, view.latest), "endingVersion")
    end = min(end, view.latest)
    try:
        first = load_table_config(view.storage, view.listing, start)
        last = load_table_config(view.storage, view.listing, end)
        view.times.warm(start, end)
        fmt = response_format(caps, last.protocol)
        urls = _Urls(view, base, start, end)
        answer = Answer(end, fmt, start=start, end=end)
        answer.lines += [_protocol_line(last.protocol, fmt), _metadata_line(view, first.metadata, fmt, start)]
        for version in range(start, end + 1):
            _version_lines(view, answer, urls, version, cdf)
    except DeltaError as exc:
        raise from_core(exc, view.shared.table) from exc
    return answer


def _version_lines(view: SharedView, answer: Answer, urls: _Urls, version: int, cdf: bool) -> None:
    actions = commit_actions(view.storage, version)
    ts = view.timestamp_of(version)
    has_cdc = cdf and any(name == "cdc" for name, _b in actions)
    for name, body in actions:
        if name == "metaData" and answer.format == DELTA and version > (answer.start or 0):
            answer.lines.append(_metadata_line(view, Metadata.from_dict(body), DELTA, version))
            continue
        if not isinstance(body, dict) or not isinstance(body.get("path"), str):
            continue
        wanted = name == "cdc" if has_cdc else name in ("add", "remove") and body.get("dataChange", True) is not False
        if answer.format == DELTA and name in ("add", "remove", "cdc"):
            wanted = name != "cdc" or cdf  # the recipient's engine reads the log itself
        if not wanted:
            continue
        answer.lines.append(_file_line(name, body, answer.format, urls, version, ts))
        answer.files += 1
        answer.bytes += int(body.get("size") or 0)
