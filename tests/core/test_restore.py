"""RESTORE (SPEC section 4): planning, committing, conflicts, and parity with the writers.

Parity: Delta Lake's own RESTORE commit in the golden table `basic-with-inserts-overwrite-restore`
(version 3 restores version 1) is removed from a copy and redone here; the file actions and
metrics must be Delta Lake's. Tables written by delta-rs in the test are restored and read back
by delta-rs. Deletion vectors come from the golden DV tables.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tables.delta.errors import CommitConflictError, MissingFilesError, RestoreError, UnsupportedFeatureError
from tables.delta.history.timestamps import commit_times
from tables.delta.log.actions import Protocol
from tables.delta.restore.commit import commit_restore
from tables.delta.restore.plan import RestorePlan, plan_restore
from tables.delta.restore.rules import check_writable, merge_protocols, restore_protocol
from tables.delta.snapshot.dv import deletion_vector_file
from tables.delta.snapshot.replay import action_identity, identity_keys
from tables.delta.snapshot.state import load_snapshot
from tests.conftest import golden_path
from tests.core import builders
from tests.core.builders import writable

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LOG = "_delta_log"
BASE_MS = 1_700_000_000_000


# --- helpers ---------------------------------------------------------------------------------


def commit_lines(table: Path, version: int) -> list[dict[str, Any]]:
    text = (table / LOG / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def of_kind(lines: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [a[kind] for a in lines if kind in a]


def identities(table: Path, version: int | None = None) -> set[str]:
    snap = load_snapshot(table, version)
    return set(identity_keys(snap.files).to_pylist()) if snap.num_files else set()


def log_versions(table: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in (table / LOG).glob("*.json") if p.name[:20].isdigit())


def rows(ids: range | list[int]) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "s": pa.array([f"r{i}" for i in ids], pa.string())})


def set_commit_times(table: Path) -> None:
    """Commit file times BASE_MS + v seconds, so that timestamps resolve deterministically."""
    for v in log_versions(table):
        ns = (BASE_MS + v * 1000) * 1_000_000
        os.utime(table / LOG / f"{v:020d}.json", ns=(ns, ns))


def rs_table(tmp_path: Path, name: str = "rs") -> Path:
    """delta-rs history: 0 create, 1-2 appends, 3 overwrite, 4 append, 5 delete (rewrites)."""
    t = tmp_path / name
    write_deltalake(str(t), rows(range(0, 10)))
    write_deltalake(str(t), rows(range(10, 20)), mode="append")
    write_deltalake(str(t), rows(range(20, 30)), mode="append")
    write_deltalake(str(t), rows(range(100, 105)), mode="overwrite")
    write_deltalake(str(t), rows(range(105, 110)), mode="append")
    DeltaTable(str(t)).delete("id < 102")
    set_commit_times(t)
    assert DeltaTable(str(t)).version() == 5
    return t


def rs_paths(table: Path, version: int | None = None) -> set[str]:
    dt = DeltaTable(str(table)) if version is None else DeltaTable(str(table), version=version)
    return set(pa.table(dt.get_add_actions(flatten=True)).column("path").to_pylist())


def rs_rows(table: Path, version: int | None = None) -> int:
    dt = DeltaTable(str(table)) if version is None else DeltaTable(str(table), version=version)
    return dt.to_pyarrow_table().num_rows


def assert_log_readable(table: Path) -> None:
    """Versions 0..latest all present, and delta-rs loads each of them."""
    versions = log_versions(table)
    assert versions == list(range(versions[-1] + 1)), versions
    for v in versions:
        assert DeltaTable(str(table), version=v).version() == v


# --- parity with Delta Lake's own RESTORE ------------------------------------------------------


def test_parity_with_delta_lake_restore(golden_copy) -> None:
    t = writable(golden_copy("basic-with-inserts-overwrite-restore"))
    theirs = commit_lines(t, 3)  # Delta Lake's RESTORE TO VERSION 1, read before it is removed
    for f in (t / LOG).iterdir():
        if (f.name[:20].isdigit() and int(f.name[:20]) > 2) or f.name == "_last_checkpoint":
            f.unlink()
    assert load_snapshot(t).version == 2

    plan = plan_restore(t, version=1)
    result = commit_restore(t, plan)
    assert result["version"] == 3 and result["verified"]
    ours = commit_lines(t, 3)

    their_info, our_info = theirs[0]["commitInfo"], ours[0]["commitInfo"]
    assert "commitInfo" in ours[0], "commitInfo must be the first action"
    assert our_info["operationMetrics"] == their_info["operationMetrics"]
    for key in ("operation", "operationParameters", "readVersion", "isolationLevel", "isBlindAppend"):
        assert our_info[key] == their_info[key], key
    assert {a["path"] for a in of_kind(ours, "add")} == {a["path"] for a in of_kind(theirs, "add")}
    assert {r["path"] for r in of_kind(ours, "remove")} == {r["path"] for r in of_kind(theirs, "remove")}
    # the actions themselves, stats included (only the deletion time differs)
    by_path = {a["path"]: a for a in of_kind(theirs, "add")}
    for a in of_kind(ours, "add"):
        assert a == by_path[a["path"]]
    by_path = {r["path"]: r for r in of_kind(theirs, "remove")}
    for r in of_kind(ours, "remove"):
        assert {**r, "deletionTimestamp": 0} == {**by_path[r["path"]], "deletionTimestamp": 0}
    assert of_kind(ours, "protocol") == of_kind(theirs, "protocol")
    ours_md, theirs_md = of_kind(ours, "metaData")[0], of_kind(theirs, "metaData")[0]
    assert {k: v for k, v in ours_md.items() if v is not None} == theirs_md
    assert identities(t, 3) == identities(t, 1)


def test_parity_state_equals_golden_version_3(golden_copy) -> None:
    """Our version 3 and Delta Lake's version 3 (read from the untouched golden) agree."""
    golden = golden_path("basic-with-inserts-overwrite-restore")
    t = writable(golden_copy("basic-with-inserts-overwrite-restore"))
    for f in (t / LOG).iterdir():
        if (f.name[:20].isdigit() and int(f.name[:20]) > 2) or f.name == "_last_checkpoint":
            f.unlink()
    commit_restore(t, plan_restore(t, version=1))
    ours, theirs = load_snapshot(t, 3), load_snapshot(golden, 3)
    assert identities(t, 3) == set(identity_keys(theirs.files).to_pylist())
    assert ours.size_bytes == theirs.size_bytes
    assert ours.metadata == theirs.metadata and ours.protocol == theirs.protocol


