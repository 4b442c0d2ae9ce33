"""A demo table with a real history: appends, an overwrite, a delete, a checkpoint, and ICT
enabled part-way, so a newcomer sees a meaningful history, timeline and diff at once.

Data files are real Parquet written with pyarrow; commits go through the core's writer.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from tables.delta.log.actions import Metadata, Protocol
from tables.delta.log.checkpoint import write_checkpoint
from tables.delta.snapshot.state import load_snapshot
from tables.delta.storage.opening import open_storage
from tables.delta.write.commit import ENGINE_INFO, commit, enable_ict, write_commit

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "order_id", "type": "long", "nullable": False, "metadata": {}},
        {"name": "amount", "type": "double", "nullable": True, "metadata": {}},
        {"name": "region", "type": "string", "nullable": True, "metadata": {}},
    ],
}
HOUR = 3_600_000


def _data_file(root: Path, region: str, rows: list[tuple[int, float]], now: int) -> dict[str, Any]:
    rel = f"region={region}/part-00000-{uuid.uuid4()}.c000.snappy.parquet"
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({"order_id": [r[0] for r in rows], "amount": [r[1] for r in rows]})
    pq.write_table(table, root / rel)
    stats = {
        "numRecords": len(rows),
        "minValues": {"order_id": min(r[0] for r in rows), "amount": min(r[1] for r in rows)},
        "maxValues": {"order_id": max(r[0] for r in rows), "amount": max(r[1] for r in rows)},
        "nullCount": {"order_id": 0, "amount": 0},
    }
    return {
        "add": {
            "path": rel,
            "partitionValues": {"region": region},
            "size": (root / rel).stat().st_size,
            "modificationTime": now,
            "dataChange": True,
            "stats": orjson.dumps(stats).decode(),
        }
    }


def _remove(add: dict[str, Any], now: int) -> dict[str, Any]:
    a = add["add"] if "add" in add else add
    return {
        "remove": {
            "path": a["path"],
            "deletionTimestamp": now,
            "dataChange": True,
            "extendedFileMetadata": True,
            "partitionValues": a["partitionValues"],
            "size": a["size"],
        }
    }


# Long on purpose: the demo table's history told commit by commit, in order.
def build_demo_table(root: Path, seed: int = 42) -> Path:
    """Create the demo table at `root` (which must not hold a table yet)."""
    rng = random.Random(seed)
    storage = open_storage(root)
    start = (int(time.time() * 1000) // HOUR - 24) * HOUR  # a day ago, on the hour
    clock = iter(start + i * HOUR + rng.randrange(60_000) for i in range(100))
    next_id = iter(range(1, 10_000))

    def batch(region: str, n: int, now: int) -> dict[str, Any]:
        return _data_file(root, region, [(next(next_id), round(rng.uniform(5, 500), 2)) for _ in range(n)], now)

    def stamp(version: int, ms: int) -> None:
        os.utime(root / "_delta_log" / f"{version:020d}.json", ns=(ms * 1_000_000,) * 2)

    now = next(clock)
    metadata = Metadata(
        "demo-" + str(uuid.UUID(int=rng.getrandbits(128))),
        "orders",
        "Demo orders table",
        {"provider": "parquet", "options": {}},
        orjson.dumps(SCHEMA).decode(),
        ("region",),
        {},
        now,
    )
    adds = [batch(r, 20, now) for r in ("eu", "us", "apac")]
    info = {
        "timestamp": now,
        "operation": "CREATE TABLE AS SELECT",
        "operationParameters": {"partitionBy": '["region"]'},
        "isolationLevel": "Serializable",
        "isBlindAppend": True,
        "engineInfo": ENGINE_INFO,
        "operationMetrics": {"numFiles": "3", "numOutputRows": "60"},
    }
    write_commit(
        storage, 0, [{"protocol": Protocol(1, 2).to_dict()}, {"metaData": metadata.to_dict()}, *adds], info, None
    )
    stamp(0, now)

    def write(actions, operation, params, metrics=None, blind=False) -> int:
        ts = next(clock)
        res = commit(
            storage, actions, operation, params, is_blind_append=blind, operation_metrics=metrics, clock=lambda: ts
        )
        if res.in_commit_timestamp is None:
            stamp(res.version, ts)
        return res.version

    for region in ("eu", "us"):  # v1, v2: appends
        now = next(clock)
        write(
            [batch(region, 10, now)],
            "WRITE",
            {"mode": "Append", "partitionBy": "[]"},
            {"numFiles": "1", "numOutputRows": "10"},
            True,
        )
    snap = load_snapshot(root)
    now = next(clock)  # v3: overwrite everything
    fresh = [batch(r, 15, now) for r in ("eu", "us", "apac", "latam")]
    removes = [_remove({"add": f}, now) for f in snap.file_dicts()]
    write(
        [*removes, *fresh],
        "WRITE",
        {"mode": "Overwrite", "partitionBy": "[]"},
        {"numFiles": "4", "numOutputRows": "60", "numRemovedFiles": str(len(removes))},
    )
    snap = load_snapshot(root)  # v4: delete rows of one region (the file is rewritten)
    victim = next(f for f in snap.file_dicts() if f["partitionValues"].get("region") == "apac")
    now = next(clock)
    write(
        [_remove({"add": victim}, now), batch("apac", 5, now)],
        "DELETE",
        {"predicate": '["(amount > 250.0)"]'},
        {"numRemovedFiles": "1", "numAddedFiles": "1", "numDeletedRows": "10"},
    )
    now = next(clock)  # v5: append, then a checkpoint
    v5 = write(
        [batch("eu", 8, now)],
        "WRITE",
        {"mode": "Append", "partitionBy": "[]"},
        {"numFiles": "1", "numOutputRows": "8"},
        True,
    )
    write_checkpoint(storage, load_snapshot(root, v5))
    ts = next(clock)  # v6: ICT on from here
    enable_ict(storage, clock=lambda: ts)
    for region in ("us", "latam", "eu"):  # v7..v9 with In-Commit Timestamps
        now = next(clock)
        write(
            [batch(region, 12, now)],
            "WRITE",
            {"mode": "Append", "partitionBy": "[]"},
            {"numFiles": "1", "numOutputRows": "12"},
            True,
        )
    return root
