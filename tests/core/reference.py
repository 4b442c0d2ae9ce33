"""A deliberately plain replay model for tests: dicts, one action at a time, JSON commits only.

It shares no code with tables.delta, so agreement between the two means something.
"""

from __future__ import annotations

import json
from pathlib import Path


def _dv_id(dv: dict | None) -> str | None:
    if not dv:
        return None
    base = f"{dv['storageType']}{dv['pathOrInlineDv']}"
    return f"{base}@{dv['offset']}" if dv.get("offset") is not None else base


def _canon(path: str) -> str:
    for prefix in ("file:///", "file://localhost/", "file:/"):
        if path.startswith(prefix):
            return "/" + path[len(prefix) :]
    return path


def replay_json(root: Path, version: int) -> dict:
    """State at `version` from commits 0..version: {files: {key: add}, protocol, metadata, txns}."""
    files: dict[tuple[str, str | None], dict] = {}
    state: dict = {"protocol": None, "metadata": None, "txns": {}, "domains": {}}
    for v in range(version + 1):
        text = (root / "_delta_log" / f"{v:020d}.json").read_text()
        for line in text.splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            if "add" in action:
                a = action["add"]
                files[(_canon(a["path"]), _dv_id(a.get("deletionVector")))] = a
            elif "remove" in action:
                r = action["remove"]
                files.pop((_canon(r["path"]), _dv_id(r.get("deletionVector"))), None)
            elif "protocol" in action:
                state["protocol"] = action["protocol"]
            elif "metaData" in action:
                state["metadata"] = action["metaData"]
            elif "txn" in action:
                state["txns"][action["txn"]["appId"]] = action["txn"]
            elif "domainMetadata" in action:
                d = action["domainMetadata"]
                if d.get("removed"):
                    state["domains"].pop(d["domain"], None)
                else:
                    state["domains"][d["domain"]] = d
    state["files"] = files
    return state


def has_all_commits(root: Path, version: int) -> bool:
    return all((root / "_delta_log" / f"{v:020d}.json").exists() for v in range(version + 1))
