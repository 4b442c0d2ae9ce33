"""`delta`: the Delta core's command line and its stable JSON contract for scripts and tests.

Subcommands: snapshot, history, resolve, timeline, reachability, row-history and verify read a
table; enable-ict and restore (without --dry-run) write one commit; keep writes a new table (a
version of this one as its version 0); nothing else writes. Every subcommand prints JSON with
--json and a readable table without it. A failure exits with status 2 and one `error: ...`
line on stderr, never a traceback; `verify` exits 1 when a checksum disagrees with the log.

Installed as the `delta` console script (`tables.delta.cli:main`); `manage.py delta` is a thin
wrapper over the same parser and `execute`. This module imports no Django, Celery or Spark, and
the core modules (which bring pyarrow and numpy) only once a subcommand runs, so `--help` and
usage errors start at interpreter speed. Reads are confined to DELTAWEB_ALLOWED_ROOTS from the
environment when it is set, else to the table's own root: tables.delta.storage.api's default when
no roots provider is installed, which a plain process never does.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from tables.delta.errors import DeltaError

if TYPE_CHECKING:
    pass

DESCRIPTION = (
    "Read Delta tables: snapshot, history, resolve, timeline, reachability, row-history, verify; "
    "enable-ict and restore write one commit; keep writes a version of a table as a new table."
)

# exit statuses: 2 is the contract's failure; the others follow shell conventions
EXIT_OK = 0
EXIT_BROKEN_PIPE = 1
EXIT_DIFFERS = 1  # verify, audit-verify: a checksum, signature, chain or version that does not hold
EXIT_FAILED = 2
EXIT_INTERRUPTED = 130
AUDIT_KEY_ENV = "DELTAWEB_AUDIT_KEY"  # the signing key itself (PEM or base64), as the server reads it
MAX_FORECAST_SHOWN = 200  # versions listed in the text output; --json has them all


def add_subcommands(parser: argparse.ArgumentParser) -> None:
    """Add the subcommands and their options to `parser` (the script's, or manage.py's)."""
    # plain ArgumentParser subparsers: Django's CommandParser needs arguments of its own, and
    # plain ones exit 2 with a usage line on a bad option under both commands alike
    sub = parser.add_subparsers(dest="subcommand", required=True, parser_class=argparse.ArgumentParser)

    def cmd(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("path", help="table root: a directory or file:// URI")
        p.add_argument("--json", action="store_true", help="machine-readable output")
        return p

    p = cmd("snapshot", "the table's state at a version")
    p.add_argument("--version", type=int, default=None)
    p.add_argument("--no-files", action="store_true", help="leave the file list out")
    p = cmd("history", "commits newest first, as DESCRIBE HISTORY")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--offset", type=int, default=0)
    p = cmd("resolve", "TIMESTAMP AS OF: the version a timestamp selects")
    p.add_argument("--timestamp", required=True)
    p.add_argument("--allow-latest", action="store_true")
    p.add_argument("--allow-earliest", action="store_true")
    cmd("timeline", "every version's commit timestamps, the ICT boundary and anomalies")
    cmd("enable-ict", "turn In-Commit Timestamps on (writes one commit)")
    p = cmd("restore", "RESTORE TO VERSION / TIMESTAMP AS OF (writes one commit unless --dry-run)")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--version", type=int, default=None)
    target.add_argument("--timestamp", default=None, help="ISO-8601, yyyy-MM-dd[ HH:mm:ss[.SSS]] or epoch ms")
    p.add_argument("--ignore-missing-files", action="store_true", help="restore without files that are gone")
    p.add_argument("--allow-protocol-downgrade", action="store_true", help="write the target's lower protocol")
    p.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    p.add_argument(
        "--where",
        default=None,
        metavar="PREDICATE",
        help="restore only the partitions this predicate on partition columns selects, e.g. \"region = 'eu'\"",
    )
    p = cmd("reachability", "which versions can still be read or restored, and why not (newest first)")
    p.add_argument("--at", default=None, help="judge retention as of this time (default: now)")
    p.add_argument(
        "--vacuum-retention",
        default=None,
        metavar="INTERVAL",
        help='also forecast which readable versions a VACUUM with this retention ("7 days") would break',
    )
    p = cmd("keep", "write a new table whose single version 0 is a version of this one (survives its VACUUM)")
    p.add_argument("--version", type=int, required=True)
    p.add_argument("--into", required=True, metavar="DIR", help="the new table's location (must not be a table)")
    p.add_argument(
        "--hold",
        action="store_true",
        help="S3 with Object Lock: legal holds on the exact object versions instead of copies",
    )
    p = cmd("row-history", "one row's inserts, updates and deletes over a range of versions, by its key")
    p.add_argument(
        "--key",
        action="append",
        required=True,
        metavar="COLUMN=VALUE",
        help="a key column and its value (repeat for a key of several columns); cast to the column's type",
    )
    p.add_argument("--from", dest="from_version", type=int, default=None, help="first version (default: earliest)")
    p.add_argument("--to", dest="to_version", type=int, default=None, help="last version (default: latest)")
    p = cmd("verify", "each version's checksum file (_delta_log/N.crc) against a replay of the log")
    p.add_argument("--from", dest="from_version", type=int, default=None, help="first version (default: earliest)")
    p.add_argument("--to", dest="to_version", type=int, default=None, help="last version (default: latest)")
    add_audit_subcommands(sub)


def add_audit_subcommands(sub: Any) -> None:
    """`audit-export` and `audit-verify`: the signed audit export (tables.delta.history.audit)."""
    p = sub.add_parser("audit-export", help="a signed audit export of the table's commits and their hash chain")
    p.add_argument("path", help="table root: a directory or file:// URI")
    p.add_argument("--out", required=True, metavar="FILE", help="where to write the export")
    p.add_argument("--from", dest="from_version", type=int, default=None, help="first version (default: earliest)")
    p.add_argument("--to", dest="to_version", type=int, default=None, help="last version (default: latest)")
    p.add_argument(
        "--key", default=None, metavar="KEYFILE", help=f"the Ed25519 private key (PEM); default: ${AUDIT_KEY_ENV}"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p = sub.add_parser("audit-verify", help="check an audit export's signature and chain, and against a table")
    p.add_argument("path", metavar="FILE", help="the export file")
    p.add_argument("--public-key", required=True, metavar="KEYFILE", help="the Ed25519 public key (PEM or base64)")
    p.add_argument("--table", default=None, metavar="PATH", help="also check which versions' bytes still match")
    p.add_argument(
        "--accept-recorded",
        action="store_true",
        help="pass although the export records checksum mismatches or history rewrites (still listed)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")


def build_parser(prog: str = "delta") -> argparse.ArgumentParser:
    """The standalone command's parser."""
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    add_subcommands(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The `delta` console script: parse `argv` (default sys.argv[1:]), run, return the exit status."""
    # no linear algebra here: OpenBLAS, loaded with numpy (which pyarrow imports), would
    # first start a thread per core (20-30 ms of CPU, a tenth of a checkpointed snapshot)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        opts = vars(build_parser().parse_args(argv))
    except SystemExit as exc:  # --help (0) or a usage error (2, argparse printed the usage)
        return exc.code if isinstance(exc.code, int) else EXIT_FAILED
    return execute(opts)


class _NoPandas:
    """An import finder that says pandas is not installed: pyarrow imports it (0.2-0.3 s) the
    first time an array becomes numpy or a table is made empty, and no command uses it."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def script() -> int:
    """The `delta` console script's own process: `main` without pandas."""
    sys.meta_path.insert(0, _NoPandas())
    return main()


# Where a version asked for by number is read: (path, version) -> None to read the path as
# given, or (location, version there (None: its latest), note for stderr). The core reads only
# the path it is given; `manage.py delta` passes one that follows the registered table's pins.
VersionSource = Callable[[str, int], tuple[str, int | None, str] | None]


def execute(opts: Mapping[str, Any], version_source: VersionSource | None = None) -> int:
    """Run the parsed subcommand, print its JSON or text, and return the exit status.

    Errors print one `error: ...` line on stderr and return 2; nothing here raises.
    """
    sub = opts["subcommand"]
    if sub == "audit-verify":
        return _audit_verify(opts)
    try:
        payload = run(sub, opts, version_source)
    except DeltaError as exc:
        return _fail(str(exc))
    except (OSError, ValueError) as exc:
        return _fail(f"{opts.get('path')}: {exc}")
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug must still not print a traceback at the user
        return _fail(f"{opts.get('path')}: unexpected {type(exc).__name__}: {exc}")
    try:
        if opts.get("json"):
            sys.stdout.flush()  # text written before must not land after the bytes
            sys.stdout.buffer.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))
            sys.stdout.buffer.write(b"\n")
        else:
            sys.stdout.write(as_text(sub, payload))
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader went away (`delta history T | head`): no traceback, and none either from
        # the interpreter's own flush of stdout at exit
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):  # a stdout without a file descriptor (captured in-process)
            pass
        return EXIT_BROKEN_PIPE
    if sub == "verify" and not payload["ok"]:
        return EXIT_DIFFERS
    return EXIT_OK


