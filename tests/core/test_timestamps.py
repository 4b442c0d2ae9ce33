"""Commit timestamps, the ICT boundary, TIMESTAMP AS OF and the timeline's anomalies.

Tables are built here with real file times (os.utime); the rules are SPEC section 2 and the
In-Commit Timestamps seed. Non-ICT resolutions are compared with delta-rs.
"""

from __future__ import annotations

import os
import random
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tables.delta.errors import (
    CommitConflictError,
    InvalidTimestampError,
    PathOutsideRootsError,
    TimestampOutOfRangeError,
)
from tables.delta.history.timeline import history_rows, timeline
from tables.delta.history.timestamps import commit_times, monotonize, parse_timestamp, resolve_timestamp
from tables.delta.write.commit import commit, enable_ict
from tests.conftest import golden_path
from tests.core.builders import add, file_table, ict_table, write_commit


def resolve(path: Path, t: int, **kw):
    return resolve_timestamp(commit_times(str(path)), t, **kw)


def kinds(tl) -> list[tuple[int | None, str]]:
    return [(a["version"], a["kind"]) for a in tl["anomalies"]]


# --- parsing -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("2024-01-02", 1704153600000),
        ("2024-01-02 03:04:05", 1704164645000),
        ("2024-01-02 03:04:05.678", 1704164645678),
        ("2024-01-02T03:04:05Z", 1704164645000),
        ("2024-01-02T05:04:05+02:00", 1704164645000),
        ("2024-01-02T03:04:05.678901", 1704164645678),
        ("1704164645678", 1704164645678),
        ("1970-01-01T00:00:01.001Z", 1001),  # 1.001 s is 1000.99... ms as a float
        ("2024-01-02T03:04:05.009", 1704164645009),
        ("1969-12-31T23:59:59.9995Z", -1),  # before the epoch: the millisecond it falls in
    ],
)
def test_parse_timestamp_formats(text: str, ms: int) -> None:
    assert parse_timestamp(text) == ms


@pytest.mark.parametrize("text", ["yesterday", "2024-13-01", "", "12:00", "x" * 500])
def test_parse_timestamp_rejects_garbage(text: str) -> None:
    with pytest.raises(InvalidTimestampError):
        parse_timestamp(text)


def test_monotonize_as_delta_lake() -> None:
    assert monotonize([5, 5, 5, 3, 10]) == [5, 6, 7, 8, 10]


# --- ICT from version 0 --------------------------------------------------------------


def test_ict_from_version_zero(tmp_path: Path) -> None:
    # file times disagree with ICT on purpose: ICT must win for every version
    t = ict_table(tmp_path, mtimes=[9000, 9000, 9000], icts=[1000, 2000, 3000])
    times = commit_times(str(t))
    assert [times.timestamp(v) for v in range(3)] == [(1000, "ict"), (2000, "ict"), (3000, "ict")]
    assert resolve(t, 2000)["version"] == 1  # exactly a commit's timestamp
    assert resolve(t, 2999)["version"] == 1
    assert resolve(t, 3000)["version"] == 2
    with pytest.raises(TimestampOutOfRangeError, match="before the earliest version available") as exc:
        resolve(t, 999)
    assert exc.value.details["earliestTimestamp"] == 1000
    with pytest.raises(TimestampOutOfRangeError, match="after the latest commit") as exc:
        resolve(t, 3001)
    assert exc.value.details["latestVersion"] == 2
    assert resolve(t, 3001, allow_latest=True)["version"] == 2
    assert resolve(t, 999, allow_earliest=True)["version"] == 0


# --- ICT enabled part-way ------------------------------------------------------------


