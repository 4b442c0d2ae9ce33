"""A copied table is not a silent one: the golden tables' commit files all carry the instant
they were copied (the sync moves equal times a millisecond apart), so their "usual interval"
is 0 s and the silence check, or the commit-rate rule, fired seconds after registering one
("no commit for 0 s (usually one every 0 s; 10x)"). A usual interval under a second, or times
all equal, tell no cadence: nothing fires. The same golden table with its commits an hour apart
still fires once it is silent for ten hours."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from alerts.detect import silence
from alerts.detect.facts import CommitFacts
from alerts.detect.rules import MIN_USUAL_MS, commit_rate, usual_interval
from alerts.models import Alert
from tables.models import Commit, Table
from tests.alerts.conftest import register_and_sync
from tests.conftest import golden_path

GOLDEN = "basic-with-inserts-deletes-checkpoint"  # versions 0..13, a checkpoint at 10
HOUR = 3_600_000
DAY = 24 * HOUR


def commit_files(path):
    return sorted((path / "_delta_log").glob("*.json"))


def silences(table) -> list[Alert]:
    return list(Alert.objects.filter(table=table, rule=silence.SILENCE_RULE))


@pytest.mark.django_db
def test_a_golden_table_copy_is_not_silent(roots, golden_copy) -> None:
    golden_path(GOLDEN)  # skips when the golden tables are absent
    table = register_and_sync("copy", golden_copy(GOLDEN))  # file times kept from the golden tables
    times = list(table.commits.order_by("-version").values_list("timestamp", flat=True))
    assert len(times) == 14 and times[0] - times[-1] < len(times) * 50  # a copy: all within a moment
    assert usual_interval(times) is None
    now = int(time.time() * 1000)
    for later in (0, HOUR, 30 * DAY):
        assert silence.check_tables(now_ms=now + later)["alerts"] == 0
    assert silences(table) == [] and not Alert.objects.filter(table=table, rule="commit_rate").exists()


@pytest.mark.django_db
def test_a_fresh_copy_and_equal_old_times_are_not_silent(roots) -> None:
    src = golden_path(GOLDEN)
    # cp -r: every file written now, its time the copy's
    fresh = roots / "fresh"
    shutil.copytree(src, fresh, copy_function=shutil.copy)
    # the same instant, years ago, on every commit
    old = roots / "old"
    shutil.copytree(src, old, copy_function=shutil.copy)
    for f in commit_files(old):
        os.utime(f, (1_500_000_000, 1_500_000_000))
    tables = [register_and_sync("fresh", fresh), register_and_sync("old", old)]
    now = int(time.time() * 1000)
    for later in (0, 60_000, DAY, 365 * DAY):
        assert silence.check_tables(now_ms=now + later)["alerts"] == 0
    assert not Alert.objects.filter(table__in=tables, rule__in=[silence.SILENCE_RULE, "commit_rate"]).exists()


@pytest.mark.django_db
def test_the_same_golden_table_an_hour_apart_still_fires(roots) -> None:
    path = roots / "hourly"
    shutil.copytree(golden_path(GOLDEN), path, copy_function=shutil.copy)
    start = int(time.time()) * 1000 - 30 * DAY
    files = commit_files(path)
    for i, f in enumerate(files):
        t = (start + i * HOUR) / 1000
        os.utime(f, (t, t))
    table = register_and_sync("hourly", path)
    last = start + (len(files) - 1) * HOUR
    assert silence.check_tables(now_ms=last + 9 * HOUR)["alerts"] == 0  # 9 hours: not 10x yet
    assert silence.check_tables(now_ms=last + 11 * HOUR)["alerts"] == 1
    [alert] = silences(table)
    assert alert.explanation.endswith("no commit for 39600 s (usually one every 3600 s; 10x)")


def test_no_usual_interval_from_equal_or_millisecond_times() -> None:
    t = 1_700_000_000_000
    assert usual_interval([t] * 10) is None  # all equal
    assert usual_interval([t + 9 - i for i in range(10)]) is None  # monotonized: 1 ms apart
    assert usual_interval([t + (9 - i) * (MIN_USUAL_MS - 1) for i in range(10)]) is None
    assert usual_interval([t + (9 - i) * MIN_USUAL_MS for i in range(10)]) == MIN_USUAL_MS
    assert usual_interval([t + (9 - i) * HOUR for i in range(10)]) == HOUR
    # the commit-rate rule on a copy's next commit: no "silence" or "burst" from a 1 ms cadence
    table = Table(name="x", slug="x")
    earlier = [Commit(table=table, version=v, timestamp=t + v) for v in range(10, -1, -1)]
    for gap in (1, 1000, HOUR):
        now = Commit(table=table, version=11, timestamp=t + 10 + gap)
        assert commit_rate(CommitFacts(table, now, earlier[0], [], [], earlier, lambda: None), None) is None
