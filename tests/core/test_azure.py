"""Tables in Azure Blob Storage / ADLS against a real Azure Storage emulator (Azurite, from
npm, on loopback): delta-rs writes a table into it and we read the same snapshots, history and
times; golden tables uploaded with the official Azure SDK read as their local copies; commits
are conditional puts; wrong keys and missing containers are named errors without the secret;
the `delta` command works with only the AZURE_* variables set."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from tables.delta.errors import BucketNotFoundError, CommitConflictError, ObjectStoreAccessError
from tables.delta.history.timeline import history_rows
from tables.delta.history.timestamps import commit_times
from tables.delta.snapshot.state import load_snapshot
from tables.delta.storage.opening import open_storage
from tables.delta.write.commit import commit
from tests.conftest import delta_snapshot_cli, golden_path, use_store_environment

pytest.importorskip("obstore")
deltalake = pytest.importorskip("deltalake")

CONTAINER = "lake"
GOLDEN_ON_AZURE = ["checkpoint", "dv-partitioned-with-checkpoint", "v2-checkpoint-parquet", "data-reader-escaped-chars"]


@pytest.fixture(scope="module")
def container(azure_server):
    """One container, the golden tables uploaded into it with the official SDK, and a table
    delta-rs wrote itself (create, append: two versions)."""
    svc = azure_server.blob_service()
    cont = svc.get_container_client(CONTAINER)
    if not cont.exists():
        cont.create_container()
    for name in GOLDEN_ON_AZURE:
        root = golden_path(name)
        for f in sorted(root.rglob("*")):
            if f.is_file():
                with open(f, "rb") as fh:
                    cont.upload_blob(f"golden/{name}/{f.relative_to(root).as_posix()}", fh, overwrite=True)
    opts = azure_server.storage_options()
    for i in range(2):
        batch = pa.table({"id": pa.array([i, i + 10], pa.int64()), "part": ["a", "b"]})
        deltalake.write_deltalake(
            f"az://{CONTAINER}/written", batch, mode="append", partition_by=["part"], storage_options=opts
        )
    return azure_server


@pytest.fixture
def az(container, monkeypatch):
    """The standard AZURE_* environment pointing at the server (and no allowed roots)."""
    use_store_environment(monkeypatch, container.env())
    return container


def adds_of(dt) -> list[tuple[str, int]]:
    adds = pa.table(dt.get_add_actions(flatten=True))
    return sorted(zip(adds.column("path").to_pylist(), adds.column("size_bytes").to_pylist(), strict=True))


def files_of(snap) -> list[tuple[str, int]]:
    return sorted(zip(snap.files.column("path").to_pylist(), snap.files.column("size").to_pylist(), strict=True))


@pytest.mark.parametrize(
    "spelling", [f"az://{CONTAINER}/written", f"abfss://{CONTAINER}@devstoreaccount1.dfs.core.windows.net/written"]
)
def test_a_table_deltars_wrote_into_azurite_reads_as_deltars_reads_it(az, spelling: str) -> None:
    opts = az.storage_options()
    for version in (0, 1):
        ours = load_snapshot(spelling, version=version)
        theirs = deltalake.DeltaTable(f"az://{CONTAINER}/written", version=version, storage_options=opts)
        assert files_of(ours) == adds_of(theirs)
        assert list(ours.metadata.partition_columns) == ["part"]
    rows = history_rows(commit_times(spelling))
    expected = deltalake.DeltaTable(f"az://{CONTAINER}/written", storage_options=opts).history()
    assert [(r["version"], r["operation"]) for r in rows] == [(e["version"], e["operation"]) for e in expected]
    # commit times on an object store are the blobs' last-modified times (no ICT here)
    props = {
        b.name: b.last_modified
        for b in az.blob_service().get_container_client(CONTAINER).list_blobs("written/_delta_log/")
    }
    for r in rows:
        modified = props[f"written/_delta_log/{r['version']:020d}.json"]
        assert r["fileModificationTime"] == int(modified.timestamp() * 1000)


@pytest.mark.parametrize("name", GOLDEN_ON_AZURE)
def test_a_golden_table_on_azurite_reads_as_its_local_copy_and_as_deltars(az, name: str) -> None:
    remote = load_snapshot(f"az://{CONTAINER}/golden/{name}")
    local = load_snapshot(str(golden_path(name)))
    assert remote.version == local.version and remote.metadata == local.metadata
    assert files_of(remote) == files_of(local)
    dt = deltalake.DeltaTable(f"az://{CONTAINER}/golden/{name}", storage_options=az.storage_options())
    assert dt.version() == remote.version and adds_of(dt) == files_of(remote)


def test_a_commit_on_azurite_is_a_conditional_put_read_back_by_deltars(az) -> None:
    svc = az.blob_service().get_container_client(CONTAINER)
    root = golden_path("checkpoint")
    prefix = "copies/commit"
    for f in sorted(root.rglob("*")):
        if f.is_file():
            with open(f, "rb") as fh:
                svc.upload_blob(f"{prefix}/{f.relative_to(root).as_posix()}", fh, overwrite=True)
    location = f"az://{CONTAINER}/{prefix}"
    before = load_snapshot(location)
    path, size = before.files.column("path")[0].as_py(), before.files.column("size")[0].as_py()
    result = commit(
        location, [{"remove": {"path": path, "deletionTimestamp": 1, "dataChange": True, "size": size}}], "DELETE"
    )
    assert result.version == before.version + 1
    dt = deltalake.DeltaTable(location, storage_options=az.storage_options())
    assert dt.version() == result.version and len(adds_of(dt)) == before.num_files - 1

    # two writers race for the next version: the loser gets a conflict, the winner's bytes stay
    a, b = open_storage(location), open_storage(location)
    key = f"_delta_log/{result.version + 1:020d}.json"
    assert a.put(key, b'{"first":1}\n') is True
    assert b.put(key, b'{"second":2}\n') is False
    with pytest.raises(CommitConflictError):
        b.put_if_absent(key, b'{"third":3}\n')
    assert svc.download_blob(f"{prefix}/{key}").readall() == b'{"first":1}\n'
    a.delete(key)


def test_wrong_keys_and_a_missing_container_are_named_errors(az, monkeypatch) -> None:
    wrong = "d3Jvbmcta2V5LXRoYXQtaXMtbG9uZy1lbm91Z2g="
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", wrong)
    with pytest.raises(ObjectStoreAccessError) as info:
        load_snapshot(f"az://{CONTAINER}/written")
    assert wrong not in str(info.value) and az.key not in str(info.value)
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", az.key)
    with pytest.raises(BucketNotFoundError):
        load_snapshot("az://no-such-container/t")


def test_the_command_line_reads_an_azure_table_with_only_the_environment(az) -> None:
    run = delta_snapshot_cli

    remote = run(f"az://{CONTAINER}/golden/dv-partitioned-with-checkpoint", az.env())
    assert remote.returncode == 0, remote.stderr
    local = run(str(Path(golden_path("dv-partitioned-with-checkpoint"))), {})
    assert json.loads(remote.stdout) == json.loads(local.stdout)
