"""Write a small example Delta table into an object store (docker-compose's MinIO) with the
project's own core: Parquet files written by pyarrow, commits put-if-absent through the storage
layer. Three versions (create, append, a delete that rewrites one file), partitioned by region,
so history, diffs, previews and a RESTORE have something to show.

    python scripts/seed_example_table.py s3://deltaweb/examples/sales

The endpoint and credentials come from the standard variables (AWS_ENDPOINT_URL,
AWS_ALLOW_HTTP, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION). The bucket must exist
(docker-compose's minio-setup creates it). A table already there is left alone, so the
one-shot service can run on every `docker-compose up`. Exit status 0 when the table is there.
"""

from __future__ import annotations

import io
import json
import sys
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tables.delta.errors import DeltaError
from tables.delta.log.listing import commit_name
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import open_storage
from tables.delta.write.commit import commit, new_table_metadata, now_ms, write_commit

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": False, "metadata": {}},
        {"name": "region", "type": "string", "nullable": True, "metadata": {}},
        {"name": "product", "type": "string", "nullable": True, "metadata": {}},
        {"name": "amount", "type": "double", "nullable": True, "metadata": {}},
        {"name": "sold_at", "type": "timestamp", "nullable": True, "metadata": {}},
    ],
}
PARTITIONS = ["region"]
PRODUCTS = ["lamp", "desk", "chair", "shelf"]
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def rows(first: int, count: int, region: str) -> pa.Table:
    """Rows first..first+count-1 of one region (the partition column is not in the files)."""
    ids = list(range(first, first + count))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "product": [PRODUCTS[i % len(PRODUCTS)] for i in ids],
            "amount": pa.array([round(10 + (i * 7.3) % 90, 2) for i in ids], pa.float64()),
            "sold_at": pa.array([START + timedelta(hours=i) for i in ids], pa.timestamp("us", "UTC")),
        }
    )


def add_file(storage: Storage, region: str, table: pa.Table) -> dict[str, Any]:
    """Write one data file under region=<region>/ and return its add action."""
    buf = io.BytesIO()
    pq.write_table(table, buf)
    data = buf.getvalue()
    path = f"region={region}/part-{uuid.uuid4()}.snappy.parquet"
    storage.put(path, data, overwrite=True)  # a fresh name: nothing to overwrite
    return {
        "add": {
            "path": path,
            "partitionValues": {"region": region},
            "size": len(data),
            "modificationTime": now_ms(),
            "dataChange": True,
            "stats": json.dumps({"numRecords": table.num_rows}),
        }
    }


def seed(location: str) -> str:
    """Create the example table at `location` unless a table is there; what happened, in words."""
    storage = open_storage(location)
    if storage.exists(commit_name(0)):
        return f"{storage.display()}: a table is there already; left alone"
    eu, us = rows(0, 40, "eu"), rows(40, 30, "us")
    eu_add, us_add = add_file(storage, "eu", eu), add_file(storage, "us", us)
    now = now_ms()
    metadata = new_table_metadata(str(uuid.uuid4()), "sales", "deltaweb's example table", SCHEMA, PARTITIONS, {}, now)
    info = {
        "timestamp": now,
        "operation": "CREATE TABLE AS SELECT",
        "operationParameters": {"partitionBy": json.dumps(PARTITIONS)},
        "isBlindAppend": True,
        "engineInfo": "deltaweb-seed",
    }
    actions = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, {"metaData": metadata}, eu_add, us_add]
    write_commit(storage, 0, actions, info, None)
    commit(storage, [add_file(storage, "eu", rows(70, 20, "eu"))], "WRITE", {"mode": "Append"}, is_blind_append=True)
    # a DELETE as engines write one: the file that held the rows is removed, its other rows rewritten
    kept = eu.filter(pc.greater_equal(eu.column("amount"), 20.0))
    removed = {
        "remove": {
            "path": eu_add["add"]["path"],
            "partitionValues": {"region": "eu"},
            "size": eu_add["add"]["size"],
            "deletionTimestamp": now_ms(),
            "dataChange": True,
        }
    }
    result = commit(storage, [removed, add_file(storage, "eu", kept)], "DELETE", {"predicate": '["amount < 20"]'})
    return f"{storage.display()}: example table written, versions 0..{result.version}"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: seed_example_table.py s3://bucket/prefix/table", file=sys.stderr)
        return 2
    try:
        print(seed(argv[0]))
    except DeltaError as exc:  # a named error (access denied, missing bucket, ...): one line
        print(f"seed_example_table: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
