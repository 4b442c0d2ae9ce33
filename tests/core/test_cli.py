"""The `delta` console script and `python manage.py delta ...` as a script sees them: the JSON
contract, the text output, and errors that exit 2 with one `error:` line on stderr, no
traceback, and no write to the table. Every contract test runs under both commands; the
script must also start without Django, Celery or Spark.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tables.delta.snapshot.state import load_snapshot
from tests.core.builders import writable
from tests.web.ui_tables import DESCRIBE_HISTORY_DETAILS

REPO = Path(__file__).resolve().parents[2]
LOG = "_delta_log"
BASE_MS = 1_700_000_000_000

SNAPSHOT_KEYS = {
    "version",
    "protocol",
    "metadata",
    "numFiles",
    "sizeBytes",
    "files",
    "setTransactions",
    "domainMetadata",
}
METADATA_KEYS = {"id", "name", "description", "schema", "partitionColumns", "configuration", "createdTime"}
FILE_KEYS = {"path", "size", "partitionValues", "modificationTime", "deletionVector"}
HISTORY_KEYS = {"version", "timestamp", *DESCRIBE_HISTORY_DETAILS, "fileModificationTime"}


# the console script pip installs next to the interpreter (`delta = "tables.delta.cli:script"`)
DELTA_SCRIPT = Path(sys.executable).parent / "delta"
COMMANDS = {
    "delta": [str(DELTA_SCRIPT)],
    "manage.py": [sys.executable, "manage.py", "delta"],
}


@pytest.fixture(scope="module", params=list(COMMANDS))
def command(request: pytest.FixtureRequest) -> list[str]:
    """The command line before the subcommand: the `delta` script, then `manage.py delta`."""
    if request.param == "delta":
        assert DELTA_SCRIPT.is_file(), f"{DELTA_SCRIPT} is missing: `pip install -e .` installs it (make install)"
    return COMMANDS[request.param]


def launch(command: list[str], *args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*command, *map(str, args)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def delta(command: list[str], *args: object) -> subprocess.CompletedProcess[str]:
    return finish(launch(command, *args))


def parsed(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def delta_json(command: list[str], *args: object) -> Any:
    return parsed(delta(command, *args, "--json"))


def tree_digest(root: Path) -> dict[str, str]:
    """Every directory and file under root, files with a hash of their bytes."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root) + "/"] = "dir"
        for f in filenames:
            full = os.path.join(dirpath, f)
            out[os.path.relpath(full, root)] = hashlib.sha256(Path(full).read_bytes()).hexdigest()
    return out


def assert_fails(command: list[str], table: Path, *args: object, words: tuple[str, ...]) -> str:
    """The command exits 2 with exactly one `error:` line naming `words`, and writes nothing."""
    before = tree_digest(table) if table.exists() else None
    proc = delta(command, *args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error:")
    assert proc.stdout == ""
    for w in words:
        assert w in lines[0], lines[0]
    if before is not None:
        assert tree_digest(table) == before, "a failing command changed the table"
    return lines[0]


def write_commit(table: Path, version: int, actions: list[dict[str, Any]], mtime_ms: int | None = None) -> Path:
    path = table / LOG / f"{version:020d}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(a) + "\n" for a in actions))
    if mtime_ms is not None:
        os.utime(path, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))
    return path


def add(path: str, p: str | None, size: int, dv: dict[str, Any] | None = None) -> dict[str, Any]:
    body = {"path": path, "partitionValues": {"p": p}, "size": size, "modificationTime": BASE_MS, "dataChange": True}
    if dv:
        body["deletionVector"] = dv
    return {"add": body}


