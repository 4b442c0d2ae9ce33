"""The storage boundary in the pure core: the interface object stores share, and confinement of
every path a log names (data files, deletion vectors, sidecars, the log directory itself) to
the allowed roots, before anything opens it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from tables.delta.errors import PathOutsideRootsError
from tables.delta.log.checkpoint import read_checkpoint_files
from tables.delta.log.listing import list_log
from tables.delta.restore.actions import missing_files
from tables.delta.snapshot.dv import read_deletion_vector
from tables.delta.snapshot.state import load_snapshot
from tables.delta.storage import api as storage_module
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import as_storage

deltalake = pytest.importorskip("deltalake")
from deltalake import write_deltalake  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PAST = 1_000


def sentinel(path: Path, data: bytes = b"secret") -> Path:
    """A file outside the roots; its access time moves if anything reads it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (PAST, os.stat(path).st_mtime))
    return path


def was_read(path: Path) -> bool:
    return os.stat(path).st_atime != PAST


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "roots" / "t"
    write_deltalake(str(path), pa.table({"id": pa.array([1, 2], pa.int64())}))
    return path


# --- the interface ---------------------------------------------------------------------------


def test_the_local_storage_speaks_the_interface(tmp_path: Path) -> None:
    st = as_storage(str(tmp_path))
    assert isinstance(st, Storage) and as_storage(st) is st
    assert st.put("d/a.json", b"0123456789") is True
    assert st.put("d/a.json", b"other") is False  # "exists already" is a value, not an exception
    assert st.read("d/a.json") == b"0123456789"
    assert st.read("d/a.json", (2, 5)) == b"234"
    assert st.put("d/a.json", b"new", overwrite=True) is True and st.read("d/a.json") == b"new"
    st.put("d/b.json", b"b")
    st.put("d/c.json", b"c")
    assert [f.path for f in st.list_from("d")] == ["d/a.json", "d/b.json", "d/c.json"]
    assert [f.path for f in st.list_from("d", start_after="d/a.json")] == ["d/b.json", "d/c.json"]
    assert st.head("d/b.json").size == 1
    st.delete("d/b.json")
    st.delete("d/b.json")  # deleting what is gone is not an error
    with pytest.raises(FileNotFoundError):
        st.read("d/b.json")
    assert not any(p.name.endswith(".tmp") for p in (tmp_path / "d").iterdir())


# --- confinement -----------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["absolute", "file URI", "climbing", "symlink"])
def test_a_deletion_vector_outside_the_roots_is_refused_unread(table: Path, how: str) -> None:
    secret = sentinel(table.parent.parent / "elsewhere" / "dv.bin", b"\x01" + b"\x00" * 64)
    where = {
        "absolute": str(secret),
        "file URI": secret.as_uri(),
        "climbing": "../../elsewhere/dv.bin",
        "symlink": "link.bin",
    }[how]
    if how == "symlink":
        (table / "link.bin").symlink_to(secret)
    dv = {"storageType": "p", "pathOrInlineDv": where, "offset": 1, "sizeInBytes": 10, "cardinality": 1}
    with pytest.raises(PathOutsideRootsError) as caught:
        read_deletion_vector(as_storage(str(table)), dv)
    assert caught.value.code == "path_outside_roots" and str(secret.parent) not in str(caught.value)
    assert not was_read(secret)


def test_the_restore_existence_check_never_probes_outside(table: Path) -> None:
    outside = sentinel(table.parent.parent / "elsewhere" / "x.parquet")
    st = as_storage(str(table))
    for path in (str(outside), outside.as_uri(), "../../elsewhere/x.parquet", "%2E%2E/%2E%2E/elsewhere/x.parquet"):
        with pytest.raises(PathOutsideRootsError):
            missing_files(st, [{"path": path, "size": 1}])
    inside = load_snapshot(str(table)).files.column("path").to_pylist()
    assert missing_files(st, [{"path": p, "size": 1} for p in inside]) == ([], set())


def test_a_sidecar_outside_the_log_is_refused(table: Path) -> None:
    outside = sentinel(table.parent.parent / "elsewhere" / "side.parquet")
    st = as_storage(str(table))
    lf = list_log(st).commits[0]
    for path in ("../../../../elsewhere/side.parquet", outside.as_uri()):
        with pytest.raises(PathOutsideRootsError):
            read_checkpoint_files(st, [lf], [("sidecar", {"path": path})], [])
    assert lf.version == 0 and not was_read(outside)


def test_keys_after_a_log_read_still_cannot_climb_out(table: Path) -> None:
    """Once a commit in `_delta_log/` was read, later keys through the same directory part
    (`..` as the name, `..` inside, a doubled slash) are still resolved and refused."""
    outside = sentinel(table.parent.parent / "secret.json", b'{"commitInfo": {}}\n')
    st = as_storage(str(table))
    assert st.read("_delta_log/00000000000000000000.json").startswith(b"{")
    for key in ("_delta_log/../../../secret.json", "_delta_log//../../../secret.json", "_delta_log/.."):
        with pytest.raises(PathOutsideRootsError):
            st.read(key)
    assert not was_read(outside)
    assert (
        st.read("_delta_log/00000000000000000000.json")
        == (table / "_delta_log" / "00000000000000000000.json").read_bytes()
    )


