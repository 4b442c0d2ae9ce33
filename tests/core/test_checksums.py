"""Version checksum files (`_delta_log/N.crc`) against the core's replay: every checksum Delta
Spark wrote for the golden tables agrees, and each tampering of a copy is named with its field,
the checksum's value and the replay's. `delta verify`'s exit statuses are checked in process
(the JSON contract through the script itself is in test_cli.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tables.delta.cli import main
from tables.delta.snapshot.checksum import MAX_LISTED, verify_checksums
from tables.delta.text_bounds import MAX_ECHOED_PATH
from tests.conftest import GOLDEN

CRC = re.compile(r"^\d{20}\.crc$")
TXN_TABLE = "commit-info-containing-arbitrary-operationParams-types"  # 3 versions, each with a .crc


def tables_with_checksums() -> list[Path]:
    """Every golden table (nested ones too) whose log holds version checksum files; Hadoop's own
    `.N.json.crc` sidecars are not version checksums."""
    if not GOLDEN.is_dir():
        return []
    return sorted(log.parent for log in GOLDEN.rglob("_delta_log") if any(CRC.match(p.name) for p in log.iterdir()))


def test_every_golden_checksum_agrees_with_the_replay() -> None:
    tables = tables_with_checksums()
    if not tables:
        pytest.skip(f"no golden tables under {GOLDEN}")
    checked = 0
    for table in tables:
        out = verify_checksums(table)
        listed = sorted(int(p.name[:20]) for p in (table / "_delta_log").iterdir() if CRC.match(p.name))
        assert [c["version"] for c in out["checksums"]] == listed, table.name
        assert out["ok"], (table.name, [c for c in out["checksums"] if not c["ok"]])
        checked += out["checked"]
    assert checked >= len(tables)


def crc_path(table: Path, version: int) -> Path:
    return table / "_delta_log" / f"{version:020d}.crc"


def edit_crc(table: Path, version: int, change) -> dict[str, Any]:
    body = json.loads(crc_path(table, version).read_text())
    change(body)
    crc_path(table, version).write_text(json.dumps(body))
    return body


def mismatches_of(table: Path, version: int) -> dict[str, dict[str, Any]]:
    out = verify_checksums(table, version, version)
    (check,) = out["checksums"]
    assert check["version"] == version and out["ok"] is check["ok"]
    return {m["field"]: m for m in check["mismatches"]}


def test_changed_counts_are_named_with_both_values(golden_copy) -> None:
    table = golden_copy(TXN_TABLE)
    edit_crc(table, 2, lambda b: b.update(numFiles=7))
    edit_crc(table, 1, lambda b: b.update(tableSizeBytes=905))
    assert mismatches_of(table, 2) == {"numFiles": {"field": "numFiles", "expected": 7, "found": 2}}
    assert mismatches_of(table, 1) == {"tableSizeBytes": {"field": "tableSizeBytes", "expected": 905, "found": 904}}
    assert mismatches_of(table, 0) == {}
    out = verify_checksums(table)
    assert [c["ok"] for c in out["checksums"]] == [True, False, False] and not out["ok"]


def test_a_changed_schema_is_named_with_both_schemas(golden_copy) -> None:
    table = golden_copy(TXN_TABLE)
    replayed = json.loads(crc_path(table, 2).read_text())["metadata"]["schemaString"]
    tampered = replayed.replace('"name":"id","type":"integer"', '"name":"id","type":"long"')
    assert tampered != replayed
    edit_crc(table, 2, lambda b: b["metadata"].update(schemaString=tampered))
    assert mismatches_of(table, 2) == {
        "metadata.schemaString": {"field": "metadata.schemaString", "expected": tampered, "found": replayed}
    }


def add_txn_version(table: Path) -> dict[str, Any]:
    """Version 3: a set transaction only, with the checksum Delta writes for it (version 2's
    with the transaction listed)."""
    txn = {"appId": "nightly-etl", "version": 41, "lastUpdated": 1740185400000}
    commit = [{"commitInfo": {"timestamp": 1740185400000, "operation": "WRITE"}}, {"txn": txn}]
    (table / "_delta_log" / f"{3:020d}.json").write_text("\n".join(json.dumps(a) for a in commit) + "\n")
    body = json.loads(crc_path(table, 2).read_text())
    body["setTransactions"] = [txn]
    crc_path(table, 3).write_text(json.dumps(body))
    return txn


def test_a_removed_set_transaction_is_named(golden_copy) -> None:
    table = golden_copy(TXN_TABLE)
    txn = add_txn_version(table)
    assert mismatches_of(table, 3) == {}  # the replay has the transaction the checksum lists
    edit_crc(table, 3, lambda b: b.update(setTransactions=[]))
    field = "setTransactions[nightly-etl]"
    assert mismatches_of(table, 3) == {field: {"field": field, "expected": None, "found": txn}}


def test_histogram_files_and_protocol_are_compared(golden_copy) -> None:
    table = golden_copy(TXN_TABLE)

    def change(b: dict[str, Any]) -> None:
        b["allFiles"][0]["size"] = 1
        b["protocol"]["writerFeatures"].remove("invariants")

    body = edit_crc(table, 2, change)
    path = body["allFiles"][0]["path"]
    got = mismatches_of(table, 2)
    assert got[f"allFiles[{path}]"] == {"field": f"allFiles[{path}]", "expected": {"size": 1}, "found": {"size": 452}}
    assert got["protocol.writerFeatures"]["expected"] == ["changeDataFeed", "appendOnly"]
    assert got["protocol.writerFeatures"]["found"] == ["appendOnly", "changeDataFeed", "invariants"]

    empty = golden_copy("collations-table")  # Delta Spark's `histogramOpt`, no files yet
    edit_crc(empty, 0, lambda b: b["histogramOpt"]["fileCounts"].__setitem__(1, 3))
    field = "histogramOpt.fileCounts[8192, 16384)"
    assert mismatches_of(empty, 0) == {field: {"field": field, "expected": 3, "found": 0}}


def test_hostile_checksums_are_bounded(golden_copy) -> None:
    table = golden_copy(TXN_TABLE)
    edit_crc(table, 2, lambda b: b["metadata"].update(name="x" * 100_000))
    edit_crc(table, 1, lambda b: b.update(setTransactions=[{"appId": f"a{i}", "version": i} for i in range(500)]))
    crc_path(table, 0).write_text("[1, 2")
    out = verify_checksums(table)
    bad0, bad1, bad2 = out["checksums"]
    assert not bad0["ok"] and "not JSON" in bad0["error"] and bad0["mismatches"] == []
    assert len(bad1["mismatches"]) == MAX_LISTED + 1  # the first entries, then the lists' lengths
    assert bad1["mismatches"][-1] == {"field": "setTransactions (entries)", "expected": 500, "found": 0}
    (name,) = bad2["mismatches"]
    assert name["field"] == "metadata.name" and name["found"] is None
    assert len(name["expected"]) <= MAX_ECHOED_PATH and name["expected"].endswith("[truncated, 100000 characters]")


def test_exit_statuses(golden_copy, capsys: pytest.CaptureFixture[str]) -> None:
    table = golden_copy(TXN_TABLE)
    assert main(["verify", str(table), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    edit_crc(table, 1, lambda b: b.update(numFiles=3))
    assert main(["verify", str(table), "--from", "2"]) == 0  # the tampered version is outside the range
    assert main(["verify", str(table)]) == 1
    text = capsys.readouterr().out
    assert re.search(r"^1 +MISMATCH +numFiles +3 +2$", text, re.M), text
    assert main(["verify", str(table / "nope")]) == 2
    assert main(["verify", str(table), "--from", "2", "--to", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("error: ") == 2 and "Traceback" not in err


def test_checksums_on_s3_read_as_on_disk(s3_server, monkeypatch, golden_copy) -> None:
    """On an object store the checksum files are fetched together (read_many), with the same
    answers as on local disk."""
    from tests.conftest import use_store_environment

    table = golden_copy(TXN_TABLE)
    edit_crc(table, 1, lambda b: b.update(tableSizeBytes=1))
    crc_path(table, 0).write_text("{")
    use_store_environment(monkeypatch, s3_server.env())
    client = s3_server.boto3()
    client.create_bucket(Bucket="checksums")
    for f in sorted(table.rglob("*")):
        if f.is_file():
            client.upload_file(str(f), "checksums", f"t/{f.relative_to(table).as_posix()}")
    local, remote = verify_checksums(table), verify_checksums("s3://checksums/t")
    assert [c["ok"] for c in remote["checksums"]] == [False, False, True]
    assert remote["checksums"][1]["mismatches"] == [{"field": "tableSizeBytes", "expected": 1, "found": 904}]
    assert "not JSON" in remote["checksums"][0]["error"]
    assert [c.get("mismatches") for c in remote["checksums"]] == [c.get("mismatches") for c in local["checksums"]]


OLD_WRITER_FIELDS = ("tableSizeBytes", "numFiles", "numMetadata", "numProtocol", "numTransactions")


def old_writer_checksums(table: Path) -> None:
    """Every checksum file rewritten as older Delta writers wrote them: the five counts only,
    with their right values."""
    for crc in sorted((table / "_delta_log").glob("*.crc")):
        if CRC.match(crc.name):
            body = json.loads(crc.read_text())
            counts = {"numTransactions": len(body.get("setTransactions") or []), **body}
            crc.write_text(json.dumps({k: counts[k] for k in OLD_WRITER_FIELDS}))


def test_an_older_writers_checksums_agree_and_a_tampered_count_still_differs(golden_copy, capsys) -> None:
    """Checksum files holding only the five counts are not a disagreement on the fields they
    do not carry (`notRecorded`, said in the text); a count changed in one still is."""
    table = golden_copy(TXN_TABLE)
    old_writer_checksums(table)
    out = verify_checksums(table)
    assert out["ok"] and out["checked"] == 3, out
    for check in out["checksums"]:
        assert check["mismatches"] == [] and check["notRecorded"] == ["metadata", "protocol"], check
    assert main(["verify", str(table)]) == 0
    text = capsys.readouterr().out
    assert "MISMATCH" not in text and re.search(r"^2 +ok +metadata, protocol: not recorded by its writer", text, re.M)
    assert text.endswith("3 checked, 0 disagree\n"), text
    edit_crc(table, 2, lambda b: b.update(numFiles=9))
    assert mismatches_of(table, 2) == {"numFiles": {"field": "numFiles", "expected": 9, "found": 2}}
    assert main(["verify", str(table)]) == 1
    assert re.search(r"^2 +MISMATCH +numFiles +9 +2$", capsys.readouterr().out, re.M)


def test_an_unreadable_checksum_is_named_inside_its_table(golden_copy, capsys) -> None:
    """The error names the checksum file as the table knows it, never the server's path."""
    table = golden_copy(TXN_TABLE)
    crc_path(table, 1).write_text("{not json")
    (check,) = verify_checksums(table, 1, 1)["checksums"]
    assert check["error"].startswith("_delta_log/00000000000000000001.crc: checksum file is not JSON"), check
    assert str(table) not in check["error"]
    assert main(["verify", str(table)]) == 1
    assert str(table) not in capsys.readouterr().out
