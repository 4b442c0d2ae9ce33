"""The answer of a later window derived from a stored one (`ReachRuns.at`) against the core's
full computation at that time, on a delta-rs table whose commits are days apart: the clock
crosses the log retention and the deleted-file retention of several versions, beside a vacuumed
range and versions the log cleanup made unreadable."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from tables.delta.history.reachability.compute import DAY_MS, answer, reach_state
from tables.delta.history.reachability.runs import MissingNames, ReachRuns
from tests.core.test_reachability import clean_log_before, vacuum_all_removed

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

VERSIONS = 14
STEP_MS = 2 * DAY_MS  # between commits: the 7-day and 30-day retentions pass over a few each


def _aged_table(path: Path, base_ms: int) -> Path:
    """14 commits two days apart (file times): appends, overwrites at 5 and 10 (their files
    vacuumed), a checkpoint at 4 and the commits before 2 cleaned up."""
    for i in range(VERSIONS):
        mode = "overwrite" if i in (5, 10) else "append"
        write_deltalake(str(path), pa.table({"id": pa.array([i, i + 100], pa.int64())}), mode=mode)
        if i == 4:
            DeltaTable(str(path)).create_checkpoint()
    vacuum_all_removed(path)
    clean_log_before(path, 2)
    for f in (path / "_delta_log").glob("*.json"):
        v = int(f.name[:20])
        os.utime(f, ((base_ms + v * STEP_MS) / 1000,) * 2)
    return path


def test_the_derived_window_equals_the_full_computation_across_retention_edges(tmp_path: Path) -> None:
    base_ms = 1_700_000_000_000
    path = _aged_table(tmp_path / "t", base_ms)
    state = reach_state(str(path))
    now0 = base_ms + VERSIONS * STEP_MS
    full0 = answer(state, str(path), now0)
    stored = ReachRuns.of(full0)
    index, blocks = MissingNames.blocks_of(full0.gone, size=3)
    kept = ReachRuns.from_bytes(stored.to_bytes(), MissingNames.reader(index, lambda w: [blocks[i] for i in w]))
    reasons = {v.reason for v in full0.versions}
    assert {"files_missing", "log_expired", "not_reproducible"} <= reasons  # vacuumed, cleaned up
    seen_log, seen_files, seen_reasons = set(), set(), set()
    # every half day from before the first commit to 40 days after the last: each version
    # leaves the deleted-file retention, then the log retention, on the way
    for now in range(base_ms - DAY_MS, now0 + 40 * DAY_MS, DAY_MS // 2):
        expected = answer(state, str(path), now)
        derived = kept.at(now)
        assert derived.to_dict() == expected.to_dict(), now
        full_runs = ReachRuns.of(expected)
        assert list(derived.starts) == list(full_runs.starts) and derived.states == full_runs.states, now
        for v in expected.versions:
            seen_log.add((v.version, v.inside_log_retention))
            seen_files.add((v.version, v.inside_file_retention))
            seen_reasons.add((v.version, v.reason))
    # the clock did cross both edges of readable versions, and beyond_retention came and went
    assert {(12, True), (12, False)} <= seen_log
    assert {(12, True), (12, False)} <= seen_files
    assert {(12, None), (12, "beyond_retention")} <= seen_reasons
    assert all(r == "files_missing" for v, r in seen_reasons if v == 6)  # vacuumed whatever the time


def test_a_derived_window_lists_a_vacuumed_versions_names_from_their_blocks(tmp_path: Path) -> None:
    base_ms = 1_700_000_000_000
    path = _aged_table(tmp_path / "t", base_ms)
    wide = tmp_path / "w"
    shutil.copytree(path, wide)
    now0 = base_ms + VERSIONS * STEP_MS
    full = answer(reach_state(str(path)), str(path), now0)
    index, blocks = MissingNames.blocks_of(full.gone, size=2)
    fetched: list[int] = []
    names = MissingNames.reader(index, lambda w: fetched.extend(w) or [blocks[i] for i in w])
    kept = ReachRuns.from_bytes(ReachRuns.of(full).to_bytes(), names).at(now0 + 9 * DAY_MS)
    listing = [kept.get(v.version) for v in full.versions]
    assert fetched == [] and all("paths" not in e["missingFiles"] for e in listing)  # counts only
    assert [e["missingFiles"]["count"] for e in listing] == [v.missing_count for v in full.versions]
    gone = next(v for v in full.versions if v.reason == "files_missing" and v.missing_count >= 2)
    assert kept.entry(gone.version)["missingFiles"]["paths"] == gone.missing_files
    assert 0 < len(set(fetched)) < len(blocks)  # only the blocks that can hold that version
