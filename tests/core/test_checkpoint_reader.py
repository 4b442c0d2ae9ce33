"""The checkpoint reader trusts a Parquet footer's statistics only to skip what is absent.

A delta-rs checkpoint (adds, remove tombstones, set transactions, protocol and metadata in
the middle of the file) is rewritten row for row: shuffled, in row groups of a few rows, with
and without statistics. Whatever the layout, the snapshot must be the one delta-rs reads from
the same files, and the one the JSON commits alone give.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tables.delta.errors import CorruptCheckpointError
from tables.delta.log.checkpoint import ParquetPart, _all_equal
from tables.delta.snapshot.state import Snapshot, _has_byte, load_snapshot
from tables.delta.storage.opening import as_storage

deltalake = pytest.importorskip("deltalake")
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake  # noqa: E402

LOG = "_delta_log"


def _commit(app: str, version: int) -> CommitProperties:
    return CommitProperties(app_transactions=[Transaction(app, version, 1_700_000_000_000 + version)])


def _rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "p": pa.array([f"p{i % 3}" for i in ids])})


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A partitioned table with a checkpoint at its last version holding removes and txns."""
    path = tmp_path_factory.mktemp("cp") / "t"
    write_deltalake(path, _rows(list(range(12))), partition_by=["p"], commit_properties=_commit("app-a", 1))
    for i in range(4):
        write_deltalake(path, _rows([100 + i]), mode="append", commit_properties=_commit(f"app-{i % 2}", i))
    DeltaTable(path).delete("id = 3")  # tombstones
    DeltaTable(path).delete("p = 'p1'")
    DeltaTable(path).create_checkpoint()
    return path


def _checkpoint(path: Path) -> Path:
    (cp,) = sorted((path / LOG).glob("*.checkpoint.parquet"))
    return cp


def _relayout(src: Path, dst: Path, order: str, row_group_size: int, statistics: bool) -> None:
    """Copy the table, rewriting its checkpoint's rows in another order and layout."""
    shutil.copytree(src, dst)
    cp = _checkpoint(dst)
    table = pq.read_table(cp)
    n = table.num_rows
    idx = {"reversed": np.arange(n)[::-1], "shuffled": np.random.default_rng(7).permutation(n)}[order]
    pq.write_table(table.take(pa.array(idx)), cp, row_group_size=row_group_size, write_statistics=statistics)


def _deltars_paths(path: Path) -> list[str]:
    """delta-rs's active files (URIs or absolute paths) relative to the table root."""
    root = path.resolve()
    return sorted(
        os.path.relpath(unquote(urlparse(u).path) if u.startswith("file:") else u, root)
        for u in DeltaTable(str(path)).file_uris()
    )


def _state(snap: Snapshot) -> tuple:
    files = sorted(
        (r["path"], r["size"], tuple(sorted((r["partitionValues"] or {}).items())))
        for r in snap.files.select(["path", "size", "partitionValues"]).to_pylist()
    )
    return (
        snap.version,
        files,
        snap.protocol.to_dict(),
        snap.metadata.to_dict(),
        {a: t["version"] for a, t in snap.txns.items()},
    )


def _json_only(src: Path, dst: Path) -> Snapshot:
    shutil.copytree(src, dst)
    for f in (dst / LOG).iterdir():
        if "checkpoint" in f.name:
            f.unlink()
    return load_snapshot(dst)


@pytest.mark.parametrize(
    ("order", "row_group_size", "statistics"),
    [("reversed", 1 << 20, True), ("shuffled", 3, True), ("shuffled", 3, False), ("reversed", 1, True)],
)
def test_any_layout_reads_the_same_state(
    source: Path, tmp_path: Path, order: str, row_group_size: int, statistics: bool
) -> None:
    path = tmp_path / "t"
    _relayout(source, path, order, row_group_size, statistics)
    ours = load_snapshot(path)
    assert ours.segment.checkpoint, "the snapshot starts from the checkpoint"
    dt = DeltaTable(str(path))
    assert ours.version == dt.version()
    assert sorted(ours.file_paths()) == _deltars_paths(path), "the same files as delta-rs"
    assert {a: t["version"] for a, t in ours.txns.items()} == {
        a: dt.transaction_version(a) for a in ("app-a", "app-0", "app-1")
    }
    assert _state(ours) == _state(_json_only(source, tmp_path / "json")), "the same state as the JSON commits"
    assert ours.tombstones.num_rows > 0, "the checkpoint's remove tombstones are read"


