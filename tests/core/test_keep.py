"""`delta keep PATH --version N --into DIR`: a version kept as a table of its own survives the
source's VACUUM and log cleanup, as delta-rs (a reader no one here wrote) sees it.

For each golden table: version N's rows read with delta-rs, the version kept with the command
line, the source vacuumed with retention 0 and its log cleaned up by delta-rs (the log's files
made as old as a table's that has been around for months, so the cleanup has something to
take), then the kept table read with delta-rs gives the same rows. The files are hard links: no
new data bytes on disk.
"""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path

import pytest

from tables.delta import cli
from tables.delta.errors import KeepTargetError
from tests.core.builders import writable

deltalake = pytest.importorskip("deltalake")

LOG = "_delta_log"
OLD = 90 * 86_400  # seconds: older than any log retention's default (30 days)


def rows(path: Path, version: int | None = None) -> list[tuple]:
    """A version's rows through delta-rs's query engine (it applies deletion vectors and
    column mapping), each row as its sorted (column, value) pairs, the rows sorted."""
    table = deltalake.DeltaTable(str(path), version=version)
    batches = deltalake.QueryBuilder().register("t", table).execute("select * from t").read_all()
    import pyarrow as pa

    return sorted((tuple(sorted(r.items())) for r in pa.table(batches).to_pylist()), key=repr)


def keep(path: Path, version: int, into: Path) -> dict:
    """The command's JSON payload, as a script gets it (parsed options, the same run)."""
    opts = vars(cli.build_parser().parse_args(["keep", str(path), "--version", str(version), "--into", str(into)]))
    return json.loads(json.dumps(cli.run("keep", opts)))