def _fail(message: str) -> int:
    sys.stderr.write(f"error: {message.splitlines()[0] if message else 'failed'}\n")
    return EXIT_FAILED


# --- payloads --------------------------------------------------------------------------------
# The core modules are imported in the functions that need them: they bring pyarrow and numpy,
# which a usage error or --help should not wait for.


def restore_payload(path: str, opts: Mapping[str, Any]) -> dict[str, Any]:
    """Plan a RESTORE; with dry_run, the plan; otherwise commit it and return the result."""
    from tables.delta.restore.commit import commit_restore
    from tables.delta.restore.plan import plan_restore

    plan = plan_restore(
        path,
        version=opts.get("version"),
        timestamp=opts.get("timestamp"),
        ignore_missing_files=bool(opts.get("ignore_missing_files")),
        allow_protocol_downgrade=bool(opts.get("allow_protocol_downgrade")),
        where=opts.get("where"),
    )
    if opts.get("dry_run"):
        return {"dryRun": True, **plan.to_dict()}
    result = commit_restore(path, plan)
    return {"dryRun": False, **result, "plan": plan.to_dict(files=False)}


def key_pairs(given: Sequence[str]) -> list[tuple[str, str]]:
    """`--key COLUMN=VALUE` options as (column, value text) pairs, split at the first `=`."""
    pairs = []
    for text in given:
        name, sep, value = text.partition("=")
        if not sep or not name:
            raise ValueError(f"--key {text[:80]!r} is not COLUMN=VALUE")
        pairs.append((name, value))
    return pairs