def test_a_commit_after_the_checkpoint(source: Path, tmp_path: Path) -> None:
    path = tmp_path / "t"
    _relayout(source, path, "shuffled", 4, True)
    dt = DeltaTable(str(path))
    dt.delete("p = 'p0'")
    write_deltalake(path, _rows([500]), mode="append", commit_properties=_commit("app-a", 9))
    ours = load_snapshot(path)
    assert _state(ours) == _state(_json_only(path, tmp_path / "json"))
    assert sorted(ours.file_paths()) == _deltars_paths(path)
    assert ours.txns["app-a"]["version"] == 9


def test_footer_counts_match_the_rows(source: Path, tmp_path: Path) -> None:
    """The per-row-group counts the reader skips by are the actions really there (None
    without statistics: such a file is read whole)."""
    for statistics in (True, False):
        path = tmp_path / f"t{statistics}"
        _relayout(source, path, "shuffled", 5, statistics)
        rel = str(_checkpoint(path).relative_to(path))
        part = ParquetPart(as_storage(path), rel)
        pf = pq.ParquetFile(_checkpoint(path))
        for kind in ("add", "remove", "txn", "metaData", "protocol", "domainMetadata"):
            got = part.counts(kind)
            if not statistics:
                assert set(got) == {None}, kind
                continue
            want = [
                pf.read_row_group(g, columns=[kind]).column(kind).is_valid().to_numpy(zero_copy_only=False).sum()
                for g in range(pf.metadata.num_row_groups)
            ]
            assert got == want, kind
        if statistics:
            assert sum(part.counts("remove")) > 0 and sum(part.counts("domainMetadata")) == 0


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["a", "b%20c", "d"], True),
        (["a", "b", "c"], False),
        ([], False),
        (["", ""], False),
        (["x" * 700_000 + "%"], True),  # beyond the first piece of the scan
    ],
)
def test_has_byte(values: list[str], expected: bool) -> None:
    arr = pa.array(values, pa.string())
    assert _has_byte(arr, b"%") is expected
    assert _has_byte(pa.array(values, pa.large_string()), b"%") is expected
    if len(values) == 3:
        assert _has_byte(arr.slice(2), b"%") is False, "a slice scans only its own strings"
        assert _has_byte(arr.slice(1, 1), b"%") is expected


@pytest.mark.parametrize(
    ("values", "key", "expected"),
    [
        (["part", "part", "part"], "part", True),
        (["part", "parx", "part"], "part", False),
        (["part", "par", "partt"], "part", False),  # same total length, other boundaries
        (["é", "é"], "é", True),
        (["", ""], "", True),
        (["part", None], "part", False),
        ([], "part", True),
    ],
)
def test_all_equal(values: list[str | None], key: str, expected: bool) -> None:
    arr = pa.array(values, pa.string())
    assert _all_equal(arr, key) is expected
    assert _all_equal(pa.array(values, pa.large_string()), key) is expected
    assert _all_equal(pa.array(["zz", *values], pa.string()).slice(1), key) is expected, "a slice"


def test_a_missing_sidecar_is_named(golden_copy) -> None:
    """The sidecars' reads start on threads; a missing one is still one clear error."""
    t = golden_copy("v2-checkpoint-parquet")
    (sidecar,) = sorted((t / LOG / "_sidecars").glob("*.0000000001.*.parquet"))
    sidecar.unlink()
    with pytest.raises(CorruptCheckpointError, match="checkpoint file is missing") as exc:
        load_snapshot(t)
    assert sidecar.name in str(exc.value)


def test_unreadable_file_actions_are_a_corrupt_checkpoint(source: Path, tmp_path: Path) -> None:
    """The add column's pages are decoded on a thread: its failure reaches the caller as the
    checkpoint's error (the footer, protocol and metadata still read fine)."""
    path = tmp_path / "t"
    shutil.copytree(source, path)
    cp = _checkpoint(path)
    rg = pq.ParquetFile(cp).metadata.row_group(0)
    (col,) = [rg.column(i) for i in range(rg.num_columns) if rg.column(i).path_in_schema == "add.path"]
    with open(cp, "r+b") as fh:
        fh.seek(col.data_page_offset)
        fh.write(b"\xff" * 32)
    with pytest.raises(CorruptCheckpointError, match="unreadable checkpoint"):
        load_snapshot(path)