def test_a_symlinked_log_is_refused_and_allowed_only_with_its_target_root(table: Path, tmp_path: Path) -> None:
    real = tmp_path / "elsewhere" / "real"
    write_deltalake(str(real), pa.table({"id": pa.array([7], pa.int64())}))
    linked = tmp_path / "roots" / "linked"
    linked.mkdir()
    (linked / "_delta_log").symlink_to(real / "_delta_log")
    with pytest.raises(PathOutsideRootsError, match="'_delta_log' lies outside the allowed roots"):
        load_snapshot(str(linked))
    storage_module.set_roots_provider(lambda: [str(tmp_path / "roots")])
    with pytest.raises(PathOutsideRootsError):
        load_snapshot(str(linked))
    storage_module.set_roots_provider(lambda: [str(tmp_path / "roots"), str(tmp_path / "elsewhere")])
    assert load_snapshot(str(linked)).version == 0


def test_the_command_line_refuses_a_symlinked_log(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere" / "real"
    write_deltalake(str(real), pa.table({"id": pa.array([7], pa.int64())}))
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "_delta_log").symlink_to(real / "_delta_log")
    env = {k: v for k, v in os.environ.items() if k != storage_module.ROOTS_ENV}
    proc = subprocess.run(
        [sys.executable, "manage.py", "delta", "snapshot", str(linked), "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "outside the allowed roots" in proc.stderr and "Traceback" not in proc.stderr


def test_only_the_storage_module_names_the_local_implementation() -> None:
    """The boundary holds by construction: nothing outside the storage modules names LocalStorage
    or joins a path onto a table root by hand (`.root /`, `.root.joinpath`)."""
    offenders = []
    for path in sorted((REPO / "tables").rglob("*.py")):
        if (REPO / "tables" / "delta" / "storage") in path.parents:
            continue  # the boundary itself: the interface, the local and the object-store backends
        text = path.read_text()
        if re.search(r"\bLocalStorage\b|\.root\s*/|\.root\.joinpath|\bstorage\.root\b", text):
            offenders.append(str(path.relative_to(REPO)))
    assert offenders == []


def test_every_backend_declares_exactly_the_capabilities_it_has(tmp_path: Path) -> None:
    """A caller asks `storage.capabilities`, never probes for a method: so each backend's
    declared capabilities are the optional methods it has, no more and no fewer, and every
    backend says whether its reads cost round trips."""
    from tables.delta.storage.api import Capability
    from tables.delta.storage.versions import RecoveryView

    backends = [as_storage(str(tmp_path)), as_storage("s3://bucket/t"), RecoveryView]
    for st in backends:
        assert isinstance(st.remote, bool), st
        has = {c for c in Capability if hasattr(st, c.value)}
        assert set(st.capabilities) == has, (st, sorted(has ^ set(st.capabilities)))
    local, s3, _view = backends
    assert local.remote is False and s3.remote is True
    assert {Capability.PLACE, Capability.OPEN_INPUT} <= local.capabilities & s3.capabilities


# --- paths no storage holds ---------------------------------------------------------------------


def test_a_path_no_storage_holds_is_refused_before_a_copy_of_it_is_made(table: Path, tmp_path: Path) -> None:
    """A 50 MB add path is refused as a corrupt log by resolve, with a bounded message and
    without decoding or joining it (no 50 MB copy); on an object store too, without a request;
    a name over the file system's limit is refused as well, a long but possible path is not."""
    import tracemalloc

    from tables.delta.errors import PathTooLongError
    from tables.delta.history.vanished import absent_among

    huge = "x" * 50_000_000 + ".parquet"
    stores = [as_storage(str(table)), as_storage("s3://bucket/roots/t")]  # resolve asks no store
    for st in stores:
        tracemalloc.start()
        with pytest.raises(PathTooLongError) as refused:
            st.resolve(huge)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 1_000_000, (st, peak)
        error = refused.value
        assert error.code == "corrupt_log" and "too long" in str(error) and len(str(error)) < 300
        assert "50,000,008 characters" in str(error) and str(tmp_path) not in str(error)
    local = stores[0]
    with pytest.raises(PathTooLongError, match="file name too long for this file system"):
        local.resolve("p=a/" + "y" * 300 + ".parquet")
    deep = "/".join(["d" * 200] * 15) + "/part-0.parquet"  # 3,031 bytes: a file could be there
    assert local.resolve(deep) == deep
    assert absent_among(local, [huge, "part-missing.parquet"]) == {"part-missing.parquet"}