# --- delta-rs tables -----------------------------------------------------------------------------


def test_restore_deltars_table_reads_back_in_deltars(tmp_path: Path) -> None:
    t = rs_table(tmp_path)
    target_paths, target_rows = rs_paths(t, 2), rs_rows(t, 2)
    plan = plan_restore(t, version=2)
    assert plan.read_version == 5 and plan.recovered_actions == len(plan.adds) + len(plan.removes)
    assert all("stats" in a for a in plan.adds), "the log's stats travel with the restored files"
    result = commit_restore(t, plan)
    assert result["version"] == 6 and result["verified"]

    dt = DeltaTable(str(t))
    assert dt.version() == 6
    assert rs_paths(t) == target_paths
    assert rs_rows(t) == target_rows == 30
    assert dt.history(1)[0]["operation"] == "RESTORE"
    assert_log_readable(t)

    # delta-rs's own restore of a copy lands on the same files
    other = tmp_path / "rs-copy"
    shutil.copytree(t, other)
    shutil.rmtree(other / LOG)
    shutil.copytree(t / LOG, other / LOG)
    (other / LOG / f"{6:020d}.json").unlink()
    DeltaTable(str(other)).restore(2)
    assert rs_paths(other) == rs_paths(t)


def test_restore_by_timestamp_records_the_resolution(tmp_path: Path) -> None:
    t = rs_table(tmp_path)
    ts = "2023-11-14T22:13:22.500Z"  # BASE_MS + 2.5 s: after version 2's commit, before version 3's
    plan = plan_restore(t, timestamp=ts)
    assert plan.target_version == 2 and plan.requested_version is None
    assert plan.resolution["version"] == 2 and "modification time" in plan.resolution["rule"]
    result = commit_restore(t, plan)
    info = commit_lines(t, result["version"])[0]["commitInfo"]
    assert info["operationParameters"] == {"version": None, "timestamp": ts}
    assert rs_paths(t) == rs_paths(t, 2)
    # a timestamp after the latest commit resolves to the latest version: nothing to restore
    with pytest.raises(RestoreError, match="not lower than the latest version"):
        plan_restore(t, timestamp="2030-01-01")