def keep_fails(capsys, path: Path, into: Path) -> str:
    """The command run as a script: status 2 and its one error line."""
    capsys.readouterr()
    assert cli.main(["keep", str(path), "--version", "0", "--into", str(into)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    return err


def vacuum_and_clean(path: Path) -> int:
    """delta-rs's VACUUM with retention 0 and its log cleanup; the files it deleted."""
    for name in os.listdir(path / LOG):
        os.utime(path / LOG / name, (time.time() - OLD,) * 2)
    table = deltalake.DeltaTable(str(path))
    removed = table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    table.cleanup_metadata()
    return len(removed)


def data_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and LOG not in p.parts]


CASES = [
    # (golden table, version, what it stands for)
    ("dv-partitioned-with-checkpoint", 5, "partitioned, deletion vectors, a checkpoint after N"),
    ("dv-with-columnmapping", 5, "column mapping (and deletion vectors)"),
    ("basic-with-inserts-deletes-checkpoint", 5, "a checkpoint after N"),
    ("table-with-columnmapping-mode-name", 0, "column mapping by name"),
    ("v2-checkpoint-parquet", 2, "v2 checkpoints with sidecars"),
]


@pytest.mark.parametrize(("name", "version", "why"), CASES, ids=[c[0] for c in CASES])
def test_a_kept_version_survives_vacuum_and_log_cleanup(golden_copy, tmp_path, name, version, why):
    src = writable(golden_copy(name))
    into = tmp_path / "kept"
    expected = rows(src, version)
    result = keep(src, version, into)
    assert result["version"] == version and result["bytesCopied"] == 0
    assert set(result["placed"]) == {"link"}, result["placed"]
    # 0 new data bytes: every data and DV file of the kept table is the source's file itself
    for f in data_files(into):
        assert os.stat(f).st_nlink >= 2, f
    gone = vacuum_and_clean(src)
    if version < deltalake.DeltaTable(str(src)).version() - 3:
        assert gone > 0  # the VACUUM took files the kept version needs
        with pytest.raises(deltalake.exceptions.DeltaError):
            rows(src, version)  # the source cannot give version N any more
    assert rows(into) == expected
    assert deltalake.DeltaTable(str(into)).version() == 0


def test_the_kept_log_is_version_n_of_the_source(golden_copy, tmp_path):
    """Version 0 holds N's protocol, metadata and adds (stats, DVs, partition values) after a
    commitInfo naming the source and keeping its own; a checkpoint of it beside."""
    from tables.delta.snapshot.state import load_snapshot

    src = golden_copy("dv-partitioned-with-checkpoint")
    into = tmp_path / "kept"
    keep(src, 4, into)
    lines = [json.loads(line) for line in (into / LOG / f"{0:020d}.json").read_text().splitlines()]
    info = lines[0]["commitInfo"]
    assert info["operation"] == "KEEP VERSION" and info["operationParameters"]["version"] == 4
    assert info["sourceCommitInfo"]["operation"] == "DELETE"
    source, kept = load_snapshot(str(src), 4), load_snapshot(str(into))
    assert kept.version == 0
    assert kept.protocol == source.protocol and kept.metadata == source.metadata
    assert sorted(kept.file_paths()) == sorted(source.file_paths())
    assert kept.files.column("deletionVector").to_pylist().count(None) == source.files.column(
        "deletionVector"
    ).to_pylist().count(None)
    adds = [a["add"] for a in lines if "add" in a]
    assert all("numRecords" in a["stats"] for a in adds)
    assert (into / LOG / f"{0:020d}.checkpoint.parquet").exists()
    assert json.loads((into / LOG / "_last_checkpoint").read_text())["version"] == 0
    assert kept.segment.checkpoint_version == 0  # a reader starting from the checkpoint gets it whole


def test_type_widening_kept_with_its_widened_schema(golden_copy, tmp_path):
    """No reader here reads type widening (delta-rs 1.6.6 refuses typeWidening and its preview,
    the app's Spark reader the preview): the kept table is compared with version N of the
    source by its log (the widened schema and its typeChanges, the protocol) and by its files,
    which are the source's own (the same inodes), kept after the source's VACUUM."""
    from tables.delta.snapshot.state import load_snapshot

    src = golden_copy("type-widening")
    into = tmp_path / "kept"
    keep(src, 2, into)
    source, kept = load_snapshot(str(src), 2), load_snapshot(str(into))
    assert kept.metadata == source.metadata and kept.protocol == source.protocol
    assert "delta.typeChanges" in kept.metadata.schema_string
    assert sorted(kept.file_paths()) == sorted(source.file_paths())
    for p in kept.file_paths():
        assert os.path.samefile(into / p, src / p)
    vacuum_and_clean(writable(src))
    assert all((into / p).is_file() for p in kept.file_paths())


def test_in_commit_timestamps_kept_first(golden_copy, tmp_path):
    from tables.delta.log.ict import ict_config
    from tables.delta.snapshot.state import load_snapshot
    from tables.delta.write.commit import enable_ict

    src = writable(golden_copy("basic-with-inserts-deletes-checkpoint"))
    done = enable_ict(str(src))
    into = tmp_path / "kept"
    result = keep(src, done["version"], into)
    first = json.loads((into / LOG / f"{0:020d}.json").read_text().splitlines()[0])["commitInfo"]
    assert next(iter(first)) == "inCommitTimestamp" and first["inCommitTimestamp"] == result["inCommitTimestamp"]
    kept = load_snapshot(str(into))
    cfg = ict_config(kept)
    assert cfg.enabled and cfg.enablement_version is None  # on from the kept table's first version
    assert rows(into) == rows(src, done["version"])


def test_copies_where_links_cannot_be_made(golden_copy, tmp_path, monkeypatch):
    """Another device (EXDEV, injected): the files are copied, whole, and counted."""
    src = golden_copy("basic-with-inserts-deletes-checkpoint")
    real_link = os.link

    def no_cross_device(a, b, *args, **kw):
        if str(a).startswith(str(src)):
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real_link(a, b, *args, **kw)

    monkeypatch.setattr(os, "link", no_cross_device)
    into = tmp_path / "kept"
    result = keep(src, 5, into)
    assert result["placed"] == {"copy": result["files"]} and result["bytesCopied"] == result["bytes"] > 0
    for f in data_files(into):
        assert os.stat(f).st_nlink == 1
    monkeypatch.undo()
    assert rows(into) == rows(src, 5)


def test_refusals(golden_copy, tmp_path, capsys):
    """Into a table, into the source itself, or a log naming a path outside its root: one error
    line, status 2, nothing written."""
    src = writable(golden_copy("table-with-columnmapping-mode-name"))
    kept = tmp_path / "kept"
    keep(src, 0, kept)
    for into, words in ((kept, "holds a Delta log already"), (src / "pins", "inside the table")):
        assert words in keep_fails(capsys, src, into)
    assert not (src / "pins").exists()
    commit = src / LOG / f"{0:020d}.json"
    text = commit.read_text()
    first = next(line for line in text.splitlines() if '"add"' in line)
    action = json.loads(first)
    action["add"]["path"] = "../../../etc/passwd"
    commit.write_text(text.replace(first, json.dumps(action)))
    assert "outside the allowed roots" in keep_fails(capsys, src, tmp_path / "other")
    assert not (tmp_path / "other").exists()


def test_a_version_is_never_kept_inside_another_table(golden_copy, tmp_path, capsys):
    """`--into` a folder inside another table (its own or a registered one's), a symbolic link
    to such a folder, or a path that climbs back into one with '..': status 2, one error line
    with the refusal's code and what to do, and nothing written there."""
    src = writable(golden_copy("table-with-columnmapping-mode-name"))
    other = writable(golden_copy("basic-with-inserts-deletes-checkpoint"))
    before = sorted(p.relative_to(other) for p in other.rglob("*"))
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(other / "_delta_log" / "..", target_is_directory=True)
    (other / "sub").mkdir()
    (tmp_path / "deep").symlink_to(other / "sub", target_is_directory=True)
    for into in (
        other / "pins",
        other / "sub" / "deeper" / "pin",
        tmp_path / "link" / "pin",
        tmp_path / "deep" / "pin",
        tmp_path / "elsewhere" / ".." / other.name / "pin",
    ):
        err = keep_fails(capsys, src, into)
        assert f"inside the Delta table {other}: its VACUUM would delete" in err, err
        assert "choose a location outside every table" in err, err
        with pytest.raises(KeepTargetError) as refused:
            keep(src, 0, into)
        assert refused.value.code == "keep_target_in_table"
    (other / "sub").rmdir()
    assert sorted(p.relative_to(other) for p in other.rglob("*")) == before  # nothing written there
    assert not (tmp_path / "elsewhere" / "pin").exists()
    keep(src, 0, tmp_path / "elsewhere" / "pin")  # beside the tables, it works


def test_a_version_is_never_kept_as_an_allowed_root_itself(golden_copy, tmp_path, capsys, monkeypatch):
    """With allowed roots configured (DELTAWEB_ALLOWED_ROOTS), a kept table is never written
    at the top of one: it would hold every table registered under it."""
    roots = tmp_path / "roots"
    roots.mkdir()
    src = writable(golden_copy("table-with-columnmapping-mode-name")).rename(roots / "src")
    monkeypatch.setenv("DELTAWEB_ALLOWED_ROOTS", str(roots))
    for into in (roots, roots / "src" / "..", tmp_path):
        err = keep_fails(capsys, src, into)
        assert "is an allowed root (or holds one)" in err and "choose a new folder below the root" in err, err
        with pytest.raises(KeepTargetError) as refused:
            keep(src, 0, into)
        assert refused.value.code == "keep_target_is_root"
    assert not (roots / LOG).exists()
    keep(src, 0, roots / "kept")