DV = {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k", "offset": 1, "sizeInBytes": 34, "cardinality": 2}
SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "p", "type": "string", "nullable": True, "metadata": {}},
    ],
}


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three commits: create with three files, a deletion-vector delete, an append."""
    t = tmp_path_factory.mktemp("cli") / "events"
    write_commit(
        t,
        0,
        [
            {
                "commitInfo": {
                    "timestamp": BASE_MS,
                    "operation": "CREATE TABLE AS SELECT",
                    "operationParameters": {"partitionBy": '["p"]'},
                    "userName": "alice",
                    "isBlindAppend": True,
                    "engineInfo": "test-writer/1.0",
                }
            },
            {
                "protocol": {
                    "minReaderVersion": 3,
                    "minWriterVersion": 7,
                    "readerFeatures": ["deletionVectors"],
                    "writerFeatures": ["deletionVectors", "domainMetadata"],
                }
            },
            {
                "metaData": {
                    "id": "0b7c6c1e-1111-4e5e-9a66-7e1f0e3c2a10",
                    "name": "events",
                    "description": "a test table",
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": json.dumps(SCHEMA),
                    "partitionColumns": ["p"],
                    "configuration": {"delta.enableDeletionVectors": "true", "owner": "qa"},
                    "createdTime": BASE_MS - 5,
                }
            },
            add("p=a%20b/f1.parquet", "a b", 100),
            add("p=x%25y/f2.parquet", "x%y", 200),
            add("p=__HIVE_DEFAULT_PARTITION__/f3.parquet", None, 300),
        ],
        BASE_MS + 1000,
    )
    write_commit(
        t,
        1,
        [
            {
                "commitInfo": {
                    "timestamp": BASE_MS + 2000,
                    "operation": "DELETE",
                    "operationParameters": {"predicate": '["(id = 1)"]'},
                    "readVersion": 0,
                    "isolationLevel": "WriteSerializable",
                    "isBlindAppend": False,
                    "userMetadata": "cleanup",
                    "operationMetrics": {"numDeletedRows": "2"},
                }
            },
            {"remove": {"path": "p=a%20b/f1.parquet", "deletionTimestamp": BASE_MS + 2000, "dataChange": True}},
            add("p=a%20b/f1.parquet", "a b", 100, DV),
            {"remove": {"path": "p=x%25y/f2.parquet", "deletionTimestamp": BASE_MS + 2000, "dataChange": True}},
            {"txn": {"appId": "job-1", "version": 3, "lastUpdated": BASE_MS + 2000}},
            {"domainMetadata": {"domain": "d1", "configuration": '{"k":1}', "removed": False}},
        ],
        BASE_MS + 2000,
    )
    write_commit(
        t,
        2,
        [
            {
                "commitInfo": {
                    "timestamp": BASE_MS + 3000,
                    "operation": "WRITE",
                    "readVersion": 1,
                    "isBlindAppend": True,
                }
            },
            add("p=a%20b/f4.parquet", "a b", 50),
        ],
        BASE_MS + 3000,
    )
    return t


# Reads: the commands run at once (manage.py's each pay Django's start-up), the tests check their output.
READS = {
    "snapshot": ("snapshot", "--json"),
    "snapshot_v0": ("snapshot", "--version", 0, "--json"),
    "snapshot_no_files": ("snapshot", "--no-files", "--json"),
    "snapshot_text": ("snapshot",),
    "history": ("history", "--json"),
    "history_limit_2": ("history", "--limit", 2, "--json"),
    "history_limit_0": ("history", "--limit", 0, "--json"),
    "history_text": ("history",),
    "resolve": ("resolve", "--timestamp", BASE_MS + 2500, "--json"),
    "resolve_text": ("resolve", "--timestamp", BASE_MS + 2500),
    "timeline": ("timeline", "--json"),
    "timeline_text": ("timeline",),
}


@pytest.fixture(scope="module")
def reads(command: list[str], table: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    before = tree_digest(table)
    procs = {name: launch(command, args[0], table, *args[1:]) for name, args in READS.items()}
    out = {name: finish(p) for name, p in procs.items()}
    assert tree_digest(table) == before, "reading wrote to the table"
    for name, proc in out.items():
        assert proc.returncode == 0 and proc.stderr == "", (name, proc.stderr)
    return out


# --- snapshot ---------------------------------------------------------------------------


def test_snapshot_json_contract(reads) -> None:
    snap = parsed(reads["snapshot"])
    assert set(snap) == SNAPSHOT_KEYS
    assert snap["version"] == 2
    assert snap["protocol"] == {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": ["deletionVectors", "domainMetadata"],
    }
    md = snap["metadata"]
    assert set(md) == METADATA_KEYS
    assert md["id"] == "0b7c6c1e-1111-4e5e-9a66-7e1f0e3c2a10"
    assert (md["name"], md["description"]) == ("events", "a test table")
    assert md["schema"] == SCHEMA, "the schema comes parsed, not as a string"
    assert md["partitionColumns"] == ["p"]
    assert md["configuration"] == {"delta.enableDeletionVectors": "true", "owner": "qa"}
    assert md["createdTime"] == BASE_MS - 5

    files = {f["path"]: f for f in snap["files"]}
    assert all(set(f) == FILE_KEYS for f in snap["files"])
    # paths come URL-decoded: they name the files on disk
    assert sorted(files) == ["p=__HIVE_DEFAULT_PARTITION__/f3.parquet", "p=a b/f1.parquet", "p=a b/f4.parquet"]
    assert snap["numFiles"] == 3 == len(snap["files"])
    assert snap["sizeBytes"] == 450 == sum(f["size"] for f in snap["files"])
    assert files["p=a b/f1.parquet"]["partitionValues"] == {"p": "a b"}
    assert files["p=__HIVE_DEFAULT_PARTITION__/f3.parquet"]["partitionValues"] == {"p": None}
    assert files["p=a b/f4.parquet"]["modificationTime"] == BASE_MS
    dv = files["p=a b/f1.parquet"]["deletionVector"]
    assert {k: dv[k] for k in DV} == DV
    assert dv["uniqueId"] == f"u{DV['pathOrInlineDv']}@1"
    assert files["p=a b/f4.parquet"]["deletionVector"] is None

    assert [(t["appId"], t["version"]) for t in snap["setTransactions"]] == [("job-1", 3)]
    assert [(d["domain"], d["configuration"]) for d in snap["domainMetadata"]] == [("d1", '{"k":1}')]


def test_snapshot_at_a_version_and_without_files(reads) -> None:
    v0 = parsed(reads["snapshot_v0"])
    assert v0["version"] == 0
    assert (v0["numFiles"], v0["sizeBytes"]) == (3, 600)
    assert sorted(f["path"] for f in v0["files"]) == [
        "p=__HIVE_DEFAULT_PARTITION__/f3.parquet",
        "p=a b/f1.parquet",
        "p=x%y/f2.parquet",
    ]
    assert all(f["deletionVector"] is None for f in v0["files"])
    assert v0["setTransactions"] == [] and v0["domainMetadata"] == []

    brief = parsed(reads["snapshot_no_files"])
    assert "files" not in brief
    assert set(brief) == SNAPSHOT_KEYS - {"files"}
    assert (brief["numFiles"], brief["sizeBytes"]) == (3, 450)


def test_snapshot_text(reads) -> None:
    out = reads["snapshot_text"].stdout
    assert not out.lstrip().startswith("{"), "without --json the output is not JSON"
    assert "version      2" in out
    assert "reader 3, writer 7" in out
    assert "partitions   p" in out
    assert "files        3 (450 bytes)" in out
    header = next(line for line in out.splitlines() if line.startswith("path"))
    assert header.split() == ["path", "size", "partitionValues", "deletionVector"]
    for path in ("p=a b/f1.parquet", "p=a b/f4.parquet", "p=__HIVE_DEFAULT_PARTITION__/f3.parquet"):
        assert any(line.startswith(path) for line in out.splitlines()), path
    assert f"u{DV['pathOrInlineDv']}@1" in out


# --- history ----------------------------------------------------------------------------


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def test_history_json_newest_first(reads) -> None:
    rows = parsed(reads["history"])
    assert [r["version"] for r in rows] == [2, 1, 0]
    for r in rows:
        assert HISTORY_KEYS <= set(r), HISTORY_KEYS - set(r)
    assert [r["operation"] for r in rows] == ["WRITE", "DELETE", "CREATE TABLE AS SELECT"]
    # no In-Commit Timestamps: the commit time is the commit file's modification time
    assert [r["timestamp"] for r in rows] == [BASE_MS + 3000, BASE_MS + 2000, BASE_MS + 1000]
    assert [r["fileModificationTime"] for r in rows] == [BASE_MS + 3000, BASE_MS + 2000, BASE_MS + 1000]
    v2, v1, v0 = rows
    assert (v0["userName"], v0["engineInfo"], v0["isBlindAppend"]) == ("alice", "test-writer/1.0", True)
    assert v0["operationParameters"] == {"partitionBy": '["p"]'}
    assert v0["readVersion"] is None
    assert (v1["readVersion"], v1["isolationLevel"], v1["userMetadata"]) == (0, "WriteSerializable", "cleanup")
    assert v1["operationMetrics"] == {"numDeletedRows": "2"}
    assert (v2["readVersion"], v2["isBlindAppend"], v2["userName"]) == (1, True, None)


def test_history_limit(reads) -> None:
    assert [r["version"] for r in parsed(reads["history_limit_2"])] == [2, 1]
    assert parsed(reads["history_limit_0"]) == []


def test_history_text(reads) -> None:
    lines = reads["history_text"].stdout.splitlines()
    assert lines[0].split()[:2] == ["version", "timestamp"]
    assert "operation" in lines[0].split()
    assert set(lines[1].replace(" ", "")) == {"-"}
    body = lines[2:]
    assert [line.split()[0] for line in body] == ["2", "1", "0"]
    assert "DELETE" in body[1] and "alice" in body[2]
    assert iso(BASE_MS + 1000) in body[2], "timestamps are shown as readable UTC times"


# --- resolve and timeline -----------------------------------------------------------------


def test_resolve(reads) -> None:
    got = parsed(reads["resolve"])
    assert got["version"] == 1, "the last commit at or before the timestamp"
    assert got["source"] == "file" and got["rule"]
    out = reads["resolve_text"].stdout
    assert out.startswith("version 1 (committed ") and "rule: " in out


def test_timeline(reads) -> None:
    got = parsed(reads["timeline"])
    assert got["ict"]["enabled"] is False
    assert [(v["version"], v["timestamp"]) for v in got["versions"]] == [
        (0, BASE_MS + 1000),
        (1, BASE_MS + 2000),
        (2, BASE_MS + 3000),
    ]
    lines = reads["timeline_text"].stdout.splitlines()
    assert lines[0] == "ICT off"
    assert lines[2].split()[:3] == ["version", "timestamp", "source"]


def test_history_limit_must_not_be_negative(command: list[str], table: Path) -> None:
    assert_fails(command, table, "history", table, "--limit", -1, words=("--limit",))


def test_golden_table_matches_the_core(command: list[str], golden_copy) -> None:
    path = golden_copy("dv-partitioned-with-checkpoint")
    snap_p, hist_p = (
        launch(command, "snapshot", path, "--json"),
        launch(command, "history", path, "--limit", 3, "--json"),
    )
    snap, rows = parsed(finish(snap_p)), parsed(finish(hist_p))
    core = load_snapshot(path)
    assert snap["version"] == core.version
    assert snap["numFiles"] == core.num_files > 0
    assert sorted(f["path"] for f in snap["files"]) == sorted(core.file_paths())
    assert sum(f["deletionVector"] is not None for f in snap["files"]) > 0
    assert [r["version"] for r in rows] == [core.version, core.version - 1, core.version - 2]


# --- errors -----------------------------------------------------------------------------


def test_not_a_delta_table(command: list[str], tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_fails(command, empty, "snapshot", empty, words=(str(empty), "not a Delta table"))


def test_version_not_found(command: list[str], table: Path) -> None:
    msg = assert_fails(command, table, "snapshot", table, "--version", 7, words=("version 7",))
    assert "available versions are 0 to 2" in msg


def test_gap_in_the_log(command: list[str], golden_copy) -> None:
    path = writable(golden_copy("checkpoint"))
    (path / LOG / f"{12:020d}.json").unlink()
    assert_fails(command, path, "snapshot", path, words=("gap", "missing commit versions 12"))
    # versions before the gap are still readable
    assert delta_json(command, "snapshot", path, "--version", 11, "--no-files")["version"] == 11


def test_missing_protocol(command: list[str], golden_copy) -> None:
    path = writable(golden_copy("deltalog-state-reconstruction-without-protocol"))
    assert_fails(command, path, "snapshot", path, words=("no protocol",))


def test_unsupported_reader_feature(command: list[str], tmp_path: Path) -> None:
    path = tmp_path / "fancy"
    write_commit(
        path,
        0,
        [
            {
                "protocol": {
                    "minReaderVersion": 3,
                    "minWriterVersion": 7,
                    "readerFeatures": ["fancyFeature"],
                    "writerFeatures": ["fancyFeature"],
                }
            },
            {
                "metaData": {
                    "id": "fancy",
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": json.dumps(SCHEMA),
                    "partitionColumns": [],
                    "configuration": {},
                }
            },
        ],
    )
    for sub in ("snapshot", "history"):
        assert_fails(command, path, sub, path, words=("fancyFeature",))


def test_corrupt_json_names_file_and_line(command: list[str], golden_copy) -> None:
    path = writable(golden_copy("checkpoint"))
    commit = path / LOG / f"{13:020d}.json"
    data = commit.read_bytes()
    if not data.endswith(b"\n"):
        data += b"\n"
    bad_line = data.count(b"\n") + 1
    commit.write_bytes(data + b'{"add": {"path": garbage\n')
    assert_fails(command, path, "snapshot", path, words=(commit.name, f"line {bad_line}"))
    # the versions before it do not read that commit
    assert delta_json(command, "snapshot", path, "--version", 12, "--no-files")["version"] == 12


def test_unreadable_checkpoint_names_the_file(command: list[str], golden_copy) -> None:
    path = writable(golden_copy("checkpoint"))
    cp = path / LOG / f"{10:020d}.checkpoint.parquet"
    assert cp.is_file()
    cp.write_bytes(b"this is not parquet" * 20)
    assert_fails(command, path, "snapshot", path, words=(cp.name, "checkpoint"))
    # before the checkpoint the commits alone rebuild the state
    assert delta_json(command, "snapshot", path, "--version", 9, "--no-files")["version"] == 9


# --- the two commands and the script's start-up -----------------------------------------------


def test_both_commands_print_the_same(table: Path) -> None:
    """`manage.py delta` is a wrapper: same bytes, same exit status, reads and failures alike."""
    cases = [("snapshot", table), ("history", table, "--json"), ("snapshot", table, "--version", 9)]
    procs = [(launch(COMMANDS["delta"], *c), launch(COMMANDS["manage.py"], *c)) for c in cases]
    for case, (script, managed) in zip(cases, procs, strict=True):
        a, b = finish(script), finish(managed)
        assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr), case
    assert a.returncode == 2 and a.stderr.startswith("error: ")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ((), "required"),
        (("snapshot",), "the following arguments are required: path"),
        (("snapshot", ".", "--version", "x"), "invalid int value"),
        (("vacuum", "."), "invalid choice"),
        (("restore", "."), "one of the arguments --version --timestamp is required"),
    ],
)
def test_usage_errors_exit_2_without_traceback(command: list[str], args: tuple[str, ...], words: str) -> None:
    proc = delta(command, *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[0].startswith("usage: ")
    last = proc.stderr.splitlines()[-1]
    assert "error: " in last and words in last, proc.stderr


def test_help(command: list[str]) -> None:
    proc = delta(command, "snapshot", "--help")
    assert proc.returncode == 0 and "--no-files" in proc.stdout and proc.stderr == ""


def test_a_closed_pipe_is_no_traceback(command: list[str], tmp_path: Path) -> None:
    """`delta snapshot T --json | head -c 10`: the reader leaves before the output ends."""
    big = tmp_path / "big"
    files = [add(f"p=a/part-{i:05d}-{'x' * 40}.parquet", "a", i) for i in range(2000)]  # ~0.5 MB of JSON
    write_commit(big, 0, [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, *TINY_METADATA, *files])
    proc = launch(command, "snapshot", big, "--json")
    assert proc.stdout is not None and proc.stdout.read(10).startswith("{")
    proc.stdout.close()  # more than the pipe's buffer is still to come
    proc.wait(timeout=120)
    err = proc.stderr.read() if proc.stderr else ""
    assert proc.returncode == 1 and "Traceback" not in err and err == "", err


TINY_METADATA = [
    {
        "metaData": {
            "id": "big",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps(SCHEMA),
            "partitionColumns": ["p"],
            "configuration": {},
        }
    }
]


def imported(proc: subprocess.CompletedProcess[str]) -> set[str]:
    """Top-level package names from `python -X importtime` lines on stderr."""
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


def run_script_with_importtime(*args: object) -> subprocess.CompletedProcess[str]:
    assert DELTA_SCRIPT.is_file(), f"{DELTA_SCRIPT} is missing: `pip install -e .` installs it (make install)"
    return subprocess.run(
        [sys.executable, "-X", "importtime", str(DELTA_SCRIPT), *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_script_starts_without_django_celery_or_spark(table: Path, tmp_path: Path) -> None:
    web = {"django", "celery", "kombu", "pyspark", "py4j", "rest_framework", "deltaweb"}
    for args in (("snapshot", table, "--json"), ("history", table), ("snapshot", tmp_path)):
        proc = run_script_with_importtime(*args)
        names = imported(proc)
        assert "tables" in names and "orjson" in names, "importtime lines were not parsed"
        assert names & web == set(), (args, sorted(names & web))
    # the core (pyarrow, numpy) is imported only once a subcommand runs
    assert {"pyarrow", "numpy"} <= imported(run_script_with_importtime("snapshot", table, "--no-files"))
    usage = run_script_with_importtime("--help")
    assert usage.returncode == 0
    assert imported(usage) & (web | {"pyarrow", "numpy", "pyroaring"}) == set()


def test_main_in_process(table: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tables.delta.cli import main

    assert main(["snapshot", str(table), "--no-files", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["numFiles"] == 3
    assert main(["snapshot", str(table / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert main(["snapshot"]) == 2
    assert "required: path" in capsys.readouterr().err


def test_verify_json_contract(golden_copy) -> None:
    """`delta verify --json`: a list `checksums` of {version, ok, mismatches: [{field, expected,
    found}]}, exit 1 when one disagrees (the cases themselves: tests/core/test_checksums.py)."""
    table = golden_copy("commit-info-containing-arbitrary-operationParams-types")
    crc = table / LOG / f"{2:020d}.crc"
    crc.write_text(crc.read_text().replace('"tableSizeBytes":904', '"tableSizeBytes":900'))
    proc = delta([str(DELTA_SCRIPT)], "verify", table, "--json")
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) == {"checksums", "ok", "checked"} and out["ok"] is False and out["checked"] == 3
    assert [set(c) for c in out["checksums"]] == [{"version", "ok", "mismatches"}] * 3
    assert [(c["version"], c["ok"]) for c in out["checksums"]] == [(0, True), (1, True), (2, False)]
    assert out["checksums"][2]["mismatches"] == [{"field": "tableSizeBytes", "expected": 900, "found": 904}]


@pytest.mark.parametrize("damage", ["truncated", "protocol-line", "metadata-line"])
def test_a_damaged_version_0_is_named_with_its_line(golden_copy, capsys, damage) -> None:
    """Version 0 cut short, or its protocol or metaData line not JSON: every command that reads
    the table names version 0's file and the bad line, as `delta snapshot` does, never 'the log
    holds no protocol action' at the latest version."""
    table = golden_copy("commit-info-containing-arbitrary-operationParams-types")
    commit = table / LOG / f"{0:020d}.json"
    lines = commit.read_bytes().split(b"\n")
    if damage == "truncated":
        commit.write_bytes(commit.read_bytes()[:300])  # inside line 1: the rest of the file is gone
        line = 1
    else:
        line = 3 if damage == "protocol-line" else 2
        lines[line - 1] = lines[line - 1][:40]
        commit.write_bytes(b"\n".join(lines))
    from tables.delta import cli

    for command in (["snapshot"], ["history"], ["reachability"], ["timeline"], ["verify"],
                    ["resolve", "--timestamp", "2030-01-01", "--allow-latest"]):  # fmt: skip
        capsys.readouterr()
        assert cli.main([command[0], str(table), *command[1:]]) == 2, command
        err = capsys.readouterr().err
        assert f"{0:020d}.json: line {line} is not valid JSON" in err, (command, err)
        assert "holds no" not in err