def test_target_must_be_before_latest(tmp_path: Path) -> None:
    t = rs_table(tmp_path)
    for bad in (5, 9):
        with pytest.raises(RestoreError, match="not lower than the latest version 5") as exc:
            plan_restore(t, version=bad)
        assert exc.value.code == "restore_invalid"
    with pytest.raises(RestoreError, match="exactly one"):
        plan_restore(t)
    with pytest.raises(RestoreError, match="exactly one"):
        plan_restore(t, version=1, timestamp="2024-01-01")
    with pytest.raises(RestoreError, match="non-negative"):
        plan_restore(t, version=-1)


# --- deletion vectors ----------------------------------------------------------------------------


def _dv_version(table: Path) -> tuple[int, str]:
    """A version where some path carried another deletion vector than at latest (a non-null
    one on both sides when the table has such a version)."""
    latest = load_snapshot(table)
    at_latest = {k.split("\x00")[0]: k for k in identities(table)}
    found = []
    for v in range(latest.version - 1, -1, -1):
        for k in identities(table, v):
            path = k.split("\x00")[0]
            if path in at_latest and at_latest[path] != k:
                found.append((("\x00" in k) and ("\x00" in at_latest[path]), v, path))
    assert found, "the golden table has no version with another deletion vector"
    found.sort(reverse=True)
    return found[0][1], found[0][2]


@pytest.mark.parametrize("name", ["dv-partitioned-with-checkpoint", "dv-with-columnmapping"])
def test_deletion_vectors(golden_copy, name: str) -> None:
    t = writable(golden_copy(name))
    v, path = _dv_version(t)
    old = next(k for k in identities(t, v) if k.split("\x00")[0] == path)
    new = next(k for k in identities(t) if k.split("\x00")[0] == path)
    plan = plan_restore(t, version=v)
    adds = {action_identity(a) for a in plan.adds}
    removes = {action_identity(r) for r in plan.removes}
    assert old in adds and new in removes
    for a in plan.adds:
        if a.get("deletionVector"):
            assert json.loads(a["stats"])["numRecords"] > 0  # DV writer requirement: numRecords
    result = commit_restore(t, plan)
    assert result["verified"]
    assert identities(t, result["version"]) == identities(t, v)
    # delta-rs loads the log (not the data) of DV tables: same paths as ours
    try:
        theirs = rs_paths(t)
    except Exception as exc:  # pragma: no cover - depends on the delta-rs build
        pytest.skip(f"delta-rs cannot load {name}: {exc}")
    assert theirs == {k.split("\x00")[0] for k in identities(t, v)}


def test_missing_deletion_vector_file_is_reported(golden_copy) -> None:
    t = writable(golden_copy("dv-partitioned-with-checkpoint"))
    commit_restore(t, plan_restore(t, version=14))  # version 16: a file back without its DV
    plan = plan_restore(t, version=15)  # re-adds that file with the DV
    victim = next(a for a in plan.adds if a.get("deletionVector"))
    dv_file = deletion_vector_file(victim["deletionVector"])
    (t / dv_file).unlink()
    with pytest.raises(MissingFilesError, match="deletion_vector_") as exc:
        plan_restore(t, version=15)
    assert exc.value.files == [dv_file]
    skipped = plan_restore(t, version=15, ignore_missing_files=True)
    assert victim["path"] not in {a["path"] for a in skipped.adds}


def test_deletion_vector_file_names() -> None:
    dv = {"storageType": "u", "pathOrInlineDv": "0X9F0q2<2yJ-f)Gm2!e0", "offset": 1, "sizeInBytes": 34}
    assert deletion_vector_file(dv) == "deletion_vector_0229ec3d-5100-44e1-8e53-702d448da8da.bin"
    assert deletion_vector_file({**dv, "pathOrInlineDv": "ab0X9F0q2<2yJ-f)Gm2!e0"}).startswith("ab/deletion_vector_")
    assert deletion_vector_file({"storageType": "i", "pathOrInlineDv": "xyz"}) is None
    assert deletion_vector_file({"storageType": "p", "pathOrInlineDv": "/abs/dv.bin"}) == "/abs/dv.bin"
    assert deletion_vector_file(None) is None


# --- missing files -------------------------------------------------------------------------------


