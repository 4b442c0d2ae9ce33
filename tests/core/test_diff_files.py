"""The diff's file samples (path, size, partition values, numRecords) read from the log agree
with delta-rs's own add actions of the same versions, whether a file's add is found in a
commit or in a checkpoint."""

from __future__ import annotations

from urllib.parse import unquote

import pyarrow as pa
import pytest

from tables.delta.snapshot.diff import snapshot_diff
from tables.delta.snapshot.state import load_snapshot

deltalake = pytest.importorskip("deltalake")


def _adds(path: str, version: int) -> dict[str, dict]:
    """delta-rs's add actions of a version by path (it gives the log's URL-encoded path:
    'p=b%2520c/...' for the file 'p=b%20c/...' that the diff names)."""
    dt = deltalake.DeltaTable(path, version=version)
    rows = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    return {
        unquote(r["path"]): {
            "size": r["size_bytes"],
            "numRecords": r["num_records"],
            "partitionValues": {"p": r["partition.p"]},
        }
        for r in rows
    }


@pytest.fixture
def table(tmp_path) -> str:
    path = str(tmp_path / "t")
    deltalake.write_deltalake(path, pa.table({"x": [1, 2, 3], "p": ["a", "b c", "b c"]}), partition_by=["p"])
    deltalake.write_deltalake(path, pa.table({"x": [4, 5], "p": ["a", "d"]}), mode="append")
    deltalake.write_deltalake(path, pa.table({"x": list(range(10, 110)), "p": ["d"] * 100}), mode="append")
    deltalake.DeltaTable(path).create_checkpoint()  # version 2's files come from the checkpoint
    deltalake.DeltaTable(path).delete("p = 'a'")  # v3: removes whole files
    deltalake.DeltaTable(path).delete("x = 2")  # v4: rewrites the 'b c' file with one row fewer
    deltalake.write_deltalake(path, pa.table({"x": [7, 8, 9, 10], "p": [None, "e", "e", "e"]}), mode="append")
    return path


def _by_path(files: list[dict]) -> dict[str, dict]:
    return {f["path"]: {k: f[k] for k in ("size", "numRecords", "partitionValues")} for f in files}


def test_diff_samples_match_delta_rs_add_actions(table) -> None:
    before, after = _adds(table, 2), _adds(table, 5)
    d = snapshot_diff(load_snapshot(table, 2), load_snapshot(table, 5), sample=100)
    added, removed = _by_path(d["filesAdded"]["sampleFiles"]), _by_path(d["filesRemoved"]["sampleFiles"])
    assert set(added) == set(after) - set(before) and len(added) == 3  # 'b c' rewritten, null and 'e' appended
    assert set(removed) == set(before) - set(after) and len(removed) == 3  # two 'a' files and the old 'b c'
    assert added == {p: after[p] for p in added}
    assert removed == {p: before[p] for p in removed}
    # the bare paths stay as they were (the API's `sample`), in the same order as sampleFiles
    assert d["filesAdded"]["sample"] == [f["path"] for f in d["filesAdded"]["sampleFiles"]]
    # the row counts say what changed: 2 'a' rows and the deleted x = 2 gone, 4 rows appended
    assert sum(f["numRecords"] for f in removed.values()) - sum(f["numRecords"] for f in added.values()) == 3 - 4
    assert sum(f["size"] for f in added.values()) == d["filesAdded"]["bytes"]


def test_diff_sample_is_capped(table) -> None:
    d = snapshot_diff(load_snapshot(table, 0), load_snapshot(table, 5), sample=1)
    assert len(d["filesAdded"]["sampleFiles"]) == 1 and d["filesAdded"]["count"] > 1
    assert len(d["filesRemoved"]["sample"]) == len(d["filesRemoved"]["sampleFiles"]) == 1
    none = snapshot_diff(load_snapshot(table, 0), load_snapshot(table, 5), sample=0)
    assert none["filesAdded"]["sampleFiles"] == [] and none["filesAdded"]["sample"] == []