def test_enablement_boundary_splits_the_search(tmp_path: Path) -> None:
    # versions 0-2 before ICT; 3 enables it; 4-5 were copied later so their file times are large
    t = ict_table(
        tmp_path,
        mtimes=[1000, 2000, 3000, 3600, 100_000, 100_001],
        icts=[None, None, None, 3500, 4000, 5000],
        enable_at=3,
    )
    times = commit_times(str(t))
    assert times.ict.enablement_version == 3 and times.ict.enablement_timestamp == 3500
    assert [times.timestamp(v)[1] for v in range(6)] == ["file"] * 3 + ["ict"] * 3
    r = resolve(t, 3700)  # between the enablement timestamp and the next commit
    assert r["version"] == 3 and r["source"] == "ict" and r["searchRange"] == [3, 6]
    assert "enablement" in r["rule"]
    assert r["alternatives"]["fileModificationTime"] == 3  # 3600 <= 3700 < 100000
    r = resolve(t, 3500)  # exactly the enablement timestamp
    assert r["version"] == 3
    r = resolve(t, 3499)  # just before it: only versions below 3, by file time
    assert r["version"] == 2 and r["source"] == "file" and r["searchRange"] == [0, 3]
    assert resolve(t, 4500)["version"] == 4
    assert resolve(t, 2500)["version"] == 1
    with pytest.raises(TimestampOutOfRangeError, match="before the earliest"):
        resolve(t, 999)
    tl = timeline(times)
    assert tl["ict"] == {"enabled": True, "enablementVersion": 3, "enablementTimestamp": 3500}
    assert [v["source"] for v in tl["versions"]] == ["file"] * 3 + ["ict"] * 3
    assert kinds(tl) == []


def test_seed_example_file_times_after_enablement_are_ignored(tmp_path: Path) -> None:
    # the seed's point: after enablement, file times (here earlier than ICT) must not be used
    t = ict_table(tmp_path, mtimes=[1000, 2000, 2500, 2600], icts=[None, None, 5000, 6000], enable_at=2)
    assert resolve(t, 2550)["version"] == 1  # < enablement timestamp 5000: file times of 0..1 only
    assert resolve(t, 5500)["version"] == 2
    assert resolve(t, 5500)["alternatives"]["fileModificationTime"] == 3


# --- copied table, non-monotonic ICT, anomalies -------------------------------------


def test_copied_table_equal_file_times_are_monotonized(tmp_path: Path) -> None:
    t = file_table(tmp_path, [5000, 5000, 5000, 5000])
    times = commit_times(str(t))
    assert [times.timestamp(v)[0] for v in range(4)] == [5000, 5001, 5002, 5003]
    assert resolve(t, 5001)["version"] == 1
    assert resolve(t, 5003)["version"] == 3
    tl = timeline(times)
    assert [v["adjusted"] for v in tl["versions"]] == [False, True, True, True]
    assert kinds(tl) == [
        (1, "file_time_not_increasing"),
        (2, "file_time_not_increasing"),
        (3, "file_time_not_increasing"),
    ]


def test_ict_anomalies(tmp_path: Path) -> None:
    t = ict_table(tmp_path, mtimes=[1, 2, 3, 4], icts=[1000, 3000, 2000, 4000])  # v2 goes back in time
    write_commit(t, 4, 5, ict=None, actions=[add("p4")])  # no ICT while on
    write_commit(t, 5, 6, ict=6000, actions=[add("p5")], info_first=False)
    write_commit(t, 6, 7, actions=[add("p6")], with_info=False)
    tl = timeline(commit_times(str(t)))
    assert kinds(tl) == [
        (2, "ict_not_increasing"),
        (4, "ict_missing"),
        (5, "commitinfo_not_first"),
        (6, "ict_missing"),
    ]


def test_enablement_properties_inconsistent_and_not_after_previous(tmp_path: Path) -> None:
    t = ict_table(tmp_path, mtimes=[1000, 2000, 3000], icts=[None, None, 1500], enable_at=2)
    # the enabling commit's ICT (1500) is not after version 1's file time (2000): writer rule 5
    tl = timeline(commit_times(str(t)))
    assert (2, "enablement_not_after_previous") in kinds(tl)
    # now make the property disagree with the enabling commit
    f = t / "_delta_log" / f"{2:020d}.json"
    st = f.stat()
    f.write_text(
        f.read_text().replace(
            '"delta.inCommitTimestampEnablementTimestamp": "1500"',
            '"delta.inCommitTimestampEnablementTimestamp": "1400"',
        )
    )
    os.utime(f, ns=(st.st_mtime_ns, st.st_mtime_ns))
    assert (2, "enablement_properties_inconsistent") in kinds(timeline(commit_times(str(t))))


def test_enablement_version_missing_while_older_commits_exist(tmp_path: Path) -> None:
    t = ict_table(tmp_path, mtimes=[1000, 2000], icts=[None, None], enable_at=5)  # no ICT yet
    from tests.core.builders import metadata, protocol

    write_commit(t, 2, 3000, ict=3500, actions=[protocol(True), metadata({"delta.enableInCommitTimestamps": "true"})])
    tl = timeline(commit_times(str(t)))
    assert (0, "enablement_properties_inconsistent") in kinds(tl)


# --- checkpoints and cleaned-up logs ------------------------------------------------


