"""The commits and their timestamps: `delta history` (DESCRIBE HISTORY), `resolve` (TIMESTAMP AS
OF), `timeline` (each version's times, the ICT boundary, anomalies) and `enable-ict`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tables.delta.cli.base import compact, text_table, warn_incomplete


def table_times(path: str) -> Any:
    """The log's commit times up to its last complete commit, warning about a newer one."""
    from tables.delta.history.timestamps import commit_times

    times = commit_times(path)
    warn_incomplete(times.listing)
    return times


def history_payload(path: str, opts: Mapping[str, Any]) -> Any:
    """Commits newest first, from --offset, at most --limit."""
    limit = opts.get("limit")
    if limit is not None and limit < 0:
        raise ValueError("--limit must be >= 0")
    from tables.delta.history.timeline import history_rows

    return history_rows(table_times(path), offset=max(0, opts.get("offset") or 0), limit=limit)


def resolve_payload(path: str, opts: Mapping[str, Any]) -> Any:
    """The version --timestamp selects, and the rule that selected it."""
    from tables.delta.history.timestamps import parse_timestamp, resolve_timestamp

    t = parse_timestamp(opts["timestamp"])
    return resolve_timestamp(
        table_times(path),
        t,
        allow_latest=opts.get("allow_latest", False),
        allow_earliest=opts.get("allow_earliest", False),
    )


def timeline_payload(path: str, opts: Mapping[str, Any]) -> Any:
    """Every version's commit timestamps, the ICT boundary and anomalies."""
    from tables.delta.history.timeline import timeline

    return timeline(table_times(path))


def enable_ict_payload(path: str, opts: Mapping[str, Any]) -> Any:
    """Turn In-Commit Timestamps on: one commit."""
    from tables.delta.write.commit import enable_ict

    return enable_ict(path)


def history_text(p: Any) -> str:
    from tables.delta.history.timestamps import format_ms

    return text_table(
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
                compact(r["operationParameters"]),
            ]
            for r in p
        ],
    )


def resolve_text(p: Any) -> str:
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


def timeline_text(p: Any) -> str:
    from tables.delta.history.timestamps import format_ms

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
    text += text_table(
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
        text += "\nanomalies\n" + text_table(
            ["version", "kind", "detail"], [[a["version"], a["kind"], a["detail"]] for a in p["anomalies"]]
        )
    return text
