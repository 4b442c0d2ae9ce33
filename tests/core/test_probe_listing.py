"""The tail of a local log found by probing the names after the last synced version
(tables.delta.log.listing.probe_log_tail) instead of reading the whole directory: the same
files as the directory's listing from that version, and a listing whenever the probes cannot
vouch for the tail (a gap, a checkpoint-only tail, a hint naming a checkpoint no probe finds,
the version itself gone). Tables written by delta-rs."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from tables.delta.log import listing as listing_module
from tables.delta.log.listing import LOG_DIR, list_log_from, list_log_tail, probe_log_tail, trim_incomplete_tip
from tables.delta.storage.opening import as_storage

deltalake = pytest.importorskip("deltalake")

LAST = 15  # versions 0..15


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("probe") / "t"
    for i in range(LAST + 1):
        deltalake.write_deltalake(str(path), pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    return path


@pytest.fixture
def table(written, tmp_path) -> Path:
    copy = tmp_path / "t"
    shutil.copytree(written, copy)
    return copy


def commit(path: Path, version: int) -> Path:
    return path / LOG_DIR / f"{version:020d}.json"


def listed(storage, version: int) -> list:
    return list(storage.list_from(LOG_DIR, start_after=f"{LOG_DIR}/{version:020d}"))


def same_as_listing(path: Path, version: int) -> list[int]:
    """The tail's commit versions, checked equal to those of the directory's listing."""
    storage = as_storage(str(path))
    tail = list_log_tail(storage, version)
    assert tail == listed(storage, version)
    probed_listing = list_log_from(storage, version, tail)
    full_listing = list_log_from(storage, version, listed(storage, version))
    trim_incomplete_tip(storage, probed_listing)
    trim_incomplete_tip(storage, full_listing)
    versions = [c.version for c in probed_listing.commits]
    assert versions == [c.version for c in full_listing.commits]
    assert sorted(probed_listing.checkpoints) == sorted(full_listing.checkpoints)
    return versions


def test_a_grown_log_is_found_by_probes_without_reading_the_directory(table, monkeypatch) -> None:
    storage = as_storage(str(table))
    expected = listed(storage, 10)

    def no_listing(*args, **kwargs):
        raise AssertionError("the directory was read")

    monkeypatch.setattr(os, "listdir", no_listing)
    monkeypatch.setattr(os, "scandir", no_listing)
    assert probe_log_tail(storage, 10) == expected
    assert list_log_tail(storage, 10) == expected
    assert [i.path.rsplit("/", 1)[-1] for i in expected][:2] == [f"{10:020d}.json", f"{11:020d}.json"]


def test_a_gap_in_the_tail_is_listed(table) -> None:
    commit(table, 12).unlink()
    assert probe_log_tail(as_storage(str(table)), 10) is None
    assert same_as_listing(table, 10) == [10, 11, 13, 14, 15]


def test_a_gap_wider_than_one_name_is_listed(table) -> None:
    for v in (11, 12, 13, 14):
        commit(table, v).unlink()
    assert probe_log_tail(as_storage(str(table)), 10) is None
    assert same_as_listing(table, 10) == [10, 15]


def test_a_missed_probe_of_the_synced_version_itself_is_listed(table) -> None:
    commit(table, 10).unlink()  # log cleanup, or a rewrite, took the last synced commit
    assert probe_log_tail(as_storage(str(table)), 10) is None
    assert same_as_listing(table, 10) == [11, 12, 13, 14, 15]


def test_a_checkpoint_only_tail_is_listed(table) -> None:
    deltalake.DeltaTable(str(table)).create_checkpoint()  # at 15, with _last_checkpoint
    commit(table, 15).unlink()
    assert probe_log_tail(as_storage(str(table)), 10) is None
    assert same_as_listing(table, 10) == [10, 11, 12, 13, 14]


def test_a_classic_checkpoint_in_the_tail_is_probed(table) -> None:
    deltalake.DeltaTable(str(table)).create_checkpoint()
    storage = as_storage(str(table))
    assert probe_log_tail(storage, 10) == listed(storage, 10)
    assert same_as_listing(table, 10) == list(range(10, 16))


def test_a_hint_naming_a_checkpoint_no_probe_finds_is_listed(table) -> None:
    # a multi-part checkpoint at 13: names the probes cannot guess, named by _last_checkpoint
    deltalake.DeltaTable(str(table)).create_checkpoint()
    log = table / LOG_DIR
    classic = log / f"{15:020d}.checkpoint.parquet"
    for part in (1, 2):
        shutil.copy(classic, log / f"{13:020d}.checkpoint.{part:010d}.{2:010d}.parquet")
    classic.unlink()
    (log / "_last_checkpoint").write_text(json.dumps({"version": 13, "size": 30, "parts": 2}))
    assert probe_log_tail(as_storage(str(table)), 10) is None
    assert same_as_listing(table, 10) == list(range(10, 16))


def test_a_hint_newer_than_the_probed_commits_is_listed(table) -> None:
    (table / LOG_DIR / "_last_checkpoint").write_text(json.dumps({"version": 40, "size": 3}))
    assert probe_log_tail(as_storage(str(table)), 10) is None
    assert same_as_listing(table, 10) == list(range(10, 16))


def test_a_newest_commit_still_being_written_is_left_out_as_by_the_listing(table) -> None:
    whole = commit(table, 15).read_bytes()
    commit(table, 15).write_bytes(whole[: len(whole) // 2])  # its writer is half-way
    storage = as_storage(str(table))
    assert probe_log_tail(storage, 10) == listed(storage, 10)
    assert same_as_listing(table, 10) == [10, 11, 12, 13, 14]


def test_a_tail_longer_than_a_round_of_probes(table, monkeypatch) -> None:
    monkeypatch.setattr(listing_module, "PROBE_ROUND", 2)
    monkeypatch.setattr(listing_module, "PROBE_AHEAD", 1)
    storage = as_storage(str(table))
    assert probe_log_tail(storage, 0) == listed(storage, 0)
    commit(table, 9).unlink()
    assert probe_log_tail(storage, 0) is None
    assert same_as_listing(table, 0) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15]