def test_missing_files(tmp_path: Path) -> None:
    t = rs_table(tmp_path)
    plan = plan_restore(t, version=2)
    victim = plan.adds[0]["path"]
    lost_rows = pq.read_metadata(t / victim).num_rows
    (t / victim).unlink()
    before = log_versions(t)

    with pytest.raises(MissingFilesError) as exc:
        plan_restore(t, version=2)
    assert exc.value.code == "restore_missing_files"
    assert exc.value.files == [victim] and victim in str(exc.value)
    assert "\n" not in str(exc.value)
    # a plan made before the file went is refused at commit time too
    with pytest.raises(MissingFilesError):
        commit_restore(t, plan)
    assert log_versions(t) == before

    plan = plan_restore(t, version=2, ignore_missing_files=True)
    assert plan.missing_files == [victim] and victim not in {a["path"] for a in plan.adds}
    assert plan.metrics["numOfFilesAfterRestore"] == str(len(rs_paths(t, 2)) - 1)
    result = commit_restore(t, plan)
    assert result["verified"]
    assert rs_paths(t) == rs_paths(t, 2) - {victim}
    assert rs_rows(t) == 30 - lost_rows
    assert int(result["metrics"]["numRestoredFiles"]) == len(plan.adds)


def test_missing_files_listed_up_to_100(tmp_path: Path) -> None:
    t = tmp_path / "many"
    write_deltalake(str(t), rows(range(5)))
    for i in range(120):
        write_deltalake(str(t), rows([i]), mode="append")
    write_deltalake(str(t), rows([0]), mode="overwrite")
    for f in t.glob("*.parquet"):
        f.unlink()
    with pytest.raises(MissingFilesError) as exc:
        plan_restore(t, version=120, check_files=True)
    assert len(exc.value.files) == 100 and exc.value.details["count"] == 121
    assert "showing 100 of 121" in str(exc.value)
    assert plan_restore(t, version=120, check_files=False).files_checked is False


# --- conflicts -----------------------------------------------------------------------------------


def test_concurrent_append_is_rebased(tmp_path: Path) -> None:
    t = rs_table(tmp_path)
    plan = plan_restore(t, version=2)
    write_deltalake(str(t), rows([999]), mode="append")  # version 6, another writer
    appended = rs_paths(t) - rs_paths(t, 5)
    result = commit_restore(t, plan)
    assert result["version"] == 7 and result["rebasedOver"] == [6] and result["readVersion"] == 6
    assert result["verified"]
    assert rs_paths(t) == rs_paths(t, 2) | appended
    assert rs_rows(t) == 31
    assert result["metrics"]["numOfFilesAfterRestore"] == str(len(rs_paths(t, 2)) + 1)
    assert commit_lines(t, 7)[0]["commitInfo"]["readVersion"] == 6
    assert result["fingerprint"] == plan.fingerprint
    assert_log_readable(t)


@pytest.mark.parametrize("competing", ["delete", "overwrite", "properties"])
def test_conflicting_writer_fails_the_restore(tmp_path: Path, competing: str) -> None:
    t = rs_table(tmp_path)
    plan = plan_restore(t, version=2)
    dt = DeltaTable(str(t))
    if competing == "delete":
        dt.delete("id = 104")  # rewrites/removes a file the plan removes
    elif competing == "overwrite":
        write_deltalake(str(t), rows([1]), mode="overwrite")
    else:
        dt.alter.set_table_properties({"delta.logRetentionDuration": "interval 60 days"})
    assert DeltaTable(str(t)).version() == 6
    with pytest.raises(CommitConflictError, match="conflicts with version 6") as exc:
        commit_restore(t, plan)
    assert exc.value.version == 6 and exc.value.details["versions"] == [6]
    assert log_versions(t)[-1] == 6
    assert_log_readable(t)


def test_lost_race_retries_on_the_new_head(tmp_path: Path) -> None:
    """Another writer commits between our check and our write: the retry rebases."""
    t = rs_table(tmp_path)
    plan = plan_restore(t, version=2)
    calls = []

    def clock() -> int:
        if not calls:
            write_deltalake(str(t), rows([555]), mode="append")  # takes version 6 first
        calls.append(1)
        return BASE_MS + 60_000

    result = commit_restore(t, plan, clock=clock)
    assert len(calls) == 2 and result["version"] == 7 and result["rebasedOver"] == [6]
    assert result["verified"]
    assert_log_readable(t)


