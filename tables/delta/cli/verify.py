"""`delta verify`: each version's checksum file (_delta_log/N.crc) against a replay of the log."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tables.delta.cli.base import compact, text_table


def verify_payload(path: str, opts: Mapping[str, Any]) -> Any:
    """Every checksum file from --from to --to, checked (`ok` false: one disagrees)."""
    from tables.delta.snapshot.checksum import verify_checksums

    return verify_checksums(path, opts.get("from_version"), opts.get("to_version"))


def verify_text(p: dict[str, Any]) -> str:
    """One line per checked version, then each disagreeing field with both values."""
    if not p["checksums"]:
        return "no checksum files (_delta_log/N.crc) among the versions the log can rebuild\n"
    rows = []
    for c in p["checksums"]:
        if c.get("error"):
            rows.append([c["version"], "unreadable", "", c["error"], ""])
        for m in c["mismatches"]:
            rows.append([c["version"], "MISMATCH", m["field"], compact(m["expected"]), compact(m["found"])])
        # fields an older writer's checksum does not carry: said, never a disagreement
        missing = f"{', '.join(c['notRecorded'])}: not recorded by its writer" if c.get("notRecorded") else ""
        if c["ok"]:
            rows.append([c["version"], "ok", missing, "", ""])
        elif missing:
            rows.append([c["version"], "", missing, "", ""])
    bad = sum(1 for c in p["checksums"] if not c["ok"])
    text = text_table(["version", "checksum", "field", "expected (.crc)", "found (replay)"], rows)
    return text + f"\n{p['checked']} checked, {bad} disagree{'s' if bad == 1 else ''}\n"
