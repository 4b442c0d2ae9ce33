"""The newest commit a writer has not finished (tables.delta.log.tip): the core reads the log up
to the commit before it and names it; the `delta` command prints the history up to there,
warns on stderr and exits 0. A cut in the middle of the log, or a broken line before the last,
stays corruption (exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from tables.delta.history.timestamps import commit_times
from tables.delta.log.listing import list_log
from tables.delta.log.tip import judge
from tables.delta.storage.opening import as_storage

deltalake = pytest.importorskip("deltalake")
REPO = Path(__file__).resolve().parents[2]


def write_versions(path: Path, count: int) -> None:
    for i in range(count):
        deltalake.write_deltalake(str(path), pa.table({"id": pa.array([i], pa.int64())}), mode="append")


def commit(path: Path, version: int) -> Path:
    return path / "_delta_log" / f"{version:020d}.json"


def delta(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tables.delta.cli", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[Path, bytes]:
    path = tmp_path_factory.mktemp("tip") / "t"
    write_versions(path, 11)
    return path, commit(path, 10).read_bytes()


def test_every_cut_of_a_real_commit_is_incomplete_and_the_whole_one_is_not(written) -> None:
    _path, whole = written
    assert judge(whole) is None
    # a cut right after a whole line leaves whole JSON lines: nothing tells it from a commit
    line_ends = {i for i, b in enumerate(whole) if b == ord("\n")} | {
        i + 1 for i, b in enumerate(whole) if b == ord("\n")
    }
    cuts = [cut for cut in range(1, len(whole)) if cut not in line_ends]  # 0 bytes: an empty commit
    assert len(cuts) > len(whole) - 10
    for cut in cuts:
        assert judge(whole[:cut]) is not None, cut
    assert judge(b"") is None  # an empty commit holds no action: complete
    assert judge(b'{"commitInfo":{"a":"\xe2\x9c') == "line 1 is not valid JSON at char 20"  # a character cut in two
    assert judge(b'{"add": xx}') is None  # a wrong character: corrupt, not cut
    assert judge(b'{"a":1}\n{"b":' + b"x" * 10) is None  # the same, in the last line
    assert judge(b'{"a":\n{"b":1}\n{"c":') is None  # a broken earlier line: corrupt


def test_the_log_is_read_up_to_the_commit_before_a_cut_off_tip(written, tmp_path) -> None:
    path, whole = written
    copy = tmp_path / "t"
    subprocess.run(["cp", "-r", str(path), str(copy)], check=True)
    commit(copy, 10).write_bytes(whole[:150])
    listing = list_log(as_storage(str(copy)))
    assert [c.version for c in listing.commits] == list(range(10))
    assert listing.incomplete.version == 10 and listing.incomplete.later == ()
    assert listing.incomplete.message() == (
        "version 10's commit file is incomplete: line 1 is not valid JSON at char 150; "
        "shown up to version 9; retried on the next sync"
    )
    assert commit_times(str(copy)).latest == 9
    # two writers' commits both cut off at the tip: the oldest is named, the later counted
    commit(copy, 11).write_bytes(whole[:20])
    listing = list_log(as_storage(str(copy)))
    assert [c.version for c in listing.commits] == list(range(10)) and listing.incomplete.later == (11,)
    # once the file is whole it is an ordinary commit again
    commit(copy, 11).unlink()
    commit(copy, 10).write_bytes(whole)
    listing = list_log(as_storage(str(copy)))
    assert listing.incomplete is None and listing.latest_commit == 10


def test_a_single_cut_off_commit_keeps_its_error(tmp_path) -> None:
    path = tmp_path / "one"
    write_versions(path, 1)
    commit(path, 0).write_bytes(commit(path, 0).read_bytes()[:100])
    out = delta("history", str(path))
    assert out.returncode == 2 and "00000000000000000000.json: line 1 is not valid JSON" in out.stderr


def test_delta_history_prints_up_to_the_last_complete_commit_and_warns(written, tmp_path) -> None:
    path, whole = written
    copy = tmp_path / "t"
    subprocess.run(["cp", "-r", str(path), str(copy)], check=True)
    commit(copy, 10).write_bytes(whole[:150])
    out = delta("history", str(copy), "--json")
    assert out.returncode == 0, out.stderr
    assert [r["version"] for r in json.loads(out.stdout)] == list(range(9, -1, -1))
    assert out.stderr == (
        "warning: version 10's commit file is incomplete: line 1 is not valid JSON at char 150; "
        "shown up to version 9; run the command again once it is complete\n"
    )
    text = delta("history", str(copy), "--limit", "1")
    assert text.returncode == 0 and text.stdout.splitlines()[2].startswith("9 ") and "warning:" in text.stderr
    snap = delta("snapshot", str(copy), "--json", "--no-files")
    assert snap.returncode == 0 and json.loads(snap.stdout)["version"] == 9 and "version 10" in snap.stderr
    assert delta("timeline", str(copy), "--json").returncode == 0


def test_delta_history_of_a_log_cut_in_the_middle_is_an_error(written, tmp_path) -> None:
    path, _whole = written
    copy = tmp_path / "t"
    subprocess.run(["cp", "-r", str(path), str(copy)], check=True)
    commit(copy, 5).write_bytes(commit(copy, 5).read_bytes()[:150])
    out = delta("history", str(copy))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("error: ") and "00000000000000000005.json: line 1 is not valid JSON" in out.stderr
