"""The signed audit export: a self-contained file an auditor verifies outside deltaweb.

The file is two lines. The first is the export itself, one JSON object (keys sorted,
compact): the table, the version range, every commit's metadata (its commitInfo summary,
operation, timestamps with In-Commit Timestamps, its files added and removed and their bytes),
the hash chain of the commits' bytes (`history/chain.py`), the range's checksum files
(`_delta_log/N.crc`) against the replay (`checksums`, as `delta verify` reports them; the
server's from its sync's checks) and, from the server, who approved which restore
(`approvals`). The second line is the Ed25519 signature of the first line's exact bytes (its
newline excluded), with the public key and its id. Changing any byte of either line makes
verification fail.

`export_table` reads a table's commits as they are now (the command line); the server passes
what it first saw (`make_export`). `verify_export` checks the signature against a public key
the auditor holds, the chain, what the export records as wrong (checksum mismatches, history
rewrites: a failure unless accepted), and, given a table, which versions' bytes still match.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from tables.delta.history.chain import ALGORITHM, GENESIS, Link, broken_links, build_chain, commit_digest
from tables.delta.history.timestamps import commit_times
from tables.delta.log.commitinfo import bounded
from tables.delta.log.jsonline import loads_line
from tables.delta.log.listing import LogFile, list_log
from tables.delta.snapshot.checksum import verify_checksums
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import as_storage

FORMAT = "deltaweb-audit-export"
FORMAT_VERSION = 1
SIGNS = "the first line's bytes, its newline excluded"
MAX_EXPORT_BYTES = 512 << 20  # an export file larger than this is not read back
# the commitInfo keys an export keeps (bounded): who, what, how, when
INFO_KEYS = (
    "timestamp",
    "inCommitTimestamp",
    "operation",
    "operationParameters",
    "operationMetrics",
    "userId",
    "userName",
    "engineInfo",
    "clientVersion",
    "isBlindAppend",
    "isolationLevel",
    "txnId",
    "readVersion",
)


class AuditKeyError(ValueError):
    """A signing or public key that cannot be read."""


class ExportFormatError(ValueError):
    """A file that is not a signed audit export (damaged, or not one at all)."""


# --- keys ------------------------------------------------------------------------------------


def _raw_b64(text: bytes) -> bytes | None:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == 32 else None


def load_private_key(data: bytes | str) -> Ed25519PrivateKey:
    """An Ed25519 private key from PEM (PKCS#8, `openssl genpkey -algorithm ed25519`) or the
    base64 of its 32 raw bytes."""
    text = data.encode() if isinstance(data, str) else data
    if b"-----BEGIN" in text:
        try:
            key = serialization.load_pem_private_key(text, password=None)
        except (ValueError, TypeError) as exc:
            raise AuditKeyError(f"the signing key is not a readable PEM private key ({exc})") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise AuditKeyError("the signing key is not an Ed25519 key")
        return key
    raw = _raw_b64(text)
    if raw is None:
        raise AuditKeyError("the signing key is neither PEM nor the base64 of 32 bytes")
    return Ed25519PrivateKey.from_private_bytes(raw)


def load_public_key(data: bytes | str) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM (`openssl pkey -pubout`) or the base64 of its 32 raw bytes."""
    text = data.encode() if isinstance(data, str) else data
    if b"-----BEGIN" in text:
        try:
            key = serialization.load_pem_public_key(text)
        except (ValueError, TypeError) as exc:
            raise AuditKeyError(f"the public key is not a readable PEM public key ({exc})") from None
        if not isinstance(key, Ed25519PublicKey):
            raise AuditKeyError("the public key is not an Ed25519 key")
        return key
    raw = _raw_b64(text)
    if raw is None:
        raise AuditKeyError("the public key is neither PEM nor the base64 of 32 bytes")
    return Ed25519PublicKey.from_public_bytes(raw)


def public_raw(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(key: Ed25519PublicKey) -> str:
    """A public key's short id: the first 16 hex digits of the SHA-256 of its raw bytes."""
    return hashlib.sha256(public_raw(key)).hexdigest()[:16]


# --- a commit's summary ----------------------------------------------------------------------


def commit_summary(data: bytes, name: str) -> dict[str, Any]:
    """What an export says of one commit besides its digest: the commitInfo's keys in
    INFO_KEYS (bounded), the files added and removed with their bytes, and which table-level
    actions it holds."""
    info: dict[str, Any] = {}
    adds = removes = add_bytes = remove_bytes = 0
    other: set[str] = set()
    for lineno, line in enumerate(bytes(data).splitlines(), 1):
        if not line.strip():
            continue
        action = loads_line(line, name, lineno)
        if not isinstance(action, dict):
            continue
        if isinstance(action.get("commitInfo"), dict) and not info:
            info = action["commitInfo"]
        elif isinstance(action.get("add"), dict):
            adds += 1
            add_bytes += _size(action["add"])
        elif isinstance(action.get("remove"), dict):
            removes += 1
            remove_bytes += _size(action["remove"])
        else:
            other.update(k for k in action if k in ("metaData", "protocol", "txn", "domainMetadata", "cdc"))
    return {
        "operation": bounded(info.get("operation")) if isinstance(info.get("operation"), str) else None,
        "commitInfo": {k: bounded(info[k]) for k in INFO_KEYS if k in info},
        "files": {"added": adds, "addedBytes": add_bytes, "removed": removes, "removedBytes": remove_bytes},
        "actions": sorted(other),
    }


def _size(action: dict[str, Any]) -> int:
    size = action.get("size")
    return size if type(size) is int and size >= 0 else 0


# --- making and signing ----------------------------------------------------------------------


@dataclass
class ExportInput:
    """What an export is made of (the command line reads it from a table, the server from its
    database): commits as dicts with at least version, sha256, entry, size."""

    table: dict[str, Any]
    first: int
    last: int
    previous: str  # the chain entry before `first` (GENESIS when the chain starts there)
    commits: list[dict[str, Any]]
    made_by: str = "delta audit-export"
    approvals: list[dict[str, Any]] | None = None
    # the range's checksum files against the replay: [{version, ok, mismatches[...]}] as
    # `delta verify` reports them (a version without a .crc file is not listed)
    checksums: list[dict[str, Any]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def make_export(inp: ExportInput, now_ms: int | None = None) -> dict[str, Any]:
    """The export's body (unsigned)."""
    return {
        "format": FORMAT,
        "formatVersion": FORMAT_VERSION,
        "createdAt": now_ms if now_ms is not None else int(time.time() * 1000),
        "madeBy": inp.made_by,
        "table": inp.table,
        "range": {"from": inp.first, "to": inp.last},
        "chain": {
            "algorithm": ALGORITHM,
            "previous": inp.previous,
            "last": inp.commits[-1]["entry"] if inp.commits else inp.previous,
        },
        "commits": inp.commits,
        "checksums": inp.checksums,
        "approvals": inp.approvals if inp.approvals is not None else [],
        **inp.extra,
    }


def sign_export(body: dict[str, Any], key: Ed25519PrivateKey) -> bytes:
    """The export file's bytes: the body's line, then its signature's line."""
    line = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    return line + b"\n" + _signature_line(key.public_key(), key.sign(line)) + b"\n"


def _signature_line(pub: Ed25519PublicKey, signature: bytes) -> bytes:
    """The second line, the one way it is written: verification rebuilds it and compares bytes,
    so no field of it (nor a base64 spelling) can change unnoticed."""
    sig = {
        "algorithm": "Ed25519",
        "keyId": key_id(pub),
        "publicKey": base64.b64encode(public_raw(pub)).decode(),
        "signature": base64.b64encode(signature).decode(),
        "signs": SIGNS,
    }
    return orjson.dumps(sig, option=orjson.OPT_SORT_KEYS)


def export_table(
    location: str | Storage, first: int | None = None, last: int | None = None, now_ms: int | None = None
) -> dict[str, Any]:
    """An export body of a table's commits `first`..`last` as they are now: the chain starts
    at the earliest commit the log holds (so that its entries agree with the server's when
    both saw the log whole), and only the range's commits are summarized."""
    storage = as_storage(location)
    listing = list_log(storage)
    commits = [c for c in listing.commits if c.backfilled]
    if not commits:
        raise ValueError(f"{storage.display()}: the log holds no commit to export")
    lo = commits[0].version if first is None else first
    hi = commits[-1].version if last is None else last
    if lo > hi or lo < commits[0].version or hi > commits[-1].version:
        raise ValueError(
            f"versions {lo}..{hi} are not within the log's commits {commits[0].version}..{commits[-1].version}"
        )
    times = commit_times(storage, listing)
    previous, rows = GENESIS, []
    links: list[Link] = []
    for lf in (c for c in commits if c.version <= hi):
        data = storage.read(lf.path)
        links = build_chain([(lf.version, commit_digest(data), len(data))], links[-1].entry if links else None)
        if lf.version < lo:
            previous = links[-1].entry
            continue
        rows.append(_commit_row(links[-1], data, lf, times))
    table = {"location": storage.display()}
    checks = verify_checksums(storage, lo, hi)["checksums"]
    return make_export(ExportInput(table, lo, hi, previous, rows, checksums=checks), now_ms)


def _commit_row(link: Link, data: bytes, lf: LogFile, times: Any) -> dict[str, Any]:
    ts, source = times.timestamp(lf.version)
    summary = commit_summary(data, lf.path)
    ict = summary["commitInfo"].get("inCommitTimestamp")
    return {
        **link.to_dict(),
        "timestamp": ts,
        "timestampSource": source,
        "inCommitTimestamp": ict if type(ict) is int else None,
        "fileModificationTime": lf.modification_time,
        **summary,
    }


# --- verifying -------------------------------------------------------------------------------


def parse_export(data: bytes) -> tuple[bytes, dict[str, Any], dict[str, Any]]:
    """(the signed line, the body, the signature) of an export file; ExportFormatError when it
    is not one (exactly two lines, each ending with a newline)."""
    parts = data.split(b"\n")
    if len(parts) != 3 or parts[2] != b"":
        raise ExportFormatError("not a signed audit export: not two lines (the export, its signature)")
    line, sig_line = parts[0], parts[1]
    try:
        body = orjson.loads(line)
        sig = orjson.loads(sig_line)
    except orjson.JSONDecodeError as exc:
        raise ExportFormatError(f"not a signed audit export: damaged JSON ({exc})") from None
    if not isinstance(body, dict) or body.get("format") != FORMAT or not isinstance(sig, dict):
        raise ExportFormatError("not a signed audit export")
    sig["_line"] = sig_line
    return line, body, sig


def check_signature(line: bytes, sig: dict[str, Any], key: Ed25519PublicKey) -> str | None:
    """None when `sig` is `key`'s valid Ed25519 signature of `line` written as `sign_export`
    writes it, else why not."""
    if sig.get("algorithm") != "Ed25519":
        return f"signature algorithm {str(sig.get('algorithm'))[:40]!r} is not Ed25519"
    try:
        value = base64.b64decode(str(sig.get("signature", "")), validate=True)
    except (binascii.Error, ValueError):
        return "the signature is not base64"
    if str(sig.get("publicKey", "")) != base64.b64encode(public_raw(key)).decode():
        return f"signed by another key (key id {str(sig.get('keyId'))[:20]}, expected {key_id(key)})"
    try:
        key.verify(value, line)
    except InvalidSignature:
        return "the signature does not match the export's bytes (changed after signing)"
    if sig.get("_line") is not None and sig["_line"] != _signature_line(key, value):
        return "the signature line was changed after signing"
    return None


def chain_problems(body: dict[str, Any]) -> list[int]:
    """The versions whose chain entry does not follow from the digests (and `chain.previous`)."""
    commits = body.get("commits") or []
    chain = body.get("chain") or {}
    links = [(c.get("version"), c.get("sha256"), c.get("entry")) for c in commits if isinstance(c, dict)]
    bad = broken_links(links, chain.get("previous"))
    if commits and chain.get("last") != links[-1][2]:
        bad.append(links[-1][0])
    return sorted(set(v for v in bad if isinstance(v, int)))


def compare_with_table(body: dict[str, Any], location: str | Storage) -> list[dict[str, Any]]:
    """Each exported version against the table now: match, differs (both digests), missing (gone
    while later commits stay: taken out), or expired (before the log's earliest commit: cleanup)."""
    storage = as_storage(location)
    listing = list_log(storage)
    present = {c.version: c for c in listing.commits if c.backfilled}
    earliest = min(present) if present else None
    out = []
    for c in body.get("commits") or []:
        v, digest = c.get("version"), c.get("sha256")
        lf = present.get(v)
        if lf is None:
            status = "expired" if earliest is not None and v < earliest else "missing"
            out.append({"version": v, "status": status, "exported": digest, "found": None})
            continue
        try:
            found = commit_digest(storage.read(lf.path))
        except FileNotFoundError:
            out.append({"version": v, "status": "missing", "exported": digest, "found": None})
            continue
        out.append(
            {"version": v, "status": "match" if found == digest else "differs", "exported": digest, "found": found}
        )
    return out


def recorded_problems(body: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """What the export itself records as wrong when it was made: checksum files that disagreed
    with the replay (`checksums` entries not ok, with their fields or error) and history
    rewrites (server exports: a commit whose bytes no longer matched what was first seen,
    `stillMatches` false). A valid signature proves these were recorded, not that all is well."""
    mismatches = []
    for c in body.get("checksums") or []:
        if isinstance(c, dict) and c.get("ok") is False:
            found = c.get("mismatches")
            row: dict[str, Any] = {"version": c.get("version"), "mismatches": found if isinstance(found, list) else []}
            if c.get("error"):
                row["error"] = str(c["error"])[:2000]
            mismatches.append(row)
    rewrites = [
        {"version": c.get("version"), "firstSeen": c.get("sha256"), "firstSeenAt": c.get("firstSeenAt")}
        for c in body.get("commits") or []
        if isinstance(c, dict) and c.get("stillMatches") is False
    ]
    return {"checksumMismatches": mismatches, "rewrites": rewrites}


def verify_export(
    data: bytes, public_key: Ed25519PublicKey, table: str | Storage | None = None, accept_recorded: bool = False
) -> dict[str, Any]:
    """The verdict on an export file: its signature, its chain, what it records as wrong
    (`recorded_problems`), and with `table` which versions still match. `ok` only when all hold
    and nothing wrong is recorded (unless `accept_recorded`); ExportFormatError when it is not
    an export at all."""
    line, body, sig = parse_export(data)
    problem = check_signature(line, sig, public_key)
    broken = chain_problems(body)
    out: dict[str, Any] = {
        "signature": "ok" if problem is None else "invalid",
        "signatureProblem": problem,
        "keyId": key_id(public_key),
        "chain": "ok" if not broken else "broken",
        "brokenVersions": broken,
        "range": body.get("range"),
        "table": body.get("table"),
        "commits": len(body.get("commits") or []),
    }
    recorded = recorded_problems(body)
    out["recorded"] = recorded
    out["acceptRecorded"] = accept_recorded
    ok = problem is None and not broken and (accept_recorded or not any(recorded.values()))
    if table is not None:
        versions = compare_with_table(body, table)
        out["versions"] = versions
        out["differing"] = [r["version"] for r in versions if r["status"] in ("differs", "missing")]
        ok = ok and not out["differing"]
    out["ok"] = ok
    return out


def summarize(results: Iterable[dict[str, Any]]) -> dict[str, int]:
    """How many versions have each status."""
    counts: dict[str, int] = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return counts