def test_cleaned_up_log_earliest_is_the_checkpoint(tmp_path: Path) -> None:
    deltalake = pytest.importorskip("deltalake")
    import pyarrow as pa

    p = tmp_path / "t"
    for i in range(5):
        deltalake.write_deltalake(str(p), pa.table({"x": [i]}), mode="append")
    deltalake.DeltaTable(str(p)).create_checkpoint()  # at version 4
    for v in range(5):
        f = p / "_delta_log" / f"{v:020d}.json"
        os.utime(f, ns=((v + 1) * 1_000_000 * 1_000_000,) * 2)
    for v in range(3):  # cleanup removes commits before the checkpoint
        (p / "_delta_log" / f"{v:020d}.json").unlink()
    times = commit_times(str(p))
    assert times.earliest == 4 and times.latest == 4
    with pytest.raises(TimestampOutOfRangeError, match="before the earliest version available") as exc:
        resolve(p, 4_500_000)  # version 3's time: its state cannot be rebuilt
    assert exc.value.details["earliestVersion"] == 4
    assert resolve(p, 5_000_000)["version"] == 4


# --- bisection cost, history paging --------------------------------------------------


def test_ict_resolve_reads_logarithmically_many_commits(tmp_path: Path) -> None:
    n = 1024
    t = ict_table(tmp_path, mtimes=[1] * n, icts=[1000 + 10 * v for v in range(n)])
    times = commit_times(str(t))
    rng = random.Random(1)
    for _ in range(20):
        target = rng.randrange(1000, 1000 + 10 * n)
        times.reader._cache.clear()
        times.reader.reads = 0
        r = resolve_timestamp(times, target, allow_latest=True, alternatives=False)
        assert r["version"] == (target - 1000) // 10
        assert times.reader.reads <= 2 * 11 + 2  # ~log2(1024) reads, plus the ends


def test_history_page_reads_only_its_commits(tmp_path: Path) -> None:
    t = file_table(tmp_path, list(range(1000, 1300)))
    times = commit_times(str(t))
    rows = history_rows(times, offset=0, limit=10)
    assert [r["version"] for r in rows] == list(range(299, 289, -1))
    assert times.reader.reads == 10
    assert rows[0]["timestamp"] == 1299 and rows[0]["timestampSource"] == "file"
    assert rows[0]["fileModificationTime"] == 1299
    assert set(rows[0]) >= {
        "version", "timestamp", "userId", "userName", "operation", "operationParameters", "job", "notebook",
        "clusterId", "readVersion", "isolationLevel", "isBlindAppend", "operationMetrics", "userMetadata",
        "engineInfo", "inCommitTimestamp", "fileModificationTime", "timestampSource",
    }  # fmt: skip


def test_a_long_logs_file_times_come_from_one_scan_and_links_are_still_checked(tmp_path: Path) -> None:
    t = file_table(tmp_path / "t", [1000 + 2 * v for v in range(200)])
    log = t / "_delta_log"
    # version 150's commit file is a symbolic link to a file inside the table: its target's time
    moved = t / "moved.json"
    os.replace(log / f"{150:020d}.json", moved)
    (log / f"{150:020d}.json").symlink_to(moved)
    times = commit_times(str(t))
    assert [times.timestamp(v)[0] for v in (199, 151, 150, 0)] == [1398, 1302, 1300, 1000]
    assert [r["timestamp"] for r in history_rows(times, limit=3)] == [1398, 1396, 1394]

    # a link out of the table's root is refused (the scan leaves links to the checked opener)
    outside = tmp_path / "elsewhere.json"
    outside.write_bytes((log / f"{160:020d}.json").read_bytes())
    (log / f"{160:020d}.json").unlink()
    (log / f"{160:020d}.json").symlink_to(outside)
    with pytest.raises(PathOutsideRootsError):
        history_rows(commit_times(str(t)), limit=3)


# --- delta-rs agreement (no ICT) -----------------------------------------------------


def test_file_time_resolution_agrees_with_delta_rs(tmp_path: Path) -> None:
    deltalake = pytest.importorskip("deltalake")
    import pyarrow as pa

    p = tmp_path / "t"
    for i in range(6):
        deltalake.write_deltalake(str(p), pa.table({"x": [i]}), mode="append")
    base = 1_700_000_000_000
    for v in range(6):
        f = p / "_delta_log" / f"{v:020d}.json"
        os.utime(f, ns=((base + v * 60_000) * 1_000_000,) * 2)
    times = commit_times(str(p))
    checked = 0
    for target in [base, base + 1, base + 59_999, base + 60_000, base + 150_000, base + 300_000, base + 999_999]:
        dt = deltalake.DeltaTable(str(p))
        dt.load_as_version(datetime.fromtimestamp(target / 1000, tz=UTC))
        ours = resolve_timestamp(times, target, allow_latest=True)
        assert ours["version"] == dt.version(), target
        checked += 1
    assert checked == 7