def run(sub: str, opts: Mapping[str, Any], version_source: VersionSource | None = None) -> Any:
    """The payload of subcommand `sub` with parsed options `opts` (raises on failure)."""
    path = opts["path"]
    if sub == "snapshot":
        return _snapshot(path, opts.get("version"), version_source).summary(files=not opts.get("no_files"))
    if sub == "history":
        limit = opts.get("limit")
        if limit is not None and limit < 0:
            raise ValueError("--limit must be >= 0")
        from tables.delta.history.timeline import history_rows

        return history_rows(_times(path), offset=max(0, opts.get("offset") or 0), limit=limit)
    if sub == "resolve":
        from tables.delta.history.timestamps import parse_timestamp, resolve_timestamp

        t = parse_timestamp(opts["timestamp"])
        return resolve_timestamp(
            _times(path),
            t,
            allow_latest=opts.get("allow_latest", False),
            allow_earliest=opts.get("allow_earliest", False),
        )
    if sub == "timeline":
        from tables.delta.history.timeline import timeline

        return timeline(_times(path))
    if sub == "enable-ict":
        from tables.delta.write.commit import enable_ict

        return enable_ict(path)
    if sub == "restore":
        return restore_payload(path, opts)
    if sub == "reachability":
        from tables.delta.history.reachability.compute import parse_interval, reachability
        from tables.delta.history.timestamps import parse_timestamp

        at = parse_timestamp(opts["at"]) if opts.get("at") else int(time.time() * 1000)
        retention = None
        if opts.get("vacuum_retention") is not None:
            retention = parse_interval(opts["vacuum_retention"])
            if retention is None:  # ValueError: one `error:` line, status 2
                raise ValueError(
                    f"--vacuum-retention {opts['vacuum_retention'][:40]!r} is not an interval, e.g. '7 days'"
                )
        return reachability(path, at, vacuum_retention=retention).to_dict()
    if sub == "keep":
        from tables.delta.write.keep import keep_version

        if opts["version"] < 0:
            raise ValueError("--version must be >= 0")
        return keep_version(path, opts["version"], opts["into"], hold=bool(opts.get("hold"))).to_dict()
    if sub == "row-history":
        from tables.delta.history.row_history import row_history

        pairs = key_pairs(opts.get("key") or ())
        return row_history(path, pairs, opts.get("from_version"), opts.get("to_version")).to_dict()
    if sub == "verify":
        from tables.delta.snapshot.checksum import verify_checksums

        return verify_checksums(path, opts.get("from_version"), opts.get("to_version"))
    if sub == "audit-export":
        return audit_export_payload(path, opts)
    raise ValueError(f"unknown subcommand {sub}")