def test_commit_records_who_in_commit_info_only(tmp_path: Path) -> None:
    t = rs_table(tmp_path)
    plan = plan_restore(t, version=2)
    fingerprint = plan.fingerprint
    extra = {"requestedBy": "ana", "approvedBy": "appro", "requestId": "7", "version": "999"}
    result = commit_restore(t, plan, txn_id="t-7", extra_parameters=extra, user_name="appro")
    info = commit_lines(t, result["version"])[0]["commitInfo"]
    assert info["userName"] == "appro"
    params = info["operationParameters"]
    assert params["requestedBy"] == "ana" and params["approvedBy"] == "appro" and params["requestId"] == "7"
    assert params["version"] == 2  # the plan's own parameters are never overridden
    assert result["fingerprint"] == fingerprint and result["verified"]
    # a retry with the same txn id finds it, with or without the extras
    assert commit_restore(t, RestorePlan.from_dict(plan.to_dict()), txn_id="t-7")["alreadyCommitted"]


def test_commit_is_idempotent_with_a_txn_id(tmp_path: Path) -> None:
    t = rs_table(tmp_path)
    plan = plan_restore(t, version=2)
    first = commit_restore(t, plan, txn_id="restore-request-42")
    again = commit_restore(t, RestorePlan.from_dict(plan.to_dict()), txn_id="restore-request-42")
    assert first["version"] == again["version"] == 6
    assert again["alreadyCommitted"] and again["verified"]
    assert again["metrics"] == first["metrics"]
    assert log_versions(t)[-1] == 6
    assert commit_lines(t, 6)[0]["commitInfo"]["txnId"] == "restore-request-42"
    # another txn id is another restore: the plan was made on version 5, and version 6 (the
    # first restore) touched its files, so it conflicts instead of restoring twice
    with pytest.raises(CommitConflictError):
        commit_restore(t, plan, txn_id="another")


def test_plan_fingerprint_and_round_trip(tmp_path: Path) -> None:
    t = rs_table(tmp_path)
    a, b = plan_restore(t, version=2), plan_restore(t, version=2, clock=lambda: 1)
    assert a.fingerprint == b.fingerprint and len(a.fingerprint) == 64
    assert plan_restore(t, version=1).fingerprint != a.fingerprint
    d = a.to_dict()
    assert RestorePlan.from_dict(json.loads(json.dumps(d))).fingerprint == a.fingerprint
    d["adds"] = d["adds"][1:]
    with pytest.raises(RestoreError, match="fingerprint"):
        RestorePlan.from_dict(d)


# --- In-Commit Timestamps ------------------------------------------------------------------------


def _touch_data(table: Path) -> None:
    for v in log_versions(table):
        for a in of_kind(commit_lines(table, v), "add"):
            (table / a["path"]).touch()


def test_ict_table_commit_info_first_with_increasing_ict(tmp_path: Path) -> None:
    t = builders.ict_table(tmp_path / "ict", mtimes=[1000, 2000, 3000], icts=[10_000, 20_000, 30_000])
    _touch_data(t)
    result = commit_restore(t, plan_restore(t, version=0), clock=lambda: 5)  # clock behind the log
    first = commit_lines(t, 3)[0]
    assert list(first) == ["commitInfo"]
    assert first["commitInfo"]["inCommitTimestamp"] == 30_001 == result["inCommitTimestamp"]
    assert next(iter(first["commitInfo"])) == "inCommitTimestamp"
    times = commit_times(str(t))
    assert times.timestamp(3) == (30_001, "ict")


def test_restoring_before_ict_enablement_keeps_ict_on(tmp_path: Path) -> None:
    t = builders.ict_table(
        tmp_path / "ict", mtimes=[1000, 2000, 3000, 4000], icts=[None, None, 25_000, 26_000], enable_at=2
    )
    _touch_data(t)
    plan = plan_restore(t, version=1)
    assert any("In-Commit Timestamp" in n for n in plan.notes)
    conf = plan.metadata["configuration"]
    assert conf["delta.enableInCommitTimestamps"] == "true"
    assert conf["delta.inCommitTimestampEnablementVersion"] == "2"
    result = commit_restore(t, plan, clock=lambda: 100_000)
    assert result["inCommitTimestamp"] == 100_000
    times = commit_times(str(t))
    assert times.ict.enabled and times.timestamp(4) == (100_000, "ict")
    assert times.timestamp(1)[1] == "file"


