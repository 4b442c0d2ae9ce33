"""The payloads of the `delta` command and their text rendering (pure, no Django)."""

from __future__ import annotations

from typing import Any

import orjson

from .history import history_rows, timeline
from .snapshot import Snapshot, load_snapshot
from .timestamps import commit_times, format_ms, parse_timestamp, resolve_timestamp


def snapshot_payload(snap: Snapshot, files: bool = True) -> dict[str, Any]:
    md = snap.metadata
    out: dict[str, Any] = {
        "version": snap.version,
        "protocol": snap.protocol.to_dict(),
        "metadata": {
            "id": md.id,
            "name": md.name,
            "description": md.description,
            "schema": md.schema,
            "partitionColumns": list(md.partition_columns),
            "configuration": md.configuration,
            "createdTime": md.created_time,
        },
        "numFiles": snap.num_files,
        "sizeBytes": snap.size_bytes,
    }
    if files:
        out["files"] = snap.file_dicts()
    out["setTransactions"] = list(snap.txns.values())
    out["domainMetadata"] = list(snap.domains.values())
    if snap.managed is not None:  # only on managed tables: the contract of others is unchanged
        out["managed"] = snap.managed.to_dict()
        out["stalenessWarning"] = snap.staleness_warning
        out["owner"] = snap.owner_view.to_dict() if snap.owner_view is not None else None
    return out


def restore_payload(path: str, opts: dict[str, Any]) -> dict[str, Any]:
    """Plan a RESTORE; with dry_run, the plan; otherwise commit it and return the result."""
    from .restore import commit_restore, plan_restore

    plan = plan_restore(
        path,
        version=opts.get("version"),
        timestamp=opts.get("timestamp"),
        ignore_missing_files=bool(opts.get("ignore_missing_files")),
        allow_protocol_downgrade=bool(opts.get("allow_protocol_downgrade")),
    )
    if opts.get("dry_run"):
        return {"dryRun": True, **plan.to_dict()}
    result = commit_restore(path, plan)
    return {"dryRun": False, **result, "plan": plan.to_dict(files=False)}


def run(sub: str, opts: dict[str, Any]) -> Any:
    path = opts["path"]
    if sub == "snapshot":
        return snapshot_payload(load_snapshot(path, opts.get("version")), files=not opts.get("no_files"))
    if sub == "history":
        limit = opts.get("limit")
        if limit is not None and limit < 0:
            raise ValueError("--limit must be >= 0")
        return history_rows(commit_times(path), offset=max(0, opts.get("offset") or 0), limit=limit)
    if sub == "resolve":
        t = parse_timestamp(opts["timestamp"])
        return resolve_timestamp(
            commit_times(path),
            t,
            allow_latest=opts.get("allow_latest", False),
            allow_earliest=opts.get("allow_earliest", False),
        )
    if sub == "timeline":
        return timeline(commit_times(path))
    if sub == "enable-ict":
        from .commit import enable_ict

        return enable_ict(path)
    if sub == "restore":
        return restore_payload(path, opts)
    raise ValueError(f"unknown subcommand {sub}")


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[("" if c is None else str(c)).replace("\n", " ")[:80] for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(out) + "\n"


def _compact(value: Any) -> str:
    return "" if value is None else orjson.dumps(value).decode() if isinstance(value, (dict, list)) else str(value)


def as_text(sub: str, p: Any) -> str:
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
    return orjson.dumps(p, option=orjson.OPT_INDENT_2).decode() + "\n"


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
    lines.append(f"protocol     {plan['protocolOutcome']}: {plan['protocolNote']}")
    for n in plan["notes"]:
        lines.append(f"note         {n}")
    metrics = p["metrics"] if not p["dryRun"] else plan["metrics"]
    text = "\n".join(lines) + "\n\n" + _table(["metric", "value"], [[k, v] for k, v in metrics.items()])
    if p["dryRun"]:
        rows = [["add", a["path"], a.get("size")] for a in plan["adds"][:50]]
        rows += [["remove", r["path"], r.get("size")] for r in plan["removes"][:50]]
        if rows:
            text += "\n" + _table(["action", "path", "size"], rows)
        more = max(0, len(plan["adds"]) - 50) + max(0, len(plan["removes"]) - 50)
        if more:
            text += f"... and {more} more file actions (--json lists them all)\n"
    return text
