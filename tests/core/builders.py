"""Build small Delta logs in tests, with commit file times set by os.utime."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

SCHEMA = json.dumps({"type": "struct", "fields": [{"name": "x", "type": "long", "nullable": True, "metadata": {}}]})


def protocol(ict: bool) -> dict[str, Any]:
    if ict:
        return {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["inCommitTimestamp"]}}
    return {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}


def metadata(config: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metaData": {
            "id": "test-table",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": SCHEMA,
            "partitionColumns": [],
            "configuration": config or {},
            "createdTime": 0,
        }
    }


def add(path: str) -> dict[str, Any]:
    return {"add": {"path": path, "partitionValues": {}, "size": 10, "modificationTime": 0, "dataChange": True}}


def write_commit(
    root: Path,
    version: int,
    mtime: int,
    ict: int | None = None,
    ts: int | None = None,
    actions: list[dict[str, Any]] | None = None,
    info_first: bool = True,
    with_info: bool = True,
) -> Path:
    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    info: dict[str, Any] = {"timestamp": mtime if ts is None else ts, "operation": "WRITE", "operationParameters": {}}
    if ict is not None:
        info = {"inCommitTimestamp": ict, **info}
    body = list(actions or [add(f"part-{version:05d}.parquet")])
    lines = [json.dumps(a) for a in body]
    if with_info:
        lines.insert(0 if info_first else len(lines), json.dumps({"commitInfo": info}))
    f = log / f"{version:020d}.json"
    f.write_text("\n".join(lines) + "\n")
    os.utime(f, ns=(mtime * 1_000_000, mtime * 1_000_000))
    return f


def file_table(root: Path, mtimes: list[int]) -> Path:
    """A table without ICT: one commit per file time."""
    for v, m in enumerate(mtimes):
        extra = [protocol(False), metadata()] if v == 0 else []
        write_commit(root, v, m, actions=[*extra, add(f"part-{v:05d}.parquet")])
    return root


def ict_table(root: Path, mtimes: list[int], icts: list[int | None], enable_at: int = 0) -> Path:
    """ICT enabled at `enable_at` (0: from the start, no enablement properties)."""
    for v, m in enumerate(mtimes):
        extra: list[dict[str, Any]] = []
        if v == 0:
            extra = [
                protocol(enable_at == 0),
                metadata({"delta.enableInCommitTimestamps": "true"} if enable_at == 0 else {}),
            ]
        elif v == enable_at:
            extra = [
                protocol(True),
                metadata(
                    {
                        "delta.enableInCommitTimestamps": "true",
                        "delta.inCommitTimestampEnablementVersion": str(v),
                        "delta.inCommitTimestampEnablementTimestamp": str(icts[v]),
                    }
                ),
            ]
        write_commit(
            root, v, m, ict=icts[v] if v >= enable_at else None, actions=[*extra, add(f"part-{v:05d}.parquet")]
        )
    return root


def writable(root: Path) -> Path:
    """Golden copies keep the originals' read-only modes; tests delete and write files in them."""
    for dirpath, _dirs, files in os.walk(root):
        os.chmod(dirpath, os.stat(dirpath).st_mode | stat.S_IWUSR)
        for f in files:
            full = os.path.join(dirpath, f)
            os.chmod(full, os.stat(full).st_mode | stat.S_IWUSR)
    return root