# --- protocol, metadata, domains -----------------------------------------------------------------


def test_merge_protocols_as_delta_lake() -> None:
    dv = Protocol(3, 7, ("deletionVectors",), ("deletionVectors",))
    assert merge_protocols(Protocol(1, 2), Protocol(1, 4)) == Protocol(1, 4)
    assert merge_protocols(Protocol(1, 2), dv) == Protocol(
        3, 7, ("deletionVectors",), ("appendOnly", "deletionVectors", "invariants")
    )
    merged = merge_protocols(Protocol(2, 5), dv)
    assert merged.reader_features == ("columnMapping", "deletionVectors")
    assert set(merged.writer_features) == {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "changeDataFeed",
        "generatedColumns",
        "columnMapping",
        "deletionVectors",
    }
    # (1, 5) does not imply columnMapping (it needs reader 2)
    assert (
        "columnMapping"
        not in merge_protocols(Protocol(1, 5), Protocol(1, 7, None, ("domainMetadata",))).writer_features
    )
    assert merge_protocols(Protocol(2, 5), Protocol(1, 7, None, ("x",))).reader_features is None


def test_restore_protocol_outcomes() -> None:
    low = Protocol(1, 2)
    high = Protocol(3, 7, ("deletionVectors",), ("appendOnly", "deletionVectors", "invariants"))
    assert restore_protocol(high, high, False)[:2] == (high, "unchanged")
    assert restore_protocol(high, low, False)[:2] == (high, "merged")  # latest kept, never downgraded
    assert restore_protocol(high, low, True)[:2] == (low, "downgraded")
    proto, outcome, _ = restore_protocol(low, high, False)
    assert (proto, outcome) == (high, "upgraded")
    # as Delta Lake: (1, 2) implies appendOnly and invariants, which a features-only latest
    # protocol does not list, so the merge adds them
    dv_only = Protocol(3, 7, ("deletionVectors",), ("deletionVectors",))
    assert restore_protocol(dv_only, low, False)[:2] == (high, "upgraded")
    # the features form of (1, 2) covers it: the latest is kept as it is
    same = Protocol(1, 7, None, ("appendOnly", "invariants"))
    assert restore_protocol(same, low, False)[:2] == (same, "merged")


def test_unwritable_protocols_are_refused() -> None:
    check_writable(Protocol(3, 7, ("deletionVectors",), ("deletionVectors", "rowTracking", "domainMetadata")), "t")
    with pytest.raises(UnsupportedFeatureError, match="catalogManaged"):
        check_writable(Protocol(3, 7, ("catalogManaged",), ("catalogManaged",)), "t")
    with pytest.raises(UnsupportedFeatureError, match="writer version 8"):
        check_writable(Protocol(1, 8), "t")


def _domain_table(root: Path) -> Path:
    proto = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["domainMetadata"]}}

    def dm(name: str, conf: str, removed: bool = False) -> dict[str, Any]:
        return {"domainMetadata": {"domain": name, "configuration": conf, "removed": removed}}

    builders.write_commit(
        root, 0, 1000, actions=[proto, builders.metadata(), builders.add("a.parquet"), dm("app", "1")]
    )
    builders.write_commit(root, 1, 2000, actions=[builders.add("b.parquet"), dm("app", "2"), dm("other", "x")])
    builders.write_commit(root, 2, 3000, actions=[dm("delta.rowTracking", '{"rowIdHighWaterMark":9}')])
    _touch_data(root)
    return root


def test_domain_metadata_follows_the_target(tmp_path: Path) -> None:
    t = _domain_table(tmp_path / "dm")
    plan = plan_restore(t, version=0)
    assert sorted((d["domain"], d["configuration"], d["removed"]) for d in plan.domains) == [
        ("app", "1", False),
        ("other", "x", True),
    ]
    commit_restore(t, plan)
    snap = load_snapshot(t)
    assert {k: v["configuration"] for k, v in snap.domains.items()} == {
        "app": "1",
        "delta.rowTracking": '{"rowIdHighWaterMark":9}',  # the high-water mark never goes back
    }
    assert {p.split("\x00")[0] for p in identities(t)} == {"a.parquet"}


