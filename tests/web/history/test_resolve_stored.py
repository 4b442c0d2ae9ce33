"""TIMESTAMP AS OF from the synced rows: the same answer the log gives, without opening it."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tables.delta.errors import NotADeltaTableError, TimestampOutOfRangeError
from tables.delta.history.timestamps import commit_times, resolve_timestamp
from tables.delta.storage.local import LocalStorage
from tables.services.catalog import registration
from tables.services.errors import ServiceError
from tables.services.history.query import version_at_time
from tables.services.sync import store as sync
from tables.services.versions import read as versions
from tests.core.builders import add, file_table, ict_table, write_commit

pytestmark = pytest.mark.django_db


def _iso(t: int) -> str:
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=t)).isoformat()


def _live(path: Path, t: int, **flags: bool) -> dict | str:
    try:
        return resolve_timestamp(commit_times(str(path)), t, **flags)
    except TimestampOutOfRangeError as exc:
        return str(exc)


def _served(table, t: int, **flags: bool) -> dict | str:
    try:
        found = versions.resolve(table, _iso(t), **flags)
    except ServiceError as exc:
        return exc.message
    return found.answer  # the core's answer (its reachability entry aside)


def _synced(tmp_path: Path, settings, build) -> tuple[Path, object]:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = build(tmp_path / "t")
    table = registration.register_table("t", str(path))
    assert "error" not in sync.sync_table(table.pk)
    table.refresh_from_db()
    return path, table


@pytest.mark.parametrize(
    "build",
    [
        # In-Commit Timestamps from version 3, the file times of 4 and 5 far later (a copy)
        lambda p: ict_table(p, [1000, 2000, 3000, 3600, 100_000, 100_001], [None, None, None, 3500, 4000, 5000], 3),
        # ICT from the start
        lambda p: ict_table(p, [10, 20, 30, 40], [1000, 2000, 3000, 4000]),
        # no ICT, equal file times (a copied table): monotonized
        lambda p: file_table(p, [5000, 5000, 5000, 6000, 5500]),
    ],
    ids=["enabled-midway", "ict-from-zero", "file-times"],
)
def test_every_time_gets_the_logs_answer(tmp_path, settings, build) -> None:
    path, table = _synced(tmp_path, settings, build)
    stamps = sorted({r["timestamp"] for r in versions_rows(table)})
    probes = sorted({x + d for x in stamps for d in (-1, 0, 1)} | {stamps[-1] + 500})
    for t in probes:
        for flags in ({}, {"allow_latest": True, "allow_earliest": True}):
            assert _served(table, t, **flags) == _live(path, t, **flags), (t, flags)
        found = version_at_time(table, _iso(t))  # the History tab's jump: the same version
        live = _live(path, t, allow_latest=True)
        assert found == (live["version"] if isinstance(live, dict) else None)


def versions_rows(table) -> list[dict]:
    return list(table.commits.values("version", "timestamp"))


def test_the_rows_answer_without_listing_the_log_and_newer_times_ask_it(tmp_path, settings, monkeypatch) -> None:
    path, table = _synced(
        tmp_path, settings, lambda p: ict_table(p, [1000, 2000, 3000, 3600], [None, None, 3500, 4000], 2)
    )
    expect = _served(table, 3700)
    assert expect["version"] == 2 and expect["source"] == "ict"
    # a commit after the sync: a time after the last synced commit asks the log and finds it
    write_commit(path, 4, 5000, ict=4500, actions=[add("part-00004.parquet")])
    assert _served(table, 4600, allow_latest=True)["version"] == 4
    # a log that cannot be listed (an injected failure): times the rows decide are still answered
    with monkeypatch.context() as m:
        m.setattr(LocalStorage, "list_from", _unlistable)
        m.setattr(LocalStorage, "list_dir", _unlistable)
        assert _served(table, 3700) == expect
        assert _served(table, 2500)["version"] == 1
    # the log gone: the log says so, not the rows
    shutil.move(path / "_delta_log", tmp_path / "moved")
    with pytest.raises(NotADeltaTableError):
        versions.resolve(table, _iso(3700))


def _unlistable(*_args, **_kw):
    raise AssertionError("the log was listed")
