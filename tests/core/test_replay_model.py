"""Property test: random logs, read at every version, against the plain reference replay.

Hypothesis writes a random sequence of JSON commits into a temporary table: adds of new
paths, re-adds of active ones, removes of active and of unknown paths, adds and removes
carrying deletion vectors on the same path, metaData and protocol changes, txn and
domainMetadata actions, commitInfo and blank lines. It then writes classic checkpoints at
random versions, built from the reference state (tests/core/reference.py), and sometimes a
`_last_checkpoint` hint that is right, stale or corrupt, and sometimes cleans up the
commits before the newest checkpoint. `load_snapshot` must give the reference's state at
every version: the active files by (path, deletion vector id) with the winning add's
fields, the metadata, the protocol, the txns by appId and the domain metadata.
"""

from __future__ import annotations

import json
import random
import string
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tables.delta import errors
from tables.delta.log.actions import dv_unique_id
from tables.delta.snapshot.state import Snapshot, load_snapshot
from tests.core.reference import _canon, _dv_id, replay_json

LOG = "_delta_log"
TABLE_ID = "5f8a7c2e-0000-4000-8000-00000000d317"
SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "p", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)
# a small pool, so that re-adds and removes of active paths are frequent; the last four
# name one file (Delta canonicalizes file: URIs), the encoded ones stay as written
PATHS = [
    "part-0.parquet",
    "dir/part-1.parquet",
    "p=a%20b/part-2.parquet",
    "p=x%25y/part-3.parquet",
    "/abs/part-4.parquet",
    "file:/abs/part-4.parquet",
    "file:///abs/part-4.parquet",
    "file://localhost/abs/part-4.parquet",
]
PARTITION_VALUES = [{"p": "a"}, {"p": "x y"}, {"p": "é"}, {"p": None}, {"p": ""}]
PROTOCOLS = [
    {"minReaderVersion": 1, "minWriterVersion": 2},
    {"minReaderVersion": 1, "minWriterVersion": 4},
    {"minReaderVersion": 2, "minWriterVersion": 5},
    {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": ["deletionVectors", "domainMetadata"],
    },
]
CONFIG_KEYS = ["delta.appendOnly", "delta.logRetentionDuration", "owner", "weird key é", "delta.checkpointInterval"]
APPS = ["app-1", "app-2", "streaming-query-3"]
DOMAINS = ["d1", "d2", "zz.custom"]
Z85 = string.digits + string.ascii_letters + ".-:+=^!/*?&<>()[]{}@%$#"
# str.splitlines, which the reference uses, also splits on these; JSON lines split on \n only
TEXT = st.text(st.characters(exclude_characters="\x85\u2028\u2029", exclude_categories=("Cs",)), max_size=12)
HINTS = ["none", "latest", "older", "no-such-checkpoint", "future", "garbage", "bad-version", "empty"]

