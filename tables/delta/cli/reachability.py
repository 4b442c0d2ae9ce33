"""`delta reachability`: which versions can still be read or restored and why not, and what a
VACUUM with a given retention would break."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from tables.delta.cli.base import text_table

MAX_FORECAST_SHOWN = 200  # versions listed in the text output; --json has them all


def reachability_payload(path: str, opts: Mapping[str, Any]) -> Any:
    """Each version's reachability as of --at (default: now), with --vacuum-retention's forecast."""
    from tables.delta.history.reachability.compute import parse_interval, reachability
    from tables.delta.history.timestamps import parse_timestamp

    at = parse_timestamp(opts["at"]) if opts.get("at") else int(time.time() * 1000)
    retention = None
    if opts.get("vacuum_retention") is not None:
        retention = parse_interval(opts["vacuum_retention"])
        if retention is None:  # ValueError: one `error:` line, status 2
            raise ValueError(f"--vacuum-retention {opts['vacuum_retention'][:40]!r} is not an interval, e.g. '7 days'")
    return reachability(path, at, vacuum_retention=retention).to_dict()


def reachability_text(p: dict[str, Any]) -> str:
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
    text = text_table(["version", "readable", "restorable", "reason", "missing", "first missing files"], rows)
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
