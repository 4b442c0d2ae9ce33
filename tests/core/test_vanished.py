"""Files removed outside the log, as the core sees them (tables.delta.history.vanished), against
delta-rs: the files and bytes a look finds gone are those delta-rs's VACUUM deleted, and the
versions it finds unreadable are those delta-rs can no longer load."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pyarrow as pa
import pytest

from tables.delta.history import vanished
from tables.delta.history.reachability.compute import existing_files, reach_state, update_state
from tables.delta.storage.opening import as_storage
from tests.conftest import golden_path

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

NOW = int(time.time() * 1000)


def churned_table(path: Path, commits: int = 7) -> Path:
    """Appends with two overwrites and a delete between them: tombstones of several ages."""
    for i in range(commits):
        mode = "overwrite" if i in (2, 4) else "append"
        write_deltalake(str(path), pa.table({"id": pa.array([i, i + 100], pa.int64())}), mode=mode)
    DeltaTable(str(path)).delete(f"id = {commits - 1}")
    return path


def vacuum(path: Path) -> tuple[list[str], int]:
    """delta-rs's VACUUM with retention 0: the paths it deleted and their bytes (read before).
    delta-rs also returns the tombstones that were gone already (as absolute paths): those it
    did not delete are left out."""
    sizes = {str(f.relative_to(path)): f.stat().st_size for f in path.rglob("*.parquet")}
    returned = DeltaTable(str(path)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    deleted = sorted(os.path.relpath(p, path) if os.path.isabs(p) else p for p in returned)
    deleted = [p for p in deleted if p in sizes]
    return deleted, sum(sizes[p] for p in deleted)


def unloadable(path: Path, latest: int) -> list[int]:
    """The versions delta-rs cannot read any more."""
    out = []
    for v in range(latest + 1):
        try:
            DeltaTable(str(path), version=v).to_pyarrow_table()
        except Exception:
            out.append(v)
    return out


def look(path: Path, before: vanished.Before, state=None):
    storage = as_storage(str(path))
    state = update_state(state, str(path), list_files=False)
    return state, vanished.listed_look(state, storage, existing_files(storage), before, NOW)


def kept(outcome: vanished.Outcome, version: int) -> vanished.Before:
    """What a look keeps, packed and unpacked as the database holds it."""
    hashes = outcome.hashes()
    return vanished.Before(
        version, vanished.unpack(vanished.pack(hashes)), len(hashes), outcome.missing_bytes, outcome.unreadable
    )


def test_a_vacuum_is_counted_as_delta_rs_deleted_and_breaks_what_delta_rs_cannot_load(tmp_path: Path) -> None:
    path = churned_table(tmp_path / "t")
    state, first = look(path, vanished.Before(None, None))
    assert first.missing == {} and first.referenced == len({p for p in existing_files(as_storage(str(path)))})
    deleted, size = vacuum(path)
    assert deleted
    state, after = look(path, kept(first, state.latest), state)
    assert (after.new_files, after.new_bytes) == (len(deleted), size)
    assert sorted(after.new_paths) == deleted and after.complete and after.exact
    broken = unloadable(path, state.latest)
    assert broken and vanished.in_ranges(after.became_unreadable) == set(broken)
    assert after.unreadable == after.became_unreadable
    # the next look sees the same files missing: nothing vanished since
    state, again = look(path, kept(after, state.latest), state)
    assert (again.new_files, again.became_unreadable) == (0, []) and len(again.missing) == len(deleted)


def test_a_second_removal_counts_only_what_vanished_since(tmp_path: Path) -> None:
    """Files gone at the last look are not counted again; the versions they broke already are
    not "became unreadable" again."""
    path = churned_table(tmp_path / "t")
    state, first = look(path, vanished.Before(None, None))
    removed = sorted(DeltaTable(str(path)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=True))
    (path / removed[0]).unlink()
    state, one = look(path, kept(first, state.latest), state)
    assert one.new_files == 1
    broken_first = set(unloadable(path, state.latest))
    assert vanished.in_ranges(one.became_unreadable) == broken_first
    deleted, size = vacuum(path)
    state, two = look(path, kept(one, state.latest), state)
    assert (two.new_files, two.new_bytes) == (len(deleted), size)
    assert vanished.in_ranges(two.became_unreadable) == set(unloadable(path, state.latest)) - broken_first


def test_the_golden_vacuumed_table_at_a_first_look(tmp_path: Path) -> None:
    """snapshot-vacuumed (read in place, never written): what is missing at the first look, and
    the versions that makes unreadable, are those delta-rs cannot load."""
    path = golden_path("snapshot-vacuumed")
    state = reach_state(str(path), list_files=False)
    storage = as_storage(str(path))
    first = vanished.listed_look(state, storage, existing_files(storage), vanished.Before(None, None), NOW)
    assert len(first.missing) == first.referenced - 2 and first.missing_bytes > 0
    assert vanished.in_ranges(first.unreadable) == set(unloadable(path, state.latest)) == {0, 1, 2, 3, 4}


def test_a_sample_asks_first_about_what_vacuum_deletes_first(tmp_path: Path) -> None:
    path = churned_table(tmp_path / "t")
    state = reach_state(str(path), list_files=False)
    ref = vanished.referenced_files(state)
    tombstones = sorted((r.removed, p) for p, r in ref.items() if r.removed is not None)
    asked = vanished.sample_paths(ref, vanished.Before(1, None), 2, 0, random.Random(1))
    assert asked == [p for _v, p in tombstones[:2]]
    # the ones known missing are skipped: the next oldest are asked about
    known = vanished.unpack(vanished.pack([vanished.path_hash(asked[0])]))
    assert vanished.sample_paths(ref, vanished.Before(1, known), 2, 0, random.Random(1)) == [
        p for _v, p in tombstones[1:3]
    ]
    spread = vanished.sample_paths(ref, vanished.Before(1, None), 2, 3, random.Random(1))
    assert len(spread) == 5 and len(set(spread)) == 5


def test_a_sampled_look_without_a_listing(tmp_path: Path) -> None:
    """HEADs of the sampled files find the vanished ones; the look counts them and the versions
    they break without listing the table."""
    path = churned_table(tmp_path / "t")
    state, first = look(path, vanished.Before(None, None))
    deleted, size = vacuum(path)
    storage = as_storage(str(path))
    state = update_state(state, str(path), list_files=False)
    ref = vanished.referenced_files(state)
    asked = vanished.sample_paths(ref, kept(first, state.latest), len(ref), 0, random.Random(0))
    absent = vanished.absent_among(storage, asked)
    assert sorted(absent) == deleted
    out = vanished.sampled_look(state, storage, absent, kept(first, state.latest), NOW)
    assert (out.new_files, out.new_bytes, out.complete) == (len(deleted), size, False)
    assert vanished.in_ranges(out.became_unreadable) == set(unloadable(path, state.latest))


def test_what_a_look_keeps_is_compact(tmp_path: Path) -> None:
    hashes = [vanished.path_hash(f"part-{i}.parquet") for i in range(1000)]
    packed = vanished.pack(hashes)
    assert len(packed) == 8 * 1000
    assert sorted(vanished.unpack(packed).tolist()) == sorted(hashes)
    assert vanished.digest(hashes) == vanished.digest(reversed(hashes))
    assert vanished.to_ranges([5, 1, 2, 3, 7]) == [[1, 3], [5, 5], [7, 7]]


def test_counts_only_when_the_last_look_kept_no_hashes(tmp_path: Path) -> None:
    """A look beyond DELTAWEB_VACUUM_MISSING_KEPT keeps counts: the next one compares counts."""
    path = churned_table(tmp_path / "t")
    state, _first = look(path, vanished.Before(None, None))
    deleted, size = vacuum(path)
    state, after = look(path, vanished.Before(state.latest, None, 0, 0, []), state)
    assert (after.new_files, after.new_bytes, after.exact, after.new_paths) == (len(deleted), size, False, [])
    assert vanished.in_ranges(after.became_unreadable) == set(unloadable(path, state.latest))