MAP = pa.map_(pa.string(), pa.string())
DV = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
    ]
)
# the classic checkpoint schema of the protocol's appendix ("Checkpoint Schema"), plus
# domainMetadata, which a checkpoint must carry when the table has any
CHECKPOINT_SCHEMA = pa.schema(
    [
        ("txn", pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])),
        (
            "add",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("partitionValues", MAP),
                    ("size", pa.int64()),
                    ("modificationTime", pa.int64()),
                    ("dataChange", pa.bool_()),
                    ("stats", pa.string()),
                    ("tags", MAP),
                    ("deletionVector", DV),
                ]
            ),
        ),
        (
            "remove",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("deletionTimestamp", pa.int64()),
                    ("dataChange", pa.bool_()),
                    ("extendedFileMetadata", pa.bool_()),
                    ("partitionValues", MAP),
                    ("size", pa.int64()),
                    ("deletionVector", DV),
                ]
            ),
        ),
        (
            "metaData",
            pa.struct(
                [
                    ("id", pa.string()),
                    ("name", pa.string()),
                    ("description", pa.string()),
                    ("format", pa.struct([("provider", pa.string()), ("options", MAP)])),
                    ("schemaString", pa.string()),
                    ("partitionColumns", pa.list_(pa.string())),
                    ("createdTime", pa.int64()),
                    ("configuration", MAP),
                ]
            ),
        ),
        (
            "protocol",
            pa.struct(
                [
                    ("minReaderVersion", pa.int32()),
                    ("minWriterVersion", pa.int32()),
                    ("readerFeatures", pa.list_(pa.string())),
                    ("writerFeatures", pa.list_(pa.string())),
                ]
            ),
        ),
        (
            "domainMetadata",
            pa.struct([("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())]),
        ),
    ]
)


@dataclass
class Log:
    commits: list[list[str]]  # lines of each commit file, blank lines included
    trailing_newline: list[bool]
    checkpoints: list[int]
    hint: str
    cleanup: bool
    shuffle_seed: int
    partitioned: bool


def metadata_action(partitioned: bool, configuration: dict[str, str], name: str | None) -> dict[str, Any]:
    return {
        "metaData": {
            "id": TABLE_ID,
            "name": name,
            "description": None if name is None else f"about {name}",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": SCHEMA,
            "partitionColumns": ["p"] if partitioned else [],
            "createdTime": 1_700_000_000_000,
            "configuration": configuration,
        }
    }


@st.composite
def logs(draw: st.DrawFn) -> Log:
    partitioned = draw(st.booleans())
    d0, d1 = draw(st.lists(st.text(Z85, min_size=20, max_size=20), min_size=2, max_size=2, unique=True))
    dv_specs = [("u", d0, 1), ("u", d0, 2), ("u", d1, 1), ("i", d1[:10], None)]

    def dv(spec: tuple[str, str, int | None], cardinality: int) -> dict[str, Any]:
        out: dict[str, Any] = {"storageType": spec[0], "pathOrInlineDv": spec[1], "sizeInBytes": 34}
        if spec[2] is not None:
            out["offset"] = spec[2]
        out["cardinality"] = cardinality
        return out

    pvs = PARTITION_VALUES if partitioned else [{}]
    path = st.sampled_from(PATHS)
    dv_choice = st.one_of(st.none(), st.sampled_from(dv_specs))

    def add(p: str, d: Any, card: int, size: int, pv: dict, mtime: int, change: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"path": p, "partitionValues": pv, "size": size, "modificationTime": mtime}
        body["dataChange"] = change
        if d is not None:
            body["deletionVector"] = dv(d, card)
        return {"add": body}

    def remove(p: str, d: Any, card: int, pv: dict, extended: bool, ts: int) -> dict[str, Any]:
        body: dict[str, Any] = {"path": p, "deletionTimestamp": ts, "dataChange": True}
        if extended:
            body.update(extendedFileMetadata=True, partitionValues=pv, size=card * 10)
        if d is not None:
            body["deletionVector"] = dv(d, card)
        return {"remove": body}

    card = st.integers(1, 1000)
    adds = st.builds(
        add, path, dv_choice, card, st.integers(0, 10**9), st.sampled_from(pvs), st.integers(1, 2**41), st.booleans()
    )
    removes = st.builds(remove, path, dv_choice, card, st.sampled_from(pvs), st.booleans(), st.integers(1, 2**41))
    config = st.dictionaries(st.sampled_from(CONFIG_KEYS), TEXT, max_size=3)
    metas = st.builds(
        metadata_action, st.just(partitioned), config, st.one_of(st.none(), st.sampled_from(["t", "tab"]))
    )
    protocols = st.sampled_from(PROTOCOLS).map(lambda p: {"protocol": p})
    txns = st.builds(
        lambda app, version, updated: {
            "txn": {"appId": app, "version": version, **({} if updated is None else {"lastUpdated": updated})}
        },
        st.sampled_from(APPS),
        st.integers(0, 2**40),
        st.one_of(st.none(), st.integers(1, 2**41)),
    )
    domains = st.builds(
        lambda domain, conf, removed: {"domainMetadata": {"domain": domain, "configuration": conf, "removed": removed}},
        st.sampled_from(DOMAINS),
        TEXT.map(lambda s: json.dumps({"v": s}, ensure_ascii=False)),
        st.booleans(),
    )
    infos = st.builds(lambda ts: {"commitInfo": {"timestamp": ts, "operation": "WRITE"}}, st.integers(1, 2**41))
    action = st.one_of(adds, adds, removes, metas, protocols, txns, domains, infos, st.just(None))

    ascii_only = draw(st.booleans())

    def lines(actions: list[dict[str, Any] | None]) -> list[str]:
        return ["" if a is None else json.dumps(a, ensure_ascii=ascii_only) for a in actions]

    first = [{"protocol": PROTOCOLS[0]}, draw(metas)]
    commits = [lines(first + draw(st.lists(st.one_of(adds, removes, txns, domains), max_size=4)))]
    n = draw(st.integers(1, 9))
    for _ in range(n):
        commits.append(lines(draw(st.lists(action, max_size=6))))
    trailing = draw(st.lists(st.booleans(), min_size=n + 1, max_size=n + 1))
    some = draw(st.integers(0, 4)) < 4  # most logs have a checkpoint
    checkpoints = sorted(draw(st.lists(st.integers(0, n), min_size=int(some), max_size=3 * some, unique=True)))
    return Log(
        commits=commits,
        trailing_newline=trailing,
        checkpoints=checkpoints,
        hint=draw(st.sampled_from(HINTS)),
        cleanup=draw(st.booleans()),
        shuffle_seed=draw(st.integers(0, 2**16)),
        partitioned=partitioned,
    )


def write_commits(root: Path, log: Log) -> None:
    (root / LOG).mkdir(parents=True)
    for v, (lines, nl) in enumerate(zip(log.commits, log.trailing_newline, strict=True)):
        text = "\n".join(lines) + ("\n" if nl else "")
        (root / LOG / f"{v:020d}.json").write_text(text, encoding="utf-8")


def tombstones(root: Path, version: int) -> dict[tuple[str, str | None], dict[str, Any]]:
    """Removes not followed by an add of the same file, up to `version` (for checkpoints)."""
    out: dict[tuple[str, str | None], dict[str, Any]] = {}
    for v in range(version + 1):
        for line in (root / LOG / f"{v:020d}.json").read_text(encoding="utf-8").split("\n"):
            if not line.strip():
                continue
            action = json.loads(line)
            for kind in ("add", "remove"):
                if kind in action:
                    body = action[kind]
                    key = (_canon(body["path"]), _dv_id(body.get("deletionVector")))
                    if kind == "add":
                        out.pop(key, None)
                    else:
                        out[key] = body
    return out


def _pairs(d: dict[str, Any] | None) -> list[tuple[str, Any]] | None:
    return None if d is None else list(d.items())


def write_checkpoint(root: Path, version: int, ref: dict[str, Any], seed: int) -> None:
    """A classic checkpoint `version.checkpoint.parquet` holding the reference state."""
    rows: list[dict[str, Any]] = [{"protocol": dict(ref["protocol"])}]
    md = dict(ref["metadata"])
    md["configuration"] = _pairs(md.get("configuration"))
    md["format"] = {"provider": md["format"]["provider"], "options": _pairs(md["format"].get("options"))}
    rows.append({"metaData": md})
    for txn in ref["txns"].values():
        rows.append({"txn": txn})
    for dom in ref["domains"].values():
        rows.append({"domainMetadata": {**dom, "removed": False}})
    for add in ref["files"].values():
        a = {k: add.get(k) for k in ("path", "size", "modificationTime", "dataChange", "deletionVector")}
        a["partitionValues"] = _pairs(add.get("partitionValues"))
        a["stats"] = '{"numRecords":1}'
        rows.append({"add": a})
    for key, rm in tombstones(root, version).items():
        assert key not in ref["files"]
        r = {k: rm.get(k) for k in ("path", "deletionTimestamp", "dataChange", "extendedFileMetadata", "size")}
        r["partitionValues"] = _pairs(rm.get("partitionValues"))
        r["deletionVector"] = rm.get("deletionVector")
        rows.append({"remove": r})
    random.Random(seed).shuffle(rows)  # a checkpoint's rows come in no particular order
    table = pa.Table.from_pylist(rows, schema=CHECKPOINT_SCHEMA)
    pq.write_table(table, root / LOG / f"{version:020d}.checkpoint.parquet")


def write_hint(root: Path, log: Log, latest: int) -> None:
    cps = log.checkpoints
    hint = log.hint
    if hint in ("latest", "older") and not cps:
        hint = "no-such-checkpoint"
    if hint == "none":
        return
    if hint == "latest":
        data = json.dumps({"version": cps[-1], "size": 3}).encode()
    elif hint == "older":
        data = json.dumps({"version": cps[0], "size": 3}).encode()
    elif hint == "no-such-checkpoint":
        free = [v for v in range(latest + 1) if v not in cps]
        data = json.dumps({"version": free[0] if free else latest + 5, "size": 3}).encode()
    elif hint == "future":
        data = json.dumps({"version": latest + 3, "size": 3}).encode()
    elif hint == "garbage":
        data = b'\x00{"version": 1, garbage'
    elif hint == "bad-version":
        data = b'{"version": "1", "size": 3}'
    else:
        data = b""
    (root / LOG / "_last_checkpoint").write_bytes(data)


def file_state(snap: Snapshot) -> dict[tuple[str, str | None], dict[str, Any]]:
    out: dict[tuple[str, str | None], dict[str, Any]] = {}
    cols = ["path", "size", "modificationTime", "partitionValues", "deletionVector"]
    for row in snap.files.select(cols).to_pylist():
        key = (_canon(row["path"]), _dv_id(row["deletionVector"]))
        assert key not in out, f"{key} is active twice"
        out[key] = row
    return out


def assert_matches_reference(snap: Snapshot, ref: dict[str, Any], where: str) -> None:
    ours = file_state(snap)
    assert sorted(ours, key=str) == sorted(ref["files"], key=str), where
    assert snap.num_files == len(ref["files"])
    pcols = ref["metadata"]["partitionColumns"]
    for key, add in ref["files"].items():
        got = ours[key]
        assert got["path"] == add["path"], f"{where}: the last add of {key} wins"
        assert (got["size"], got["modificationTime"]) == (add["size"], add["modificationTime"]), where
        assert {c: (got["partitionValues"] or {}).get(c) for c in pcols} == {
            c: add["partitionValues"].get(c) for c in pcols
        }, where
        want_dv = add.get("deletionVector")
        if want_dv is None:
            assert got["deletionVector"] is None, where
        else:
            assert {k: v for k, v in got["deletionVector"].items() if v is not None} == want_dv, where
            assert dv_unique_id(got["deletionVector"]) == key[1]

    md = ref["metadata"]
    assert snap.metadata.id == md["id"]
    assert snap.metadata.configuration == md["configuration"], where
    assert (snap.metadata.name, snap.metadata.description) == (md["name"], md["description"]), where
    assert list(snap.metadata.partition_columns) == md["partitionColumns"]
    assert snap.protocol.to_dict() == ref["protocol"], where

    assert {a: (t["version"], t.get("lastUpdated")) for a, t in snap.txns.items()} == {
        a: (t["version"], t.get("lastUpdated")) for a, t in ref["txns"].items()
    }, where
    assert {d: (m["configuration"], bool(m.get("removed"))) for d, m in snap.domains.items()} == {
        d: (m["configuration"], False) for d, m in ref["domains"].items()
    }, where


@settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(log=logs())
def test_snapshot_matches_reference_replay(log: Log) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "t"
        write_commits(root, log)
        latest = len(log.commits) - 1
        refs = [replay_json(root, v) for v in range(latest + 1)]
        for c in log.checkpoints:
            write_checkpoint(root, c, refs[c], log.shuffle_seed + c)
        write_hint(root, log, latest)

        def used_checkpoint(v: int) -> int | None:
            return max((c for c in log.checkpoints if c <= v), default=None)

        event(f"hint: {log.hint}")
        event(f"checkpoints: {len(log.checkpoints)}")
        first = 0
        if log.cleanup and log.checkpoints and log.checkpoints[-1] > 0:
            # metadata cleanup: everything before the newest checkpoint goes
            first = log.checkpoints[-1]
            event("cleaned up")
            for v in range(first):
                (root / LOG / f"{v:020d}.json").unlink()
                (root / LOG / f"{v:020d}.checkpoint.parquet").unlink(missing_ok=True)
            for v in range(first):
                with pytest.raises(errors.VersionNotFoundError, match=f"available versions are {first} to {latest}"):
                    load_snapshot(root, v)

        for v in range(first, latest + 1):
            snap = load_snapshot(root, v)
            assert snap.version == v
            assert snap.segment.checkpoint_version == used_checkpoint(v), f"version {v}: checkpoint not used"
            assert_matches_reference(snap, refs[v], f"version {v}")

        snap = load_snapshot(root)  # the latest, with the _last_checkpoint hint
        assert snap.version == latest
        assert snap.segment.checkpoint_version == used_checkpoint(latest)
        assert_matches_reference(snap, refs[latest], f"latest (hint {log.hint})")


def test_empty_commit_after_checkpoint(tmp_path: Path) -> None:
    """A zero-byte commit holds no action; right after a checkpoint it must read as such."""
    root = tmp_path / "t"
    (root / LOG).mkdir(parents=True)
    first = [{"protocol": PROTOCOLS[0]}, metadata_action(False, {}, None)]
    first.append(
        {"add": {"path": "a.parquet", "partitionValues": {}, "size": 1, "modificationTime": 1, "dataChange": True}}
    )
    (root / LOG / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in first) + "\n")
    write_checkpoint(root, 0, replay_json(root, 0), 0)
    (root / LOG / f"{1:020d}.json").write_bytes(b"")
    snap = load_snapshot(root, 1)
    assert_matches_reference(snap, replay_json(root, 1), "version 1")