def warn_incomplete(listing: Any) -> None:
    """One `warning: ...` line on stderr when the log's newest commit is still being written
    (tables.delta.log.tip): the command answered up to the commit before it, and exits 0."""
    incomplete = getattr(listing, "incomplete", None)
    if incomplete is not None:
        sys.stderr.write(f"warning: {incomplete.message('run the command again once it is complete')}\n")


def _times(path: str) -> Any:
    """The log's commit times up to its last complete commit, warning about a newer one."""
    from tables.delta.history.timestamps import commit_times

    times = commit_times(path)
    warn_incomplete(times.listing)
    return times


def _snapshot(path: str, version: int | None, version_source: VersionSource | None = None) -> Any:
    """The snapshot at `version`; the latest is the last complete commit's (with a warning
    when a newer one is still being written). A version asked for by number is read as is,
    or where `version_source` says, numbered as asked."""
    from tables.delta.snapshot.state import load_snapshot

    if version is not None:
        elsewhere = version_source(path, version) if version_source is not None else None
        if elsewhere is None:
            return load_snapshot(path, version)
        location, there, note = elsewhere
        snap = dataclasses.replace(load_snapshot(location, there), version=version)
        sys.stderr.write(f"note: {note}\n")
        return snap
    storage, listing = _latest_listing(path)
    return load_snapshot(storage, None, listing=listing)


def _latest_listing(path: str) -> tuple[Any, Any]:
    """The table's storage and its log up to the last complete commit, warning about a newer one."""
    from tables.delta.log.listing import tail_listing
    from tables.delta.storage.opening import as_storage

    storage = as_storage(path)
    listing = tail_listing(storage)  # without a commit its writer has not finished
    warn_incomplete(listing)
    return storage, listing


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


