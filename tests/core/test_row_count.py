"""A version's row count from the log, without reading the data: numRecords of the adds'
stats, else the Parquet footers, less deletion vectors. Checked against delta-rs's read of
the same tables (len of to_pyarrow_table), with and without the stats in the log, and against
the golden deletion-vector table (50 generated rows, version v deleted v of them)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pyarrow as pa
import pytest

from tables.delta.snapshot.row_count import row_count
from tables.delta.snapshot.state import load_snapshot
from tables.delta.storage.opening import as_storage
from tests.conftest import golden_path

deltalake = pytest.importorskip("deltalake")


def count(path: Path, version: int | None = None):
    return row_count(as_storage(str(path)), load_snapshot(str(path), version))


def strip_stats(path: Path, versions: range | None = None) -> int:
    """Remove the stats of the adds in the log's JSON commits (of `versions`, else all), as a
    writer that collects none leaves them; how many adds lost their stats."""
    stripped = 0
    for f in sorted((path / "_delta_log").glob("*.json")):
        if versions is not None and int(f.name[:20]) not in versions:
            continue
        lines = []
        for line in f.read_text().splitlines():
            action = json.loads(line) if line.strip() else None
            if action and "add" in action and "stats" in action["add"]:
                del action["add"]["stats"]
                stripped += 1
                line = json.dumps(action)
            lines.append(line)
        os.chmod(f, os.stat(f).st_mode | stat.S_IWUSR)  # golden copies keep their read-only mode
        f.write_text("\n".join(lines) + "\n")
    return stripped


def written_by_delta_rs(path: Path) -> Path:
    """Appends in two partitions, a delete that rewrites files, another append."""
    deltalake.write_deltalake(str(path), pa.table({"id": list(range(100)), "p": ["a", "b"] * 50}), partition_by=["p"])
    deltalake.write_deltalake(str(path), pa.table({"id": list(range(100, 137)), "p": ["a"] * 37}), mode="append")
    deltalake.DeltaTable(str(path)).delete("id % 3 = 0")
    deltalake.write_deltalake(str(path), pa.table({"id": [999], "p": ["c"]}), mode="append")
    return path


def test_equals_delta_rs_from_stats_and_from_footers(tmp_path) -> None:
    path = written_by_delta_rs(tmp_path / "t")
    for version in range(4):
        expected = len(deltalake.DeltaTable(str(path), version=version).to_pyarrow_table())
        got = count(path, version)
        assert got.rows == expected and got.complete and got.from_stats == got.files, version
    assert count(path).rows == 91 + 1  # 137 rows, 46 of them multiples of 3, then one more
    # the same log without any stats: every file counted from its footer
    assert strip_stats(path) > 0
    got = count(path)
    assert got.rows == len(deltalake.DeltaTable(str(path)).to_pyarrow_table())
    assert got.from_footers == got.files and got.from_stats == 0 and got.complete


def test_a_file_neither_counts_is_reported_not_zero(tmp_path) -> None:
    path = written_by_delta_rs(tmp_path / "t")
    strip_stats(path)
    everything = count(path).rows
    gone = load_snapshot(str(path)).files.column("path").to_pylist()[0]
    (path / gone).unlink()
    got = count(path)
    assert got.unknown_files == 1 and not got.complete
    assert 0 < got.rows < everything  # the other files' rows: "at least", never a 0 for the lost file


def test_an_empty_table_has_zero_rows(tmp_path) -> None:
    path = tmp_path / "t"
    deltalake.write_deltalake(str(path), pa.table({"id": [1, 2]}))
    deltalake.DeltaTable(str(path)).delete()
    got = count(path)
    assert got.files == 0 and got.rows == 0 and got.complete


def test_golden_deletion_vectors_are_taken_off(golden_copy) -> None:
    original = golden_path("dv-partitioned-with-checkpoint")
    for version in (0, 1, 9, 10, 11, 15):  # around the checkpoint at 10
        got = count(original, version)
        assert got.rows == 50 - version and got.complete, version
    # the commits after the checkpoint without stats: their files (with deletion vectors)
    # counted from the footers, less the vectors' cardinality
    path = golden_copy("dv-partitioned-with-checkpoint")
    assert strip_stats(path, range(11, 16)) > 0
    got = count(path)
    assert got.rows == 35 and got.from_footers > 0 and got.from_stats > 0 and got.complete
