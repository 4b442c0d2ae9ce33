"""Small real Delta tables for the browser UI tests (written with delta-rs and the core's writer)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

EVIL = "<script>alert('x')</script>"

# DESCRIBE HISTORY's columns after version and timestamp, in its order: what the history tab,
# the API and the `delta history` command each show of a commit
DESCRIBE_HISTORY_DETAILS = (
    "userId",
    "userName",
    "operation",
    "operationParameters",
    "job",
    "notebook",
    "clusterId",
    "readVersion",
    "isolationLevel",
    "isBlindAppend",
    "operationMetrics",
    "userMetadata",
    "engineInfo",
)


def history_table(path: Path) -> Path:
    """v0 create (partitioned by p), v1..v2 appends, v3 a delete: WRITE x3 then DELETE."""
    import deltalake

    deltalake.write_deltalake(str(path), pa.table({"x": [1, 2], "p": ["a", "b"]}), partition_by=["p"])
    deltalake.write_deltalake(str(path), pa.table({"x": [3], "p": ["a"]}), mode="append")
    deltalake.write_deltalake(str(path), pa.table({"x": [4], "p": ["c"]}), mode="append")
    deltalake.DeltaTable(str(path)).delete("p = 'b'")
    _increasing_file_times(path)
    return path


def _increasing_file_times(path: Path) -> None:
    """Commit file times one millisecond apart at least, as commits written apart get them:
    the kernel's file clock is coarse (a few ms), so two of these fast commits can share a
    time, which the history rightly reports as an anomaly (a copied or moved table)."""
    prev = None
    for f in sorted((path / "_delta_log").glob("*.json")):
        ns = f.stat().st_mtime_ns
        if prev is not None and ns // 1_000_000 <= prev // 1_000_000:
            ns = (prev // 1_000_000 + 1) * 1_000_000
            os.utime(f, ns=(ns, ns))
        prev = ns


def ict_table(path: Path) -> Path:
    """Three delta-rs appends, ICT enabled at v3, then two more commits through the core's writer."""
    import deltalake

    from tables.delta.write.commit import commit, enable_ict

    for i in range(3):
        deltalake.write_deltalake(
            str(path), pa.table({"x": [i], "p": ["a" if i % 2 else "b"]}), mode="append", partition_by=["p"]
        )
    enable_ict(str(path))
    for i in range(2):
        now = int(time.time() * 1000)
        commit(str(path), [add_action(f"p=z/extra-{i}.parquet", {"p": "z"}, now)], "WRITE", {"mode": "Append"})
    return path


def add_action(rel: str, partition_values: dict[str, str], now: int, size: int = 1234) -> dict[str, Any]:
    return {
        "add": {
            "path": rel,
            "partitionValues": partition_values,
            "size": size,
            "modificationTime": now,
            "dataChange": True,
        }
    }


def write_raw_commit(path: Path, version: int, commit_info: dict[str, Any], actions: list[dict[str, Any]]) -> Path:
    """Write `_delta_log/<version>.json` by hand (commitInfo first), e.g. with hostile strings."""
    lines = [json.dumps({"commitInfo": commit_info})] + [json.dumps(a) for a in actions]
    f = path / "_delta_log" / f"{version:020d}.json"
    f.write_text("\n".join(lines) + "\n")
    later = time.time() + 1
    os.utime(f, (later, later))
    return f


def evil_commit(path: Path, version: int) -> Path:
    """A commit whose commitInfo carries markup in operation, userName, engineInfo and parameters."""
    info = {
        "timestamp": int(time.time() * 1000),
        "operation": f"WRITE{EVIL}",
        "operationParameters": {"mode": EVIL},
        "userName": f"mallory{EVIL}",
        "engineInfo": f"evil-engine{EVIL}",
        "operationMetrics": {"numFiles": EVIL},
        "isolationLevel": "Serializable",
        "isBlindAppend": True,
    }
    return write_raw_commit(path, version, info, [add_action(f"p=evil/evil-{version}.parquet", {"p": EVIL}, 0)])
