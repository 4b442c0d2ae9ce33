"""`delta keep`: a version of a table written as a new table's version 0."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def keep_payload(path: str, opts: Mapping[str, Any]) -> Any:
    """Keep --version into --into (--hold: legal holds on S3 with Object Lock)."""
    from tables.delta.write.keep import keep_version

    if opts["version"] < 0:
        raise ValueError("--version must be >= 0")
    return keep_version(path, opts["version"], opts["into"], hold=bool(opts.get("hold"))).to_dict()


def keep_text(p: dict[str, Any]) -> str:
    placed = ", ".join(f"{n} {how}" for how, n in p["placed"].items()) or "none"
    return (
        f"kept version {p['version']} of {p['source']}\n"
        f"into         {p['into']} (version 0)\n"
        f"files        {p['files']} ({p['bytes']} bytes), {p['deletionVectors']} deletion vector files\n"
        f"placed       {placed}; {p['bytesCopied']} bytes copied\n"
    )