# --- big commits: the reader walks to the few non-file lines, or memory-maps the file ---


def big_commit_log(root: Path, n: int, pad: int, many_others: bool) -> None:
    """Commit 0: protocol, metadata, five files. Commit 1: `n` adds with long paths and the
    non-file actions spread through it (one metaData changes the partitioning far past the
    commit's head), blank and whitespace-only lines, removes and a re-add."""
    (root / LOG).mkdir(parents=True)

    def add(path: str, pv: dict[str, Any], size: int = 10, dv: dict[str, Any] | None = None) -> dict[str, Any]:
        body = {"path": path, "partitionValues": pv, "size": size, "modificationTime": 7, "dataChange": True}
        return {"add": {**body, "deletionVector": dv} if dv else body}

    first = [{"protocol": PROTOCOLS[0]}, metadata_action(False, {"a": "1"}, None)]
    first += [add(f"a{i}.parquet", {}) for i in range(5)]
    (root / LOG / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in first))

    lines = [json.dumps({"commitInfo": {"timestamp": 1, "operation": "WRITE"}})]
    pv: dict[str, Any] = {}
    for i in range(n):
        dv = {"storageType": "u", "pathOrInlineDv": f"{i:020d}", "offset": 1, "sizeInBytes": 34, "cardinality": 1}
        lines.append(json.dumps(add(f"big/part-{i:06d}-{'x' * pad}.parquet", pv, i, dv if i % 7 == 0 else None)))
        if i == n // 10:
            lines.append(json.dumps({"txn": {"appId": "app-1", "version": 1}}))
            lines.append(json.dumps({"remove": {"path": "a0.parquet", "deletionTimestamp": 1, "dataChange": True}}))
        if i == n // 2:
            lines += [
                json.dumps({"domainMetadata": {"domain": "d1", "configuration": "{}", "removed": False}}),
                "",
                " \t",
            ]
        if i == n * 9 // 10:
            meta = metadata_action(True, {"a": "2"}, "renamed")
            lines.append(json.dumps(meta))
            pv = {"p": "v"}
        if many_others and i % (n // 100) == 0:
            lines.append(json.dumps({"txn": {"appId": f"many-{i}", "version": i}}))
    lines.append(json.dumps({"protocol": PROTOCOLS[1]}))
    lines.append(json.dumps({"remove": {"path": "big/part-000003-" + "x" * pad + ".parquet", "deletionTimestamp": 1}}))
    lines.append(json.dumps(add("a1.parquet", {"p": "w"}, size=999)))
    lines.append(json.dumps({"txn": {"appId": "app-1", "version": 2}}))
    (root / LOG / f"{1:020d}.json").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("n", "pad", "many_others", "size_mb"),
    [(3000, 300, False, 1), (3000, 300, True, 1), (12000, 300, False, 4)],
    ids=["1MB-walk", "1MB-many-others", "4MB-mapped"],
)
def test_big_commit_matches_reference(tmp_path: Path, n: int, pad: int, many_others: bool, size_mb: int) -> None:
    root = tmp_path / "t"
    big_commit_log(root, n, pad, many_others)
    assert (root / LOG / f"{1:020d}.json").stat().st_size > size_mb << 20
    for v in (0, 1):
        assert_matches_reference(load_snapshot(root, v), replay_json(root, v), f"version {v}")
    latest = load_snapshot(root)
    assert latest.metadata.partition_columns == ("p",) and latest.metadata.configuration == {"a": "2"}
    assert latest.txns["app-1"]["version"] == 2
    # the same through a checkpoint of version 0
    write_checkpoint(root, 0, replay_json(root, 0), 1)
    snap = load_snapshot(root, 1)
    assert snap.segment.checkpoint_version == 0
    assert_matches_reference(snap, replay_json(root, 1), "version 1 after checkpoint 0")


def test_small_commit_after_a_memory_mapped_one(tmp_path: Path) -> None:
    root = tmp_path / "t"
    big_commit_log(root, 12000, 300, False)
    assert (root / LOG / f"{1:020d}.json").stat().st_size > 4 << 20
    small = [{"add": {"path": "c.parquet", "partitionValues": {"p": "z"}, "size": 3, "modificationTime": 8}}]
    (root / LOG / f"{2:020d}.json").write_text(json.dumps(small[0]) + "\n")
    assert_matches_reference(load_snapshot(root, 2), replay_json(root, 2), "version 2")
