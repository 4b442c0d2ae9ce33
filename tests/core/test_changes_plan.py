"""Planning change data in the core (tables.delta.history.changes.plan_changes), without Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tables.delta.errors import LogGapError, VersionNotFoundError
from tables.delta.history.changes import plan_changes
from tables.delta.snapshot.dv import inline_descriptor
from tests.core import builders

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "x", "type": "long", "nullable": True, "metadata": {}},
        {"name": "p", "type": "string", "nullable": True, "metadata": {}},
    ],
}
BASE = 1_700_000_000_000


def meta() -> dict:
    return {
        "metaData": {
            "id": "plan",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps(SCHEMA),
            "partitionColumns": ["p"],
            "configuration": {},
            "createdTime": 0,
        }
    }


def add(path: str, p: str, data_change: bool = True, dv: dict | None = None) -> dict:
    body = {"path": path, "partitionValues": {"p": p}, "size": 1, "modificationTime": 0, "dataChange": data_change}
    if dv:
        body["deletionVector"] = dv
    return {"add": body}


def remove(path: str, p: str | None = None, data_change: bool = True, dv: dict | None = None) -> dict:
    body: dict = {"path": path, "deletionTimestamp": 0, "dataChange": data_change}
    if p is not None:
        body["partitionValues"] = {"p": p}
    if dv:
        body["deletionVector"] = dv
    return {"remove": body}


@pytest.fixture
def table(tmp_path) -> Path:
    root = tmp_path / "t"
    dv_protocol = {
        "protocol": {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["deletionVectors"],
            "writerFeatures": ["deletionVectors"],
        }
    }
    commits = [
        [dv_protocol, meta(), add("p=a/f0.parquet", "a")],
        [add("p=b/f1.parquet", "b")],
        [remove("p=b/f1.parquet")],  # no partitionValues: taken from the add of version 1
        [remove("p=a/f0.parquet", "a", False), add("p=a/g0.parquet", "a", False)],  # a compaction
        [
            remove("p=a/g0.parquet", "a"),
            add("p=a/g0.parquet", "a", dv=inline_descriptor([1, 4])),
        ],
        [
            remove("p=a/g0.parquet", "a", dv=inline_descriptor([1, 4])),
            add("p=a/g0.parquet", "a", dv=inline_descriptor([4, 7])),
        ],
        [
            {"cdc": {"path": "_change_data/c.parquet", "partitionValues": {"p": "a"}, "size": 1, "dataChange": False}},
            add("p=a/h.parquet", "a"),
        ],
    ]
    for v, actions in enumerate(commits):
        builders.write_commit(root, v, BASE + v * 1000, actions=actions)
    return root


def test_plan_entries(table) -> None:
    plan = plan_changes(table, 0)
    assert (plan.start, plan.end) == (0, 6)
    got = [(e.version, e.change_type, e.cdc, e.only, None if e.rows is None else e.rows.tolist()) for e in plan.entries]
    assert got == [
        (0, "insert", False, False, None),
        (1, "insert", False, False, None),
        (2, "delete", False, False, None),
        (4, "delete", False, True, [1, 4]),  # a DV added: its rows are deleted
        (5, "delete", False, True, [7]),  # the DV grew by 7, and 1 came back
        (5, "insert", False, True, [1]),
        (6, None, True, False, None),  # cdc files only; the add of version 6 is not read
    ]
    assert plan.entries[2].partition_values == {"p": "b"}
    assert [v.source for v in plan.versions] == ["files"] * 6 + ["cdc"]
    assert [v.timestamp for v in plan.versions] == [BASE + v * 1000 for v in range(7)]
    assert plan.versions[0].to_dict()["timestampSource"] == "file"


def test_sub_range_and_errors(table) -> None:
    plan = plan_changes(table, 2, 3)
    assert [e.version for e in plan.entries] == [2]
    with pytest.raises(VersionNotFoundError):
        plan_changes(table, 3, 7)
    with pytest.raises(VersionNotFoundError):
        plan_changes(table, -1, 2)
    (table / "_delta_log" / f"{3:020d}.json").unlink()
    with pytest.raises(LogGapError, match="3"):
        plan_changes(table, 2, 5)
