"""Conformance on the golden tables written by Delta Lake on Spark, against delta-rs.

For every table and every version delta-rs loads, the active files (raw log paths), the
protocol and the metadata must equal delta-rs's. Tables built to fail must fail with the
clear error the `delta` command shows. Where delta-rs itself cannot read a table, the
table is listed below with what we return, checked against the plain reference replay.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from tables.delta import errors
from tables.delta.log.listing import list_log
from tables.delta.snapshot.state import load_snapshot
from tables.delta.storage.opening import open_storage
from tests.conftest import GOLDEN, golden_names
from tests.core.reference import has_all_commits, replay_json

deltalake = pytest.importorskip("deltalake")

# Tables built to fail, and the error (type, words) we must give.
EXPECTED_ERRORS = {
    "deltalog-invalid-protocol-version": (errors.UnsupportedFeatureError, "reader version 99"),
    "versions-not-contiguous": (errors.LogGapError, "missing commit versions 1"),
    "deltalog-state-reconstruction-without-metadata": (errors.StateReconstructionError, "no metaData"),
    "deltalog-state-reconstruction-without-protocol": (errors.StateReconstructionError, "no protocol"),
    "deltalog-state-reconstruction-from-checkpoint-missing-metadata": (errors.StateReconstructionError, "no metaData"),
    "deltalog-state-reconstruction-from-checkpoint-missing-protocol": (errors.StateReconstructionError, "no protocol"),
    "no-delta-log-folder": (errors.NotADeltaTableError, "not a Delta table"),
    # its commits hold no metaData at all; delta-rs fails the same way ("No table metadata found")
    "data-reader-absolute-paths-escaped-chars": (errors.StateReconstructionError, "no metaData"),
}

# delta-rs 1.6 cannot load these (it rejects a metaData without schemaString, which Delta
# Lake accepts); we read them, and check against the reference replay of the JSON commits.
DELTA_RS_CANNOT_READ = {
    "canonicalized-paths-normal-a": "metaData lacks schemaString; v1 removes 'file:/x' which is the added '/x': 0 files",
    "canonicalized-paths-normal-b": "as -a, with file:/// paths",
    "canonicalized-paths-special-a": "as -a, with escaped characters in the path",
    "canonicalized-paths-special-b": "as -b, with escaped characters in the path",
    "corrupted-last-checkpoint": "delta-rs fails on the checkpoint's metaData; we read the same state with or without the hint",
    "deltalog-commit-info": "metaData lacks schemaString; one file",
    "update-deleted-directory": "checkpoint metaData lacks schemaString; we read it",
}


def table_dirs() -> list[str]:
    """Every directory under golden/ that is a table root (some nest them one level down)."""
    out = []
    for name in golden_names():
        top = GOLDEN / name
        if (top / "_delta_log").is_dir() or name in EXPECTED_ERRORS:
            out.append(name)
            continue
        nested = sorted(p.parent.relative_to(GOLDEN).as_posix() for p in top.glob("*/_delta_log"))
        nested += sorted(p.parent.relative_to(GOLDEN).as_posix() for p in top.glob("*/*/_delta_log"))
        out.extend(nested or [name])
    return out


TABLES = table_dirs()


def rs_paths(dt) -> list[str]:
    return sorted(pa.table(dt.get_add_actions(flatten=True)).column("path").to_pylist())


def rs_latest(path: Path):
    try:
        return deltalake.DeltaTable(str(path))
    except Exception:
        return None


@pytest.mark.skipif(not TABLES, reason=f"golden tables not found under {GOLDEN}")
@pytest.mark.parametrize("name", TABLES)
def test_golden_table(name: str) -> None:
    path = GOLDEN / name
    if name in EXPECTED_ERRORS:
        kind, words = EXPECTED_ERRORS[name]
        with pytest.raises(kind) as exc:
            load_snapshot(path)
        assert words in str(exc.value)
        assert str(path.name) in str(exc.value)
        assert rs_latest(path) is None, "delta-rs reads a table we refuse"
        return
    if not (path / "_delta_log").is_dir():
        with pytest.raises(errors.NotADeltaTableError):
            load_snapshot(path)
        assert rs_latest(path) is None
        return
    dt = rs_latest(path)
    if dt is None:
        assert name in DELTA_RS_CANNOT_READ, f"delta-rs cannot read {name}: list it with what we return"
        snap = load_snapshot(path)
        if has_all_commits(path, snap.version):
            ref = replay_json(path, snap.version)
            assert (
                sorted(k[0] for k in ref["files"])
                == sorted(p[5:] if p.startswith("file:") else p for p in snap.files.column("path").to_pylist())
                or sorted(ref["files"]) == []
            )
            assert snap.num_files == len(ref["files"])
        no_hint = load_snapshot(path, snap.version)  # an explicit version ignores _last_checkpoint
        assert no_hint.num_files == snap.num_files
        return
    assert name not in DELTA_RS_CANNOT_READ, f"delta-rs reads {name} now: compare it instead"
    compared = 0
    for v in range(dt.version() + 1):
        try:
            rv = deltalake.DeltaTable(str(path), version=v)
        except Exception:
            continue
        snap = load_snapshot(path, v)
        assert sorted(snap.files.column("path").to_pylist()) == rs_paths(rv), f"version {v}"
        proto = rv.protocol()
        assert (snap.protocol.min_reader_version, snap.protocol.min_writer_version) == (
            proto.min_reader_version,
            proto.min_writer_version,
        )
        assert sorted(snap.protocol.reader_features or []) == sorted(proto.reader_features or [])
        assert sorted(snap.protocol.writer_features or []) == sorted(proto.writer_features or [])
        md = rv.metadata()
        assert snap.metadata.id == md.id
        assert list(snap.metadata.partition_columns) == list(md.partition_columns)
        assert snap.metadata.configuration == dict(md.configuration)
        assert snap.metadata.name == md.name and snap.metadata.description == md.description
        assert snap.metadata.created_time == md.created_time
        compared += 1
    assert compared > 0


def test_canonicalized_paths_remove_the_added_file() -> None:
    for name in ("canonicalized-paths-normal-a", "canonicalized-paths-special-b"):
        path = GOLDEN / name
        if not path.is_dir():
            pytest.skip("golden tables absent")
        assert load_snapshot(path, 0).num_files == 1
        assert load_snapshot(path).num_files == 0


def test_corrupted_last_checkpoint_falls_back_to_listing() -> None:
    path = GOLDEN / "corrupted-last-checkpoint"
    if not path.is_dir():
        pytest.skip("golden tables absent")
    snap = load_snapshot(path)
    ref = replay_json(path, snap.version)
    assert snap.version == 10
    assert sorted(snap.files.column("path").to_pylist()) == sorted(k[0] for k in ref["files"])


@pytest.mark.parametrize("name", ["v2-checkpoint-json", "v2-checkpoint-parquet", "multi-part-checkpoint"])
def test_checkpoint_kinds_match_json_replay(name: str) -> None:
    path = GOLDEN / name
    if not path.is_dir():
        pytest.skip("golden tables absent")
    snap = load_snapshot(path)
    assert snap.segment.checkpoint is not None, "the checkpoint should be used"
    ref = replay_json(path, snap.version)
    assert sorted(snap.files.column("path").to_pylist()) == sorted(k[0] for k in ref["files"])
    assert snap.metadata.id == ref["metadata"]["id"]


def test_dv_identity_keeps_both_vectors_apart() -> None:
    path = GOLDEN / "log-replay-dv-key-cases"
    if not path.is_dir():
        pytest.skip("golden tables absent")
    for v in range(4):
        snap = load_snapshot(path, v)
        ref = replay_json(path, v)
        ours = sorted(
            zip(
                snap.files.column("path").to_pylist(),
                [d["uniqueId"] if d else None for d in [f["deletionVector"] for f in snap.file_dicts()]],
                strict=True,
            ),
            key=str,
        )
        assert ours == sorted(((k[0], k[1]) for k in ref["files"]), key=str)


def test_listing_sees_every_checkpoint_kind() -> None:
    path = GOLDEN / "multi-part-checkpoint"
    if not path.is_dir():
        pytest.skip("golden tables absent")
    listing = list_log(open_storage(path))
    assert [f.part for f in listing.checkpoints[1]] == [1, 2]