def _audit_verify(opts: Mapping[str, Any]) -> int:
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
        return _fail(f"{opts.get('path')}: {exc}")
    try:
        result = verify_export(data, key, opts.get("table"), accept_recorded=bool(opts.get("accept_recorded")))
    except ExportFormatError as exc:
        result = {"ok": False, "signature": "invalid", "signatureProblem": str(exc), "chain": "unknown"}
    except DeltaError as exc:
        return _fail(str(exc))
    except (OSError, ValueError) as exc:
        return _fail(f"{opts.get('table')}: {exc}")
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
            f"{str(f.get('field'))[:80]} expected {_compact(f.get('expected'))[:80]}, found {_compact(f.get('found'))[:80]}"
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


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[("" if c is None else str(c)).replace("\n", " ")[:80] for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(out) + "\n"


def _compact(value: Any) -> str:
    return "" if value is None else orjson.dumps(value).decode() if isinstance(value, (dict, list)) else str(value)


# Long on purpose: one branch per command's text form, side by side so they stay alike.
def as_text(sub: str, p: Any) -> str:
    """The readable rendering of subcommand `sub`'s payload `p`."""
    from tables.delta.history.timestamps import format_ms

    if sub == "snapshot":
        proto = p["protocol"]
        head = [
            f"version      {p['version']}",
            f"protocol     reader {proto['minReaderVersion']}, writer {proto['minWriterVersion']}"
            + (
                f", features {', '.join(proto.get('readerFeatures') or [])} / {', '.join(proto.get('writerFeatures') or [])}"
                if proto.get("writerFeatures") is not None
                else ""
            ),
            f"table id     {p['metadata']['id']}",
            f"partitions   {', '.join(p['metadata']['partitionColumns']) or '(none)'}",
            f"files        {p['numFiles']} ({p['sizeBytes']} bytes)",
        ]
        text = "\n".join(head) + "\n"
        if "files" in p:
            text += "\n" + _table(
                ["path", "size", "partitionValues", "deletionVector"],
                [
                    [f["path"], f["size"], _compact(f["partitionValues"]), (f["deletionVector"] or {}).get("uniqueId")]
                    for f in p["files"]
                ],
            )
        return text
    if sub == "history":
        return _table(
            [
                "version",
                "timestamp",
                "source",
                "operation",
                "userName",
                "readVersion",
                "isBlindAppend",
                "operationParameters",
            ],
            [
                [
                    r["version"],
                    format_ms(r["timestamp"]),
                    r["timestampSource"],
                    r["operation"],
                    r["userName"],
                    r["readVersion"],
                    r["isBlindAppend"],
                    _compact(r["operationParameters"]),
                ]
                for r in p
            ],
        )
    if sub == "resolve":
        return (
            f"version {p['version']} (committed {p['commitTimestampIso']}, timestamp from {p['source']})\n"
            f"rule: {p['rule']}\n"
            + (
                f"alternatives: commitInfo.timestamp only -> {p['alternatives']['commitInfoTimestamp']}, "
                f"file times only -> {p['alternatives']['fileModificationTime']}\n"
                if "alternatives" in p
                else ""
            )
        )
    if sub == "timeline":
        ict = p["ict"]
        text = (
            f"ICT {'on' if ict['enabled'] else 'off'}"
            + (
                f", enabled at version {ict['enablementVersion']} ({format_ms(ict['enablementTimestamp'])})"
                if ict["enablementVersion"] is not None
                else ""
            )
            + "\n\n"
        )
        text += _table(
            ["version", "timestamp", "source", "fileModificationTime", "inCommitTimestamp", "adjusted"],
            [
                [
                    r["version"],
                    format_ms(r["timestamp"]),
                    r["source"],
                    r["fileModificationTime"],
                    r["inCommitTimestamp"],
                    r["adjusted"],
                ]
                for r in p["versions"]
            ],
        )
        if p["anomalies"]:
            text += "\nanomalies\n" + _table(
                ["version", "kind", "detail"], [[a["version"], a["kind"], a["detail"]] for a in p["anomalies"]]
            )
        return text
    if sub == "restore":
        return _restore_text(p)
    if sub == "reachability":
        return _reachability_text(p)
    if sub == "row-history":
        return _row_history_text(p)
    if sub == "keep":
        return _keep_text(p)
    if sub == "verify":
        return _verify_text(p)
    if sub == "audit-export":
        r = p["range"]
        return f"wrote {p['out']}: versions {r['from']}..{r['to']} ({p['commits']} commits), chain ends {p['last']}\n"
    return orjson.dumps(p, option=orjson.OPT_INDENT_2).decode() + "\n"


def _reachability_text(p: dict[str, Any]) -> str:
    rows = [
        [
            v["version"],
            "yes" if v["readable"] else "no",
            "yes" if v["restorable"] else "no",
            v["reason"] or "",
            v["missingFiles"]["count"] or "",
            ", ".join(v["missingFiles"]["paths"][:3]),
        ]
        for v in p["versions"]
    ]
    text = _table(["version", "readable", "restorable", "reason", "missing", "first missing files"], rows)
    for m in p.get("checkpointMismatches") or ():  # why the versions it serves are not readable
        text += f"\n{m['detail']}\n"
    forecast = p.get("vacuumForecast")
    if forecast is not None:
        broken = forecast["breaksVersions"]
        hours = forecast["retentionMs"] / 3_600_000
        head = f"\nVACUUM now with retention {hours:g} hours would make {len(broken)} readable version"
        head += ("" if len(broken) == 1 else "s") + " unreadable"
        shown = ", ".join(map(str, broken[:MAX_FORECAST_SHOWN]))
        more = f" (and {len(broken) - MAX_FORECAST_SHOWN} older)" if len(broken) > MAX_FORECAST_SHOWN else ""
        text += head + (f": {shown}{more}\n" if broken else "\n")
    return text


def _keep_text(p: dict[str, Any]) -> str:
    placed = ", ".join(f"{n} {how}" for how, n in p["placed"].items()) or "none"
    return (
        f"kept version {p['version']} of {p['source']}\n"
        f"into         {p['into']} (version 0)\n"
        f"files        {p['files']} ({p['bytes']} bytes), {p['deletionVectors']} deletion vector files\n"
        f"placed       {placed}; {p['bytesCopied']} bytes copied\n"
    )


def _row_history_text(p: dict[str, Any]) -> str:
    """One line per event: the changed columns with their values before -> after."""
    key = ", ".join(f"{k}={_compact(v)}" for k, v in p["key"].items())
    rows = []
    for e in p["events"]:
        if e["change"] == "update":
            values = "; ".join(
                f"{c}: {_compact(e['before'].get(c))} -> {_compact(e['after'].get(c))}" for c in e["changed"]
            )
        else:
            values = _compact(e["after"] if e["change"] == "insert" else e["before"])
        rows.append([e["version"], e["change"], e["timestamp"], e["user"], values])
    text = f"key {key}: {len(p['events'])} event{'' if len(p['events']) == 1 else 's'}\n\n"
    text += _table(["version", "change", "timestamp", "user", "values"], rows) if rows else "(no events)\n"
    files = p["files"]
    return text + f"\nfiles: {files['read']} read, {files['skipped']} skipped (partition values and statistics)\n"


def _verify_text(p: dict[str, Any]) -> str:
    """One line per checked version, then each disagreeing field with both values."""
    if not p["checksums"]:
        return "no checksum files (_delta_log/N.crc) among the versions the log can rebuild\n"
    rows = []
    for c in p["checksums"]:
        if c.get("error"):
            rows.append([c["version"], "unreadable", "", c["error"], ""])
        for m in c["mismatches"]:
            rows.append([c["version"], "MISMATCH", m["field"], _compact(m["expected"]), _compact(m["found"])])
        # fields an older writer's checksum does not carry: said, never a disagreement
        missing = f"{', '.join(c['notRecorded'])}: not recorded by its writer" if c.get("notRecorded") else ""
        if c["ok"]:
            rows.append([c["version"], "ok", missing, "", ""])
        elif missing:
            rows.append([c["version"], "", missing, "", ""])
    bad = sum(1 for c in p["checksums"] if not c["ok"])
    text = _table(["version", "checksum", "field", "expected (.crc)", "found (replay)"], rows)
    return text + f"\n{p['checked']} checked, {bad} disagree{'s' if bad == 1 else ''}\n"


def _partition_text(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={'null' if v is None else v}" for k, v in values.items())


def _restore_text(p: dict[str, Any]) -> str:
    plan = p if p["dryRun"] else p["plan"]
    res = plan.get("resolution")
    lines = []
    if p["dryRun"]:
        lines.append(f"dry run: nothing written; restoring would create version {plan['readVersion'] + 1}")
    else:
        lines.append(
            f"restored version {plan['targetVersion']} as version {p['version']}"
            + (" (committed before with this txnId)" if p.get("alreadyCommitted") else "")
            + (f", on top of versions {', '.join(map(str, p['rebasedOver']))}" if p.get("rebasedOver") else "")
            + f"; verified: {'yes' if p['verified'] else 'NO'}"
        )
    lines.append(f"target       version {plan['targetVersion']} (planned on version {plan['readVersion']})")
    if res:
        lines.append(f"timestamp    {plan['requested']['timestamp']} -> version {res['version']}: {res['rule']}")
    if plan.get("predicate") is not None:
        lines.append(f"where        {plan['predicate']} (partial restore: other partitions stay as they are)")
    from tables.delta.restore.rules import protocol_outcome_words

    lines.append(f"protocol     {protocol_outcome_words(plan['protocolOutcome'])}: {plan['protocolNote']}")
    for n in plan["notes"]:
        lines.append(f"note         {n}")
    impact = plan.get("rowImpact")
    if impact:
        lines.append(
            f"rows         {impact['rowsNow']} now -> {impact['rowsAfter']} after "
            f"(+{impact['rowsAdded']} added back, -{impact['rowsRemoved']} removed)"
            + ("; an estimate: some files have no statistics" if impact["estimate"] else "")
        )
    metrics = p["metrics"] if not p["dryRun"] else plan["metrics"]
    text = "\n".join(lines) + "\n\n" + _table(["metric", "value"], [[k, v] for k, v in metrics.items()])
    if impact and impact.get("partitions"):
        text += "\n" + _table(
            ["partition", "rows now", "rows after", "added", "removed"],
            [
                [_partition_text(q["partition"]) + (" (estimate)" if q["estimate"] else ""),
                 q["rowsNow"], q["rowsAfter"], q["rowsAdded"], q["rowsRemoved"]]
                for q in impact["partitions"]
            ],
        )  # fmt: skip
        if impact.get("partitionsTruncated"):
            text += f"... {impact['numPartitionsChanged']} partitions change in all (--json lists the first 100)\n"
    if p["dryRun"]:
        rows = [["add", a["path"], a.get("size")] for a in plan["adds"][:50]]
        rows += [["remove", r["path"], r.get("size")] for r in plan["removes"][:50]]
        if rows:
            text += "\n" + _table(["action", "path", "size"], rows)
        more = max(0, len(plan["adds"]) - 50) + max(0, len(plan["removes"]) - 50)
        if more:
            text += f"... and {more} more file actions (--json lists them all)\n"
    return text