# --- golden time-travel tables ------------------------------------------------------


@pytest.mark.parametrize("name", ["time-travel-start-start20-start40", "time-travel-partition-changes-b"])
def test_golden_time_travel(name: str, golden_copy) -> None:
    golden_path(name)
    t = golden_copy(name)
    import json

    stamps = []
    for f in sorted((t / "_delta_log").glob("*.json")):
        info = next(json.loads(line)["commitInfo"] for line in f.read_text().splitlines() if '"commitInfo"' in line)
        os.utime(f, ns=(info["timestamp"] * 1_000_000,) * 2)
        stamps.append(info["timestamp"])
    for v, ts in enumerate(stamps):
        assert resolve(t, ts, allow_latest=True)["version"] == v
        if v + 1 < len(stamps):
            mid = (ts + stamps[v + 1]) // 2
            assert resolve(t, mid)["version"] == v


# --- writer side ---------------------------------------------------------------------


def test_commit_with_ict_is_after_previous_and_first(tmp_path: Path) -> None:
    t = ict_table(tmp_path, mtimes=[1, 2], icts=[10_000, 20_000])
    res = commit(str(t), [add("new.parquet")], "WRITE", clock=lambda: 15_000)  # clock behind the log
    assert res.version == 2 and res.in_commit_timestamp == 20_001
    first = (t / "_delta_log" / f"{2:020d}.json").read_text().splitlines()[0]
    assert first.startswith('{"commitInfo":{"inCommitTimestamp":20001')
    res = commit(str(t), [add("n2.parquet")], "WRITE", clock=lambda: 99_000)
    assert res.in_commit_timestamp == 99_000


def test_commit_never_overwrites(tmp_path: Path) -> None:
    t = file_table(tmp_path, [1000, 2000])
    commit(str(t), [add("a.parquet")], "WRITE", read_version=1)
    before = (t / "_delta_log" / f"{2:020d}.json").read_bytes()
    with pytest.raises(CommitConflictError) as exc:
        commit(str(t), [add("b.parquet")], "WRITE", read_version=1)
    assert exc.value.version == 2
    from tables.delta.storage.opening import open_storage
    from tables.delta.write.commit import write_commit as raw_write

    with pytest.raises(CommitConflictError, match="version 2"):
        raw_write(open_storage(t), 2, [add("c.parquet")], {"operation": "WRITE"}, None)
    assert (t / "_delta_log" / f"{2:020d}.json").read_bytes() == before
    assert not [p for p in (t / "_delta_log").iterdir() if p.name.endswith(".tmp")]


def test_enable_ict_on_table_with_history(tmp_path: Path) -> None:
    t = file_table(tmp_path, [1000, 2000, 50_000])
    out = enable_ict(str(t), clock=lambda: 40_000)  # clock before the last file time
    assert out["changed"] and out["version"] == 3
    assert out["inCommitTimestamp"] == 50_001  # rule 5: after the previous commit's file time
    times = commit_times(str(t))
    assert times.ict.enabled and times.ict.enablement_version == 3 and times.ict.enablement_timestamp == 50_001
    assert times.config.protocol.min_writer_version == 7
    assert {"inCommitTimestamp", "appendOnly", "invariants"} <= set(times.config.protocol.writer_features)
    assert kinds(timeline(times)) == []
    assert enable_ict(str(t))["changed"] is False
    deltalake = pytest.importorskip("deltalake")
    assert deltalake.DeltaTable(str(t)).version() == 3


def test_enable_ict_then_commit_keeps_boundary(tmp_path: Path) -> None:
    src = tmp_path / "src"
    file_table(src, [1000, 2000])
    dst = tmp_path / "dst"
    shutil.copytree(src, dst)
    enable_ict(str(dst), clock=lambda: 3000)
    commit(str(dst), [add("z.parquet")], "WRITE", clock=lambda: 4000)
    r = resolve(dst, 3500)
    assert r["version"] == 2 and r["source"] == "ict"
    assert resolve(dst, 1500)["version"] == 0
