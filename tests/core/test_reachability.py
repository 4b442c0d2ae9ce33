"""Reachability per version against an independent oracle.

Tables are copied, then mutilated as VACUUM (data files of removed versions deleted) and log
cleanup (commits before a checkpoint deleted) would. The oracle is delta-rs: a version is
readable when delta-rs loads it from the mutilated copy's log and every file it lists for that
version on an untouched copy still exists in the mutilated one.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pytest

from tables.delta.history.reachability.compute import DEFAULT_DELETED_FILE_RETENTION, interval_ms, reachability
from tests.conftest import golden_names, golden_path

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

NOW = int(time.time() * 1000)


def rel_files(root: Path, version: int | None = None) -> set[str]:
    """The files delta-rs lists for a version, relative to the table root and decoded."""
    dt = DeltaTable(str(root)) if version is None else DeltaTable(str(root), version=version)
    out = set()
    for uri in dt.file_uris():
        local = unquote(urlparse(uri).path) if "://" in uri else uri
        out.add(os.path.relpath(local, root))
    return out


def oracle(untouched: Path, mutilated: Path, latest: int) -> dict[int, tuple[bool, int]]:
    """version -> (readable, number of missing files) as delta-rs sees it."""
    out = {}
    for v in range(latest + 1):
        try:
            DeltaTable(str(mutilated), version=v)
        except Exception:
            out[v] = (False, -1)
            continue
        missing = [f for f in rel_files(untouched, v) if not (mutilated / f).exists()]
        out[v] = (not missing, len(missing))
    return out


def ours(path: Path) -> dict[int, tuple[bool, int]]:
    r = reachability(str(path), NOW)
    assert [v.version for v in r.versions] == list(range(r.latest_version, -1, -1))  # newest first
    return {
        v.version: (v.readable, v.missing_count if v.reason == "files_missing" else (0 if v.readable else -1))
        for v in r.versions
    }


def vacuum_all_removed(path: Path) -> list[str]:
    """Delete every data file the latest version no longer holds (VACUUM with retention 0)."""
    live = rel_files(path)
    gone = []
    for f in path.rglob("*.parquet"):
        rel = str(f.relative_to(path))
        if not rel.startswith("_delta_log") and rel not in live:
            f.unlink()
            gone.append(rel)
    return gone


def clean_log_before(path: Path, version: int) -> None:
    """Delete commits below `version` as log cleanup would (a checkpoint at `version` stays)."""
    for f in (path / "_delta_log").glob("*.json"):
        if f.name[:20].isdigit() and int(f.name[:20]) < version:
            f.unlink()
    for f in (path / "_delta_log").glob("*.crc"):
        f.unlink()


def history_table(path: Path) -> Path:
    for i in range(8):
        mode = "overwrite" if i in (3, 6) else "append"
        write_deltalake(str(path), pa.table({"id": pa.array([i, i + 100], pa.int64())}), mode=mode)
    DeltaTable(str(path)).delete("id = 106")
    return path


def test_vacuumed_delta_rs_table_agrees_with_the_oracle(tmp_path: Path) -> None:
    untouched = history_table(tmp_path / "u")
    mutilated = tmp_path / "m"
    shutil.copytree(untouched, mutilated)
    gone = vacuum_all_removed(mutilated)
    assert gone
    expected = oracle(untouched, mutilated, 8)
    assert ours(mutilated) == expected
    assert any(not ok for ok, _n in expected.values()) and expected[8] == (True, 0)
    r = reachability(str(mutilated), NOW)
    for v in r.versions:
        assert v.missing_files == sorted(v.missing_files) and set(v.missing_files) <= set(gone)
        # a restore only needs the files it would add: those the latest version lacks
        assert v.restorable == (v.readable or set(v.missing_files) <= rel_files(untouched))


def test_golden_table_after_log_cleanup_and_vacuum(tmp_path: Path) -> None:
    source = golden_path("basic-with-inserts-deletes-checkpoint")
    untouched, mutilated = tmp_path / "u", tmp_path / "m"
    shutil.copytree(source, untouched)
    shutil.copytree(source, mutilated)
    checkpoint = max(int(f.name[:20]) for f in (mutilated / "_delta_log").glob("*.checkpoint.parquet"))
    clean_log_before(mutilated, checkpoint)
    vacuum_all_removed(mutilated)
    latest = max(int(f.name[:20]) for f in (untouched / "_delta_log").glob("*.json"))
    expected = oracle(untouched, mutilated, latest)
    got = ours(mutilated)
    assert got == expected
    r = {v.version: v for v in reachability(str(mutilated), NOW).versions}
    assert all(r[v].reason == "log_expired" for v in range(checkpoint))
    assert r[checkpoint].readable or r[checkpoint].reason == "files_missing"


def test_only_a_v2_checkpoint_left(tmp_path: Path) -> None:
    table = tmp_path / "t"
    shutil.copytree(golden_path("v2-checkpoint-parquet"), table)
    checkpoints = sorted(int(f.name[:20]) for f in (table / "_delta_log").glob("*.checkpoint.*.parquet"))
    assert checkpoints
    clean_log_before(table, checkpoints[-1])
    r = {v.version: v for v in reachability(str(table), NOW).versions}
    assert r[checkpoints[-1]].readable and r[checkpoints[-1]].reason in (None, "beyond_retention")
    assert all(r[v].reason == "log_expired" and not r[v].restorable for v in range(checkpoints[-1]))


def test_a_deleted_deletion_vector_file(tmp_path: Path) -> None:
    table = tmp_path / "t"
    shutil.copytree(golden_path("dv-partitioned-with-checkpoint"), table)
    before = {v.version: v for v in reachability(str(table), NOW).versions}
    dv_files = sorted(table.rglob("deletion_vector_*.bin"))
    assert dv_files and all(v.readable for v in before.values())
    victim = dv_files[0]
    victim.unlink()
    after = {v.version: v for v in reachability(str(table), NOW).versions}
    hit = [v for v in after.values() if v.reason == "files_missing"]
    assert hit and all(not v.readable for v in hit)
    assert all(any(p.endswith(victim.name) for p in v.missing_files) for v in hit)
    assert all(after[v].readable for v in after if after[v].reason != "files_missing")


def test_retention_properties_set_and_absent(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_deltalake(str(table), pa.table({"id": pa.array([1], pa.int64())}))
    write_deltalake(str(table), pa.table({"id": pa.array([2], pa.int64())}), mode="append")
    r = reachability(str(table), NOW)
    assert r.deleted_file_retention_ms == 7 * 86_400_000 and r.log_retention_ms == 30 * 86_400_000
    assert all(v.reason is None and v.readable for v in r.versions)
    # two weeks later the first version lies beyond the default retention of deleted files
    later = reachability(str(table), NOW + 14 * 86_400_000)
    v = {x.version: x for x in later.versions}
    assert (
        v[0].readable
        and v[0].reason == "beyond_retention"
        and v[0].to_dict()["retention"]["insideDeletedFileRetention"] is False
    )
    assert v[1].reason is None  # the latest version is always inside

    short = tmp_path / "s"
    write_deltalake(
        str(short),
        pa.table({"id": pa.array([1], pa.int64())}),
        configuration={
            "delta.deletedFileRetentionDuration": "interval 1 hours",
            "delta.logRetentionDuration": "interval 2 days",
        },
    )
    write_deltalake(str(short), pa.table({"id": pa.array([2], pa.int64())}), mode="append")
    r = reachability(str(short), NOW + 2 * 3_600_000)
    assert r.deleted_file_retention_ms == 3_600_000 and r.log_retention_ms == 2 * 86_400_000
    assert {x.version: x.reason for x in r.versions} == {1: None, 0: "beyond_retention"}


def test_interval_parsing() -> None:
    assert interval_ms("interval 7 days", DEFAULT_DELETED_FILE_RETENTION) == 7 * 86_400_000
    assert interval_ms("interval 1 week", DEFAULT_DELETED_FILE_RETENTION) == 7 * 86_400_000
    assert interval_ms("168 hours", DEFAULT_DELETED_FILE_RETENTION) == 7 * 86_400_000
    assert interval_ms("interval 30 minutes", DEFAULT_DELETED_FILE_RETENTION) == 1_800_000
    assert interval_ms("nonsense", DEFAULT_DELETED_FILE_RETENTION) == 7 * 86_400_000
    assert interval_ms(None, "interval 30 days") == 30 * 86_400_000


def test_command_line_contract(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    table = history_table(tmp_path / "t")
    vacuum_all_removed(table)
    proc = subprocess.run(
        [sys.executable, "-m", "tables.delta.cli", "reachability", str(table), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, proc.stderr
    body = json.loads(proc.stdout)
    assert body["latestVersion"] == 8 and [v["version"] for v in body["versions"]] == list(range(8, -1, -1))
    for v in body["versions"]:
        assert {"version", "readable", "restorable", "reason", "missingFiles", "retention"} <= set(v)
    assert body["versions"][-1]["reason"] == "files_missing" and body["versions"][-1]["missingFiles"]["count"] >= 1


def test_vacuum_forecast_agrees_with_a_real_vacuum(tmp_path: Path) -> None:
    """The versions a VACUUM with retention 0 would break are those that stop being readable
    when delta-rs runs that VACUUM on a copy."""
    table = history_table(tmp_path / "t")
    copy = tmp_path / "c"
    shutil.copytree(table, copy)
    now = int(time.time() * 1000) + 1000  # after every commit of the table
    forecast = reachability(str(table), now, vacuum_retention=0)
    assert all(v.readable for v in forecast.versions)
    DeltaTable(str(copy)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    after = reachability(str(copy), now)
    broken = sorted(
        (v.version for v in after.versions if not v.readable and v.version <= forecast.latest_version), reverse=True
    )
    assert forecast.vacuum_breaks == broken and broken
    assert forecast.to_dict()["vacuumForecast"]["breaksVersions"] == broken
    # with a week's retention nothing written today would go
    assert reachability(str(table), now, vacuum_retention=7 * 86_400_000).vacuum_breaks == []


# --- the incremental update ---------------------------------------------------------------------


def test_an_update_after_new_commits_equals_the_full_computation(tmp_path: Path) -> None:
    from tables.delta.history.reachability.compute import answer, reach_state, update_state

    path = history_table(tmp_path / "t")
    state = reach_state(str(path))
    # new commits (an append, an overwrite, a delete) and files vacuumed with no commit at all
    write_deltalake(str(path), pa.table({"id": pa.array([50], pa.int64())}), mode="append")
    write_deltalake(str(path), pa.table({"id": pa.array([60], pa.int64())}), mode="overwrite")
    DeltaTable(str(path)).delete("id = 60")
    kept = path / "kept.tmp"
    first = sorted(rel_files(path, 0))[0]
    shutil.copy(path / first, kept)
    gone = vacuum_all_removed(path)
    assert first in gone
    shutil.move(kept, path / first)  # one removed file left for the step below
    state = update_state(state, str(path))
    assert state.updates == 1 and state.latest == 11  # extended, not recomputed
    assert answer(state, str(path), NOW).to_dict() == reachability(str(path), NOW).to_dict()
    # nothing new: the listing alone is taken again and a vacuumed file is noticed
    before = answer(state, str(path), NOW).to_dict()
    (path / first).unlink()
    state = update_state(state, str(path))
    assert state.updates == 2
    after = answer(state, str(path), NOW).to_dict()
    assert after == reachability(str(path), NOW).to_dict() and after != before


def test_an_update_recomputes_when_the_old_log_or_the_metadata_changed(tmp_path: Path) -> None:
    from tables.delta.history.reachability.compute import answer, reach_state, update_state

    path = history_table(tmp_path / "t")
    DeltaTable(str(path)).create_checkpoint()
    state = reach_state(str(path))
    clean_log_before(path, 8)  # log cleanup below the checkpoint
    state = update_state(state, str(path))
    assert state.updates == 0  # built again
    assert answer(state, str(path), NOW).to_dict() == reachability(str(path), NOW).to_dict()
    assert not answer(state, str(path), NOW).versions[-1].readable  # version 0: log expired

    # a new commit that changes the retention (metaData): built again with the new retention
    DeltaTable(str(path)).alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 2 days"})
    state = update_state(state, str(path))
    assert state.updates == 0 and state.file_ret == 2 * 86_400_000
    assert answer(state, str(path), NOW).to_dict() == reachability(str(path), NOW).to_dict()


# --- checkpoints that disagree with the log -------------------------------------------------------


def _checkpoint_of(path: Path, version: int) -> Path:
    return path / "_delta_log" / f"{version:020d}.checkpoint.parquet"


def _appends(path: Path, n: int, first: int = 0) -> Path:
    for i in range(first, first + n):
        write_deltalake(str(path), pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    return path


def _with_ghost(checkpoint: Path, ghost: str = "ghost.parquet") -> None:
    """Rewrite a checkpoint with one more add, of a file no commit ever added."""
    import pyarrow.parquet as pq

    table = pq.read_table(checkpoint)
    rows = table.to_pylist()
    add = next(r for r in rows if r.get("add"))
    rows.append({**{k: None for k in add}, "add": {**add["add"], "path": ghost}})
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), checkpoint)


def _reasons(path: Path) -> dict[int, tuple[bool, bool, str | None]]:
    return {v.version: (v.readable, v.restorable, v.reason) for v in reachability(str(path), NOW).versions}


def test_another_tables_checkpoint_is_a_checkpoint_mismatch(tmp_path: Path) -> None:
    """The hostile tester's table: the checkpoint at 5 replaced by another table's of as many
    files (so even `_last_checkpoint`'s count agrees). Every version read from it lists the
    other table's files, none of which exist; the commits 0..5 beside it say what it should
    hold, and the versions it serves are reported unreadable, not readable."""
    from tables.delta.snapshot.state import load_snapshot

    table = _appends(tmp_path / "t", 6)
    DeltaTable(str(table)).create_checkpoint()
    _appends(table, 2, first=6)
    assert all(ok for ok, _r, _reason in _reasons(table).values()), "its own checkpoint agrees"
    other = _appends(tmp_path / "other", 6, first=100)
    DeltaTable(str(other)).create_checkpoint()
    shutil.copy(_checkpoint_of(other, 5), _checkpoint_of(table, 5))

    snap = load_snapshot(str(table), 5)  # the premise: files that do not exist
    assert snap.num_files == 6 and not any((table / p).exists() for p in snap.file_paths())
    reasons = _reasons(table)
    assert all(reasons[v] == (False, False, "checkpoint_mismatch") for v in (5, 6, 7))
    assert all(reasons[v][0] for v in range(5))
    (found,) = reachability(str(table), NOW).to_dict()["checkpointMismatches"]
    assert found["version"] == 5
    assert "replayed from version 0" in found["detail"] and "its table id" in found["detail"]
    assert "it lists 6 files, the log 6 (6 not active in the log, 6 left out)" in found["detail"]


def test_a_checkpoint_listing_a_file_never_added(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same table, one file more than the commits added: found path by path, and by the
    footers' count for an older checkpoint beyond the budget of full comparisons. Versions
    read from a later, sound checkpoint stay readable."""
    from tables.delta.history.reachability import compute as reach

    table = _appends(tmp_path / "t", 4)
    DeltaTable(str(table)).create_checkpoint()  # at 3
    _appends(table, 3, first=4)
    DeltaTable(str(table)).create_checkpoint()  # at 6
    _appends(table, 1, first=7)
    _with_ghost(_checkpoint_of(table, 3))
    for budget in (10**9, -1):  # -1: only the newest checkpoint in full
        monkeypatch.setattr(reach, "full_check_budget", lambda rows, budget=budget: budget, raising=False)
        reasons = _reasons(table)
        assert [v for v, (ok, _r, _why) in reasons.items() if not ok] == [5, 4, 3]
        assert reasons[3][2] == "checkpoint_mismatch" and reasons[7][0] and reasons[6][0]
        (found,) = reachability(str(table), NOW).to_dict()["checkpointMismatches"]
        detail = found["detail"]
        assert "it lists 5 files, the log 4" in detail and "table id" not in detail
        assert ("(1 not active in the log, 0 left out)" in detail) == (budget > 0)


def test_an_update_checks_a_checkpoint_written_since(tmp_path: Path) -> None:
    from tables.delta.history.reachability.compute import answer, reach_state, update_state
    from tables.delta.log.listing import read_last_checkpoint
    from tables.delta.storage.opening import as_storage

    table = _appends(tmp_path / "t", 3)
    state = reach_state(str(table))
    _appends(table, 2, first=3)
    DeltaTable(str(table)).create_checkpoint()  # at 4, after the state was built
    _with_ghost(_checkpoint_of(table, 4))
    assert read_last_checkpoint(as_storage(str(table)))["numOfAddFiles"] == 5  # the writer's count
    state = update_state(state, str(table))
    assert state.updates == 1, "extended, not computed again"
    assert set(state.mismatches) == {4}
    assert answer(state, str(table), NOW).to_dict() == reachability(str(table), NOW).to_dict()


def _with_checkpoints() -> list[str]:
    return [n for n in golden_names() if any((golden_path(n) / "_delta_log").glob("*.checkpoint*"))]


@pytest.mark.parametrize("name", _with_checkpoints() or ["(no golden tables)"])
def test_sound_golden_checkpoints_are_not_flagged(name: str) -> None:
    """Every golden checkpoint (classic, multi-part, v2 with sidecars, deletion vectors,
    column mapping) agrees with its commits path by path, and by its footers' count."""
    from tables.delta.errors import StateReconstructionError
    from tables.delta.history.reachability import compute as reach

    try:
        state = reach.reach_state(str(golden_path(name)))
    except StateReconstructionError:
        return  # tables broken on purpose (a checkpoint without protocol or metaData)
    assert state.mismatches == {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reach, "replay_disagreement", reach.footer_disagreement)
        assert reach.reach_state(str(golden_path(name))).mismatches == {}


# --- the answer as runs (what every process reads from the shared cache) ------------------------


def test_runs_give_back_the_same_answer(tmp_path: Path) -> None:
    """Stored as runs and read back, the answer is the core's, entry for entry: vacuumed files,
    an expired log, a VACUUM forecast and a checkpoint that disagrees with the log."""
    from tables.delta.history.reachability.runs import MissingNames, ReachRuns

    untouched = history_table(tmp_path / "u")
    vacuumed = tmp_path / "m"
    shutil.copytree(untouched, vacuumed)
    vacuum_all_removed(vacuumed)
    expired = tmp_path / "e"
    shutil.copytree(vacuumed, expired)
    DeltaTable(str(expired)).create_checkpoint()
    clean_log_before(expired, 8)
    mismatched = _appends(tmp_path / "t", 6)
    DeltaTable(str(mismatched)).create_checkpoint()
    _appends(mismatched, 2, first=6)
    other = _appends(tmp_path / "other", 6, first=100)
    DeltaTable(str(other)).create_checkpoint()
    shutil.copy(_checkpoint_of(other, 5), _checkpoint_of(mismatched, 5))
    now = int(time.time() * 1000) + 1000
    answers = [
        reachability(str(vacuumed), NOW),
        reachability(str(untouched), now, vacuum_retention=0),
        reachability(str(expired), NOW),
        reachability(str(mismatched), NOW),
    ]
    for r in answers:
        expected = r.to_dict()
        index, blocks = MissingNames.blocks_of(r.gone, size=2)  # the names stored apart, in blocks
        names = MissingNames.reader(index, lambda wanted, blocks=blocks: [blocks[i] for i in wanted])
        runs = ReachRuns.from_bytes(ReachRuns.of(r).to_bytes(), names=names)
        assert runs.to_dict() == expected
        assert len(runs.starts) < len(expected["versions"])  # fewer runs than versions
        assert [runs.entry(v["version"]) for v in expected["versions"]] == expected["versions"]
        assert runs[1:3] == expected["versions"][1:3] and runs[0] == expected["versions"][0]
        assert runs.entry(len(runs)) is None and runs.entry(-1) is None
    assert "files_missing" in {v["reason"] for v in answers[0].to_dict()["versions"]}
    assert "log_expired" in {v["reason"] for v in answers[2].to_dict()["versions"]}
    broken = answers[1].vacuum_breaks
    assert broken and ReachRuns.of(answers[1]).forecast(2) == {
        "retentionMs": 0,
        "count": len(broken),
        "breaksVersions": broken[:2],
        "truncated": len(broken) > 2,
    }


def test_missing_file_names_are_kept_packed_and_read_back_whole() -> None:
    from tables.delta.history.reachability.runs import PackedPaths

    names = ["part-0.parquet", "région=é/ü ß.parquet", "", "x" * 300, "a\nb"]
    packed = PackedPaths.of(names)
    assert list(packed) == names and len(packed) == 5
    ends, blob = packed.packed()
    again = PackedPaths(memoryview(b"head" + blob), ends, 4)  # read back at an offset, as from_bytes does
    assert [again[i] for i in range(5)] == names
    assert list(PackedPaths.of([])) == [] and PackedPaths.of([]).packed()[1] == b""
