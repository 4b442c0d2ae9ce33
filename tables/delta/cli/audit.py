"""`delta audit-export` and `audit-verify`: the signed audit export (tables.delta.history.audit)
written from a table, and checked against its signature, its chain and the table."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

import orjson

from tables.delta.cli.base import AUDIT_KEY_ENV, EXIT_DIFFERS, EXIT_OK, compact, fail
from tables.delta.errors import DeltaError


def _signing_key_bytes(opts: Mapping[str, Any]) -> bytes:
    if opts.get("key"):
        with open(opts["key"], "rb") as f:
            return f.read(1 << 16)
    env = os.environ.get(AUDIT_KEY_ENV, "")
    if not env.strip():
        raise ValueError(f"no signing key: give --key KEYFILE or set {AUDIT_KEY_ENV}")
    return env.encode()


def audit_export_payload(path: str, opts: Mapping[str, Any]) -> dict[str, Any]:
    """Write the signed export of `path`'s commits to --out; say what was written."""
    from tables.delta.history.audit import export_table, load_private_key, sign_export

    key = load_private_key(_signing_key_bytes(opts))
    body = export_table(path, opts.get("from_version"), opts.get("to_version"))
    data = sign_export(body, key)
    with open(opts["out"], "wb") as f:
        f.write(data)
    return {"out": opts["out"], "range": body["range"], "commits": len(body["commits"]), "last": body["chain"]["last"]}


def audit_verify(opts: Mapping[str, Any]) -> int:
    """audit-verify: 0 when everything holds, 1 when a signature, the chain or a version does
    not (a forged or damaged export too), 2 when the export, the key or the table cannot be read."""
    from tables.delta.history.audit import MAX_EXPORT_BYTES, ExportFormatError, load_public_key, verify_export

    try:
        with open(opts["public_key"], "rb") as f:
            key = load_public_key(f.read(1 << 16))
        with open(opts["path"], "rb") as f:
            data = f.read(MAX_EXPORT_BYTES + 1)
        if len(data) > MAX_EXPORT_BYTES:
            raise ValueError(f"larger than {MAX_EXPORT_BYTES} bytes")
    except (OSError, ValueError) as exc:
        return fail(f"{opts.get('path')}: {exc}")
    try:
        result = verify_export(data, key, opts.get("table"), accept_recorded=bool(opts.get("accept_recorded")))
    except ExportFormatError as exc:
        result = {"ok": False, "signature": "invalid", "signatureProblem": str(exc), "chain": "unknown"}
    except DeltaError as exc:
        return fail(str(exc))
    except (OSError, ValueError) as exc:
        return fail(f"{opts.get('table')}: {exc}")
    if opts.get("json"):
        sys.stdout.buffer.write(orjson.dumps(result, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        sys.stdout.write(_audit_verify_text(result))
    sys.stdout.flush()
    return EXIT_OK if result["ok"] else EXIT_DIFFERS


def _audit_verify_text(r: dict[str, Any]) -> str:
    lines = [f"signature: {r['signature']}" + (f" ({r['signatureProblem']})" if r.get("signatureProblem") else "")]
    lines.append(f"chain: {r['chain']}" + (f" (versions {r['brokenVersions']})" if r.get("brokenVersions") else ""))
    for v in r.get("versions") or []:
        if v["status"] != "match":
            lines.append(f"version {v['version']}: {v['status']} (exported {v['exported']}, found {v['found']})")
    if "versions" in r:
        lines.append(
            f"versions still matching: {sum(v['status'] == 'match' for v in r['versions'])} of {len(r['versions'])}"
        )
    lines += _recorded_lines(r)
    lines.append("ok" if r["ok"] else "FAILED")
    return "\n".join(lines) + "\n"


def _recorded_lines(r: dict[str, Any]) -> list[str]:
    """What the export records as wrong, one line each, and whether that was accepted."""
    recorded = r.get("recorded") or {}
    mismatches, rewrites = recorded.get("checksumMismatches") or [], recorded.get("rewrites") or []
    lines = []
    for m in mismatches:
        what = "; ".join(
            f"{str(f.get('field'))[:80]} expected {compact(f.get('expected'))[:80]}, found {compact(f.get('found'))[:80]}"
            for f in m["mismatches"][:10]
            if isinstance(f, dict)
        )
        what = what or str(m.get("error") or "the checksum file disagrees")[:200]
        lines.append(f"recorded checksum mismatch at version {str(m['version'])[:40]}: {what}")
    for w in rewrites:
        lines.append(
            f"recorded history rewrite at version {str(w['version'])[:40]}: its bytes no longer matched those first seen"
            f" (sha256 {str(w.get('firstSeen'))[:64]})"
        )
    if mismatches or rewrites:
        n = f"{len(mismatches)} checksum mismatch(es) and {len(rewrites)} history rewrite(s)"
        lines.append(
            f"the export records {n}: accepted (--accept-recorded)"
            if r.get("acceptRecorded")
            else f"the export records {n}: give --accept-recorded to accept them"
        )
    return lines


def audit_export_text(p: Any) -> str:
    r = p["range"]
    return f"wrote {p['out']}: versions {r['from']}..{r['to']} ({p['commits']} commits), chain ends {p['last']}\n"
