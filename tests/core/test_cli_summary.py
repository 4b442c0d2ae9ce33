"""`delta snapshot --no-files` on a log of JSON commits: summed up without pyarrow
(tables.delta.snapshot.json_summary), with the very bytes the full load prints, and the same
error wherever the full load refuses the log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from tables.delta.cli import main
from tables.delta.errors import DeltaError
from tables.delta.log.listing import tail_listing
from tables.delta.snapshot.json_summary import latest_summary
from tables.delta.snapshot.state import load_snapshot
from tables.delta.storage.boundary import as_storage
from tests.conftest import GOLDEN, golden_names

REPO = Path(__file__).resolve().parents[2]
DELTA_SCRIPT = Path(sys.executable).parent / "delta"
BASE_MS = 1_700_000_000_000
SCHEMA = json.dumps({"type": "struct", "fields": [{"name": "p", "type": "string", "nullable": True, "metadata": {}}]})
HEAD = [
    {"commitInfo": {"timestamp": BASE_MS, "operation": "WRITE"}},
    {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
    {
        "metaData": {
            "id": "t",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": SCHEMA,
            "partitionColumns": ["p"],
            "configuration": {},
            "createdTime": BASE_MS,
        }
    },
]
DV = {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k", "offset": 1, "sizeInBytes": 34, "cardinality": 2}


def add(path: str, size: Any = 10, **fields: Any) -> dict[str, Any]:
    body = {"path": path, "partitionValues": {"p": "a"}, "size": size, "modificationTime": BASE_MS, "dataChange": True}
    return {"add": {**body, **fields}}


def remove(path: str, **fields: Any) -> dict[str, Any]:
    return {"remove": {"path": path, "deletionTimestamp": BASE_MS, "dataChange": True, **fields}}


def write_log(root: Path, commits: list[list[Any]]) -> Path:
    """Commits of actions (dicts, or raw lines as bytes) as _delta_log/N.json."""
    log = root / "_delta_log"
    log.mkdir(parents=True)
    for v, actions in enumerate(commits):
        lines = [a if isinstance(a, bytes) else json.dumps(a).encode() for a in actions]
        (log / f"{v:020d}.json").write_bytes(b"\n".join(lines) + b"\n")
    return root


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


# Logs the summary must read exactly as the full load does: answers, and refusals.
CASES: dict[str, list[list[Any]]] = {
    "re-added and removed files": [
        [*HEAD, add("a"), add("b", 20), add("c", 30)],
        [remove("a"), add("b", 25), add("a", 11)],
        [remove("c"), add("d", 40)],
    ],
    "file URIs and plain paths name one file": [
        [*HEAD, add("file:/t/x", 5), add("file:///t/y", 6)],
        [remove("/t/x"), add("file://localhost/t/y", 7)],
    ],
    "deletion vectors are part of a file's identity": [
        [*HEAD, add("a", deletionVector=DV), add("b")],
        [remove("a", deletionVector=DV), add("a", 12, deletionVector={**DV, "offset": 9}), add("b", deletionVector=DV)],
    ],
    "txn, domain metadata and a later metaData": [
        [
            *HEAD,
            add("a"),
            {"txn": {"appId": "j", "version": 1}},
            {"domainMetadata": {"domain": "d", "configuration": "{}", "removed": False}},
        ],
        [add("b"), {"metaData": {**HEAD[2]["metaData"], "partitionColumns": ["q"], "configuration": {"k": "v"}}}],
        [
            {"domainMetadata": {"domain": "d", "configuration": "{}", "removed": True}},
            {"txn": {"appId": "j", "version": 2}},
        ],
    ],
    "a commitInfo line holding a metaData is not read for it": [
        [*HEAD, add("a"), {"commitInfo": {"timestamp": 1}, "metaData": {**HEAD[2]["metaData"], "id": "other"}}],
    ],
    "an empty commit": [[*HEAD, add("a")], []],
    "a null size": [[*HEAD, add("a", None), add("b", 3)]],
    "a size that is a string": [[*HEAD, add("a", "10")]],
    "a size that is a float": [[*HEAD, add("a", 1.5)]],
    "a size that is true": [[*HEAD, add("a", True)]],
    "a size beyond int64": [[*HEAD, add("a", 1 << 63)]],
    "a modificationTime that is a string": [[*HEAD, add("a", modificationTime="now")]],
    "dataChange as a string": [[*HEAD, add("a", dataChange="true")]],
    "a partition value that is a number": [[*HEAD, add("a", partitionValues={"p": 1})]],
    "a remove's size that is a string": [[*HEAD, add("a")], [remove("a", size="x")]],
    "a path that is a number": [[*HEAD, add(7)]],
    "an add without a path": [[*HEAD, {"add": {"size": 1}}]],
    "an add and a remove on one line": [[*HEAD, {**add("a"), **remove("b")}]],
    "an add that is a list": [[*HEAD, {"add": [1]}]],
    "a line that is not an object": [[*HEAD, add("a"), b"[1, 2]"]],
    "a line that is not JSON": [[*HEAD, add("a")], [add("b"), b'{"add": {"path": "c", "si', add("d")], [add("e")]],
    "a newest commit cut short (read up to the one before)": [[*HEAD, add("a")], [add("b"), b'{"add": {"path": "c"']],
    "a line of spaces": [[*HEAD, add("a"), b"   "]],
    "a deletion vector without its path": [[*HEAD, add("a", deletionVector={"storageType": "u"})]],
    "no protocol": [[HEAD[0], HEAD[2], add("a")]],
    "an unsupported reader feature": [
        [
            HEAD[0],
            {
                "protocol": {
                    "minReaderVersion": 3,
                    "minWriterVersion": 7,
                    "readerFeatures": ["nope"],
                    "writerFeatures": [],
                }
            },
            HEAD[2],
            add("a"),
        ]
    ],
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_summary_prints_what_the_full_load_prints(case: str, tmp_path: Path, capsys, monkeypatch) -> None:
    """`--no-files --json` prints, byte for byte, what it printed when every table was loaded
    in full (the same command with the summary path declining), or fails with the same line."""
    table = str(write_log(tmp_path / "t", CASES[case]))
    code, out, err = run(capsys, "snapshot", table, "--no-files", "--json")
    monkeypatch.setattr("tables.delta.snapshot.json_summary.latest_summary", lambda storage, listing: None)
    assert run(capsys, "snapshot", table, "--no-files", "--json") == (code, out, err)
    assert (code == 0 and out.startswith("{")) or (code == 2 and out == "" and err.startswith("error: "))


def test_the_summary_answers_the_usual_logs_itself(tmp_path: Path) -> None:
    """The cases a writer produces are summed up without the full load (which would import
    pyarrow); only what it might read otherwise is left to it."""
    answered = set()
    for case, commits in CASES.items():
        storage = as_storage(write_log(tmp_path / str(len(answered)) / case.replace(" ", "-"), commits))
        if latest_summary(storage, tail_listing(storage)) is not None:
            answered.add(case)
    assert answered == {
        "re-added and removed files",
        "file URIs and plain paths name one file",
        "deletion vectors are part of a file's identity",
        "txn, domain metadata and a later metaData",
        "a commitInfo line holding a metaData is not read for it",
        "an empty commit",
        "a newest commit cut short (read up to the one before)",
    }


@pytest.mark.parametrize("name", golden_names())
def test_golden_tables_as_the_full_load_reads_them(name: str) -> None:
    """Every golden table: the summary is the full load's (None where that refuses the log,
    or has a checkpoint to read), and delta-rs counts the same files and bytes."""
    storage = as_storage(str(GOLDEN / name))
    try:
        listing = tail_listing(storage)
    except DeltaError:
        pytest.skip("not a readable log")
    summary = latest_summary(storage, listing)
    try:
        expected = load_snapshot(storage, None, listing=listing).summary(files=False)
    except DeltaError:
        assert summary is None
        return
    if summary is None:
        return
    assert orjson.dumps(summary) == orjson.dumps(expected)
    deltalake = pytest.importorskip("deltalake")
    import pyarrow as pa

    try:
        dt = deltalake.DeltaTable(str(GOLDEN / name))
        sizes = pa.table(dt.get_add_actions(flatten=True)).column("size_bytes").to_pylist()
    except Exception as exc:  # a feature delta-rs does not read: nothing to compare with
        pytest.skip(f"delta-rs cannot read it: {type(exc).__name__}")
    assert (summary["version"], summary["numFiles"], summary["sizeBytes"]) == (dt.version(), len(sizes), sum(sizes))


def test_json_logs_are_summed_up_without_pyarrow(tmp_path: Path) -> None:
    """The `delta` script's own process imports no pyarrow or numpy for a JSON log's summary
    (a quarter of a second of a cold process), and still does for a checkpointed one."""
    table = write_log(tmp_path / "t", CASES["re-added and removed files"])

    def imported(*args: object) -> set[str]:
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", str(DELTA_SCRIPT), "snapshot", *map(str, args)],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        return {ln.rsplit("|", 1)[1].strip().split(".")[0] for ln in proc.stderr.splitlines() if "|" in ln}

    names = imported(table, "--no-files", "--json")
    assert "tables" in names and "orjson" in names, "importtime lines were not parsed"
    assert names & {"pyarrow", "numpy"} == set()
    assert {"pyarrow", "numpy"} <= imported(GOLDEN / "checkpoint", "--no-files", "--json")