def test_a_checkpoint_in_more_parts_than_are_read_ahead(source: Path, tmp_path: Path) -> None:
    """A multi-part checkpoint of 7 parts (more than the reads started on threads), rows
    shuffled across them: the same state as delta-rs and as the JSON commits."""
    path = tmp_path / "t"
    shutil.copytree(source, path)
    cp = _checkpoint(path)
    version = int(cp.name.split(".")[0])
    table = pq.read_table(cp)
    table = table.take(pa.array(np.random.default_rng(3).permutation(table.num_rows)))
    parts = 7
    bounds = np.linspace(0, table.num_rows, parts + 1).astype(int)
    for i in range(parts):
        name = f"{version:020d}.checkpoint.{i + 1:010d}.{parts:010d}.parquet"
        pq.write_table(table.slice(bounds[i], bounds[i + 1] - bounds[i]), path / LOG / name)
    cp.unlink()
    (path / LOG / "_last_checkpoint").write_text(f'{{"version":{version},"size":{table.num_rows},"parts":{parts}}}')
    ours = load_snapshot(path)
    assert len(ours.segment.checkpoint) == parts
    assert sorted(ours.file_paths()) == _deltars_paths(path)
    assert _state(ours) == _state(_json_only(source, tmp_path / "json"))


def test_a_load_that_fails_leaves_no_checkpoint_read_running(golden_copy, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkpoint's file actions are decoded on a thread while the commits after it are
    parsed; when a commit is corrupt, the load must return only once that read is done (a
    thread still inside pyarrow when the `delta` command exits aborts the process)."""
    import threading
    import time

    from tables.delta.errors import CorruptLogError
    from tables.delta.log import checkpoint

    path = golden_copy("checkpoint")
    commit = path / LOG / f"{13:020d}.json"
    commit.write_bytes(commit.read_bytes().rstrip(b"\n") + b'\n{"add": {"path": garbage\n')
    real = checkpoint.open_parquet
    finished = []

    def slow_on_threads(*args, **kwargs):
        if threading.current_thread() is not threading.main_thread():
            time.sleep(0.5)  # the read outlasts the parse of the corrupt commit
            finished.append(True)
        return real(*args, **kwargs)

    monkeypatch.setattr(checkpoint, "open_parquet", slow_on_threads)
    with pytest.raises(CorruptLogError):
        load_snapshot(str(path))
    assert finished, "the load raised while its read on a thread was still running"


def test_a_checkpoint_that_disagrees_with_last_checkpoint_is_refused(source: Path, tmp_path: Path) -> None:
    """`_last_checkpoint` says how many adds its writer put in the newest checkpoint: a load
    counts them anyway, so a checkpoint swapped for one with other files is refused, named,
    at no cost, whichever way the snapshot is asked for; a hint without the count, or of
    another version, says nothing against it."""
    import json

    from tables.delta.errors import CheckpointMismatchError
    from tables.delta.history.reachability.compute import reachability

    path = tmp_path / "t"
    shutil.copytree(source, path)
    cp = _checkpoint(path)
    version = int(cp.name[:20])
    hint = json.loads((path / LOG / "_last_checkpoint").read_text())
    adds = len(load_snapshot(path).file_paths())
    assert hint["version"] == version and hint["numOfAddFiles"] == adds  # delta-rs writes the count
    table = pq.read_table(cp)
    keep = [i for i, r in enumerate(table.column("add").to_pylist()) if r is None] + [
        i for i, r in enumerate(table.column("add").to_pylist()) if r is not None
    ][1:]
    pq.write_table(table.take(pa.array(keep)), cp)  # one file fewer than the writer left
    for ask in (None, version):
        with pytest.raises(CheckpointMismatchError) as exc:
            load_snapshot(path, ask)
        assert exc.value.code == "checkpoint_mismatch" and cp.name in str(exc.value)
        assert f"_last_checkpoint says it holds {adds} files, it holds {adds - 1}" in str(exc.value)
    # with the commits before it cleaned up only the hint can tell: reachability agrees with the load
    cleaned = tmp_path / "cleaned"
    shutil.copytree(path, cleaned)
    for f in (cleaned / LOG).glob("*.json"):
        if int(f.name[:20]) < version:
            f.unlink()
    reach = reachability(str(cleaned), 0).to_dict()
    assert [v["reason"] for v in reach["versions"] if v["version"] >= version] == ["checkpoint_mismatch"]
    assert "_last_checkpoint says" in reach["checkpointMismatches"][0]["detail"]
    (path / LOG / "_last_checkpoint").write_text(json.dumps({"version": version, "size": 3}))
    assert len(load_snapshot(path).file_paths()) == adds - 1
    (path / LOG / "_last_checkpoint").write_text(json.dumps({**hint, "version": version - 1}))  # stale
    assert len(load_snapshot(path, version).file_paths()) == adds - 1