def test_append_only_table_refuses_removes(tmp_path: Path) -> None:
    t = tmp_path / "ao"
    write_deltalake(str(t), rows(range(3)), configuration={"delta.appendOnly": "true"})
    write_deltalake(str(t), rows(range(3, 6)), mode="append")
    with pytest.raises(RestoreError, match="append-only"):
        plan_restore(t, version=0)


def test_identity_high_water_mark_is_kept(tmp_path: Path) -> None:
    def schema(hwm: int) -> str:
        meta = {"delta.identity.start": 1, "delta.identity.step": 1, "delta.identity.highWaterMark": hwm}
        return json.dumps(
            {"type": "struct", "fields": [{"name": "x", "type": "long", "nullable": True, "metadata": meta}]}
        )

    t = tmp_path / "idcol"
    proto = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 6}}
    md0, md1 = builders.metadata(), builders.metadata()
    md0["metaData"]["schemaString"], md1["metaData"]["schemaString"] = schema(10), schema(50)
    builders.write_commit(t, 0, 1000, actions=[proto, md0, builders.add("a.parquet")])
    builders.write_commit(t, 1, 2000, actions=[md1, builders.add("b.parquet")])
    _touch_data(t)
    plan = plan_restore(t, version=0)
    field = json.loads(plan.metadata["schemaString"])["fields"][0]
    assert field["metadata"]["delta.identity.highWaterMark"] == 50


# --- the command ---------------------------------------------------------------------------------


def delta_cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "delta", *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def tree(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")}


def test_cli_dry_run_writes_nothing_then_restore_json(tmp_path: Path) -> None:
    t = rs_table(tmp_path)
    before = tree(t)
    proc = delta_cli("restore", t, "--version", 2, "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["dryRun"] and plan["targetVersion"] == 2 and plan["readVersion"] == 5
    assert set(plan["metrics"]) == {
        "numRestoredFiles",
        "restoredFilesSize",
        "numRemovedFiles",
        "removedFilesSize",
        "numOfFilesAfterRestore",
        "tableSizeAfterRestore",
    }
    assert tree(t) == before

    text = delta_cli("restore", t, "--version", 2, "--dry-run")
    assert text.returncode == 0 and "dry run: nothing written" in text.stdout and "numRestoredFiles" in text.stdout
    assert tree(t) == before

    proc = delta_cli("restore", t, "--version", 2, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["version"] == 6 and out["verified"] and out["metrics"] == plan["metrics"]
    assert rs_paths(t) == rs_paths(t, 2)


def test_cli_errors_exit_2_with_one_line(tmp_path: Path) -> None:
    t = rs_table(tmp_path)
    plan = plan_restore(t, version=2)
    (t / plan.adds[0]["path"]).unlink()
    before = tree(t)
    for args, words in (
        (("--version", 5), ("not lower than the latest version 5",)),
        (("--version", 2), ("not all files of version 2", plan.adds[0]["path"])),
    ):
        proc = delta_cli("restore", t, *args, "--json")
        assert proc.returncode == 2, proc.stdout
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in proc.stderr
        for w in words:
            assert w in lines[0]
        assert proc.stdout == ""
    assert tree(t) == before
    ok = delta_cli("restore", t, "--version", 2, "--ignore-missing-files", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["skippedMissingFiles"] == [plan.adds[0]["path"]]


def test_adds_come_from_v2_checkpoint_sidecars_when_their_commits_are_gone(golden_copy) -> None:
    """Restoring to a version whose commits log cleanup deleted: the add actions (with their
    stats) are read from the v2 checkpoint's sidecar files, not rebuilt from the snapshot."""
    t = writable(golden_copy("v2-checkpoint-parquet"))
    log = t / "_delta_log"
    at_2 = load_snapshot(str(t), 2)
    now = 1_800_000_000_000
    lines = [json.dumps({"commitInfo": {"timestamp": now, "operation": "DELETE", "operationParameters": {}}})]
    for row in at_2.files.select(["path", "size"]).to_pylist():
        remove = {"path": row["path"], "deletionTimestamp": now, "dataChange": True, "size": row["size"]}
        lines.append(json.dumps({"remove": remove}))
    (log / f"{3:020}.json").write_text("\n".join(lines) + "\n")
    for v in range(3):
        (log / f"{v:020}.json").unlink()
    plan = plan_restore(str(t), version=2)
    assert len(plan.adds) == at_2.num_files > 0
    assert not any("rebuilt" in note for note in plan.notes)
    assert all(a.get("stats") for a in plan.adds)
