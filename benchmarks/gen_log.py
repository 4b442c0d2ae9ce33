"""Generate large synthetic Delta logs for benchmarks (commit files written directly)."""

from __future__ import annotations

import json
import os
import random
import uuid
from pathlib import Path

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "value", "type": "string", "nullable": True, "metadata": {}},
        {"name": "date", "type": "string", "nullable": True, "metadata": {}},
    ],
}


def _commit_info(ts: int, op: str = "WRITE", ict: int | None = None) -> dict:
    info = {
        "timestamp": ts,
        "operation": op,
        "operationParameters": {"mode": "Append", "partitionBy": '["date"]'},
        "isolationLevel": "Serializable",
        "isBlindAppend": True,
        "operationMetrics": {"numFiles": "1"},
        "engineInfo": "bench",
    }
    if ict is not None:
        info = {"inCommitTimestamp": ict, **info}
    return info


def write_many_adds(root: Path, commits: int = 3, adds_per_commit: int = 100_000, seed: int = 7) -> Path:
    """A partitioned table whose commits each add `adds_per_commit` files with stats."""
    rng = random.Random(seed)
    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    t0 = 1_700_000_000_000
    for v in range(commits):
        lines = [json.dumps({"commitInfo": _commit_info(t0 + v * 1000)})]
        if v == 0:
            lines.append(json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}))
            lines.append(
                json.dumps(
                    {
                        "metaData": {
                            "id": str(uuid.UUID(int=rng.getrandbits(128))),
                            "format": {"provider": "parquet", "options": {}},
                            "schemaString": json.dumps(SCHEMA),
                            "partitionColumns": ["date"],
                            "configuration": {},
                            "createdTime": t0,
                        }
                    }
                )
            )
        for i in range(adds_per_commit):
            day = f"2024-{1 + (i % 12):02d}-{1 + (i % 28):02d}"
            stats = {
                "numRecords": 1000 + i % 97,
                "minValues": {"id": i * 1000, "value": "aaa"},
                "maxValues": {"id": i * 1000 + 999, "value": "zzz"},
                "nullCount": {"id": 0, "value": 0},
            }
            add = {
                "path": f"date={day}/part-{i:05d}-{uuid.UUID(int=rng.getrandbits(128))}.c000.snappy.parquet",
                "partitionValues": {"date": day},
                "size": 10_000 + rng.randrange(90_000),
                "modificationTime": t0 + v * 1000,
                "dataChange": True,
                "stats": json.dumps(stats),
            }
            lines.append(json.dumps({"add": add}))
        (log / f"{v:020d}.json").write_text("\n".join(lines) + "\n")
        os.utime(log / f"{v:020d}.json", ((t0 + v * 1000) / 1000,) * 2)
    return root
