"""The history of one row (tables.delta.history.row_history and `delta row-history`).

Each answer is checked against one computed without the module:
- tables written by delta-rs (appends, updates, deletes, merges, an UPDATE to the same value,
  compaction, an overwrite; with and without change data feed, partitioned and not), against
  delta-rs reading the whole table at every version, filtered by the key and compared with the
  version before;
- deletion vectors, which delta-rs can neither write nor read: golden tables written by Delta
  Lake (each DELETE's predicate names the row it removed) and a log written here, whose
  answer is known by construction (with In-Commit Timestamps far from the files' times);
- pruning: with many versions that touch other keys in files of their own, the files read
  stay few and the rest are counted as skipped.
The command line is run as a script runs it: the JSON contract, the text, and errors that
exit 2 with one `error:` line.
"""

from __future__ import annotations

import json
import os
import re
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tables.delta.errors import InvalidColumnsError
from tables.delta.history.row_history import row_history
from tables.delta.history.row_history.replay import RowHistory
from tables.delta.history.timestamps import commit_times, format_ms
from tables.delta.json_values import json_value
from tables.delta.snapshot.dv import inline_descriptor
from tests.conftest import golden_path
from tests.core.test_cli import COMMANDS, DELTA_SCRIPT, assert_fails, delta, parsed

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

LOG = "_delta_log"
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("amount", pa.decimal128(10, 2)),
        ("day", pa.date32()),
        ("flag", pa.bool_()),
        ("region", pa.string()),
    ]
)


def record(i: int, **changes: Any) -> dict[str, Any]:
    base = {
        "id": i,
        "name": f"n{i}",
        "amount": Decimal(f"{i}.25"),
        "day": date(2024, 1, 1) + timedelta(days=i),
        "flag": i % 3 == 0,
        "region": "eu" if i % 2 else "us",
    }
    return {**base, **changes}


def frame(records: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(records, schema=SCHEMA)


def build(path: Path, cdf: bool, partitioned: bool) -> Path:
    """Every kind of write a row sees, one commit each (compaction may find nothing to do)."""
    opts: dict[str, Any] = {"partition_by": ["region"] if partitioned else None}
    config = {"delta.enableChangeDataFeed": "true"} if cdf else None
    write_deltalake(path, frame([record(i) for i in range(10)]), configuration=config, **opts)
    write_deltalake(path, frame([record(i) for i in range(10, 15)]), mode="append", **opts)
    DeltaTable(path).update(updates={"name": "'renamed'"}, predicate="id = 3")
    DeltaTable(path).delete("id = 4")
    source = frame([record(3, name="merged", amount=Decimal("99.99")), record(20)])
    (
        DeltaTable(path)
        .merge(source, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    DeltaTable(path).update(updates={"name": "name"}, predicate="id = 3")  # the same values
    write_deltalake(path, frame([record(30), record(31), record(4, name="back")]), mode="append", **opts)
    DeltaTable(path).optimize.compact()
    DeltaTable(path).delete("id = 20")
    now = DeltaTable(path).to_pyarrow_table().select(SCHEMA.names).to_pylist()
    changed = [{**r, "amount": Decimal("55.55")} if r["id"] == 5 else r for r in now]
    write_deltalake(path, frame(sorted(changed, key=lambda r: r["id"])), mode="overwrite", **opts)
    DeltaTable(path).update(updates={"flag": "true"}, predicate="region = 'eu'")  # some were true already
    return path


def versions_rows(path: Path) -> list[list[dict[str, Any]]]:
    """delta-rs's whole table at every version."""
    latest = DeltaTable(str(path)).version()
    return [DeltaTable(str(path), version=v).to_pyarrow_table().to_pylist() for v in range(latest + 1)]


def expected(tables: list[list[dict[str, Any]]], key: dict[str, Any], start: int, end: int) -> list[tuple]:
    """(version, change, before, after, changed) from whole versions compared one by one."""
    out, before = [], None
    for v in range(start, end + 1):
        rows = [r for r in tables[v] if all(r[k] == value for k, value in key.items())]
        assert len(rows) <= 1, f"the test's key {key} is not unique at version {v}"
        after = rows[0] if rows else None
        if before is None and after is not None:
            out.append((v, "insert", None, after, sorted(after)))
        elif before is not None and after is None:
            out.append((v, "delete", before, None, sorted(before)))
        elif before is not None and after != before:
            out.append((v, "update", before, after, sorted(c for c in after if after[c] != before.get(c))))
        before = after
    return out


def operation(path: Path, version: int) -> str:
    lines = (path / LOG / f"{version:020d}.json").read_text().splitlines()
    return next(json.loads(x)["commitInfo"]["operation"] for x in lines if '"commitInfo"' in x)


def got(history: RowHistory) -> list[tuple]:
    return [(e.version, e.change, e.before, e.after, sorted(e.changed)) for e in history.events]


TABLE_KINDS = [(False, False), (True, False), (False, True), (True, True)]


@pytest.fixture(scope="module", params=TABLE_KINDS, ids=["plain", "cdf", "partitioned", "cdf-partitioned"])
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    cdf, partitioned = request.param
    path = build(tmp_path_factory.mktemp("rows") / "t", cdf, partitioned)
    return path, versions_rows(path), cdf


def test_written_tables_use_change_data_where_the_feed_is_on(written) -> None:
    path, _tables, cdf = written
    logs = "".join(p.read_text() for p in sorted((path / LOG).glob("*.json")))
    assert ('"cdc"' in logs) == cdf


@pytest.mark.parametrize("key", [0, 3, 4, 5, 9, 10, 20, 30, 99])
def test_events_agree_with_whole_versions_compared(written, key: int) -> None:
    path, tables, _cdf = written
    latest = len(tables) - 1
    for start, end in [(0, latest), (2, latest - 2), (5, latest)]:
        ours = row_history(path, {"id": str(key)}, start, end)
        assert got(ours) == expected(tables, {"id": key}, start, end), (key, start, end)


def test_a_rewrite_with_the_same_values_is_no_event(written) -> None:
    path, _tables, _cdf = written
    history = row_history(path, {"id": "3"})
    assert [(e.change, operation(path, e.version)) for e in history.events] == [
        ("insert", "WRITE"),
        ("update", "UPDATE"),
        ("update", "MERGE"),
    ]
    assert history.events[1].changed == ["name"]
    assert history.events[2].changed == ["name", "amount"]


def test_an_overwrite_changing_one_row_is_its_update_and_no_other_rows_event(written) -> None:
    path, tables, _cdf = written
    overwrite = next(
        v for v in range(len(tables)) if v and len(tables[v]) == len(tables[v - 1]) and _differs(tables, v)
    )
    five = row_history(path, {"id": "5"}, overwrite - 1, overwrite)
    assert [(e.version, e.change, e.changed) for e in five.events] == [
        (overwrite - 1, "insert", list(SCHEMA.names)),
        (overwrite, "update", ["amount"]),
    ]
    assert five.events[1].before["amount"] == Decimal("5.25") and five.events[1].after["amount"] == Decimal("55.55")
    untouched = row_history(path, {"id": "6"}, overwrite - 1, overwrite)
    assert [e.change for e in untouched.events] == ["insert"]


def _differs(tables: list[list[dict]], v: int) -> bool:
    by_id = {r["id"]: r for r in tables[v - 1]}
    return [r["id"] for r in tables[v] if by_id.get(r["id"]) != r] == [5]


def test_timestamps_follow_the_commit_timestamp_rule_and_files_are_counted(written) -> None:
    path, _tables, _cdf = written
    history = row_history(path, {"id": "3"})
    times = commit_times(str(path))
    for e in history.events:
        assert e.timestamp == times.timestamp(e.version)[0]
        assert e.to_dict()["timestamp"] == format_ms(times.timestamp(e.version)[0])
        assert e.user is None  # delta-rs names no user
    assert history.files_read >= 1 and history.files_skipped >= 1


# --- key columns of other types, several key columns, refusals -------------------------------------


@pytest.fixture(scope="module")
def typed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("typed") / "t"
    write_deltalake(path, frame([record(i) for i in range(6)]), partition_by=["region"])
    DeltaTable(path).update(updates={"name": "'changed'"}, predicate="id = 2")
    return path


@pytest.mark.parametrize(
    "key",
    [
        {"amount": "2.25"},
        {"amount": "2.250"},
        {"day": "2024-01-03"},
        {"name": "n2"},
        {"region": "us", "id": "2"},
        {"flag": "false", "region": "us", "day": "2024-01-03"},
    ],
)
def test_keys_of_every_supported_type_are_cast_from_text(typed: Path, key: dict[str, str]) -> None:
    history = row_history(typed, key, 0, 1)
    if "name" in key:  # the key's own column changes: the row with name n2 is gone after
        assert [e.change for e in history.events] == ["insert", "delete"]
        return
    assert [(e.version, e.change, e.changed) for e in history.events] == [
        (0, "insert", list(SCHEMA.names)),
        (1, "update", ["name"]),
    ]
    assert history.events[1].after["name"] == "changed"


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ({"nope": "1"}, ("'nope'", "not a column", "id, name")),
        ({"id": "one"}, ("id='one'", "not a valid long")),
        ({"id": "1.5"}, ("not a valid long",)),
        ({"id": str(1 << 63)}, ("out of range",)),
        ({"amount": "2.255"}, ("more than 2 decimal places",)),
        ({"amount": "123456789.5"}, ("more than 10 digits",)),
        ({"day": "2024-13-01"}, ("not a valid date",)),
        ({"flag": "yes"}, ("not a valid boolean",)),
        ({"region": "us"}, ("not unique", "3 rows", "version 0")),
        ({}, ("needs a key",)),
    ],
)
def test_bad_keys_are_refused_clearly(typed: Path, key: dict[str, str], words: tuple[str, ...]) -> None:
    with pytest.raises(InvalidColumnsError) as info:
        row_history(typed, key)
    for w in words:
        assert w in str(info.value)


def test_a_key_made_not_unique_by_a_later_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(path, frame([record(1)]))
    write_deltalake(path, frame([record(1, name="again")]), mode="append")
    assert [e.change for e in row_history(path, {"id": "1"}, 0, 0).events] == ["insert"]
    with pytest.raises(InvalidColumnsError, match="not unique: 2 rows have it at version 1"):
        row_history(path, {"id": "1"})


# --- pruning ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cdf", [False, True], ids=["files", "cdf"])
def test_a_long_history_reads_only_the_files_that_could_hold_the_row(tmp_path: Path, cdf: bool) -> None:
    """100 appends of other keys (each its own file, its own id range), then the row changes."""
    path = tmp_path / "t"
    config = {"delta.enableChangeDataFeed": "true"} if cdf else None
    write_deltalake(path, frame([record(i) for i in range(10)]), configuration=config)
    for n in range(1, 101):
        write_deltalake(path, frame([record(1000 * n + i) for i in range(5)]), mode="append")
    DeltaTable(path).update(updates={"name": "'late'"}, predicate="id = 7")
    DeltaTable(path).delete("id = 1004")  # another key, in another file
    latest = DeltaTable(str(path)).version()
    history = row_history(path, {"id": "7"})
    assert [(e.version, e.change, e.changed) for e in history.events] == [
        (0, "insert", list(SCHEMA.names)),
        (latest - 1, "update", ["name"]),
    ]
    # the first file (at 0, removed again by the update), then the update's change data file
    # or the file it added
    assert history.files_read == 2
    assert history.files_skipped >= 100
    # a key no file can hold: nothing is read at all
    none = row_history(path, {"id": "500"})
    assert none.events == [] and none.files_read == 0 and none.files_skipped >= 101


# --- golden tables ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["basic-with-inserts-updates", "basic-with-inserts-merge"])
def test_golden_tables_agree_with_whole_versions_compared(name: str) -> None:
    path = golden_path(name)
    tables = versions_rows(path)
    ids = sorted({r["id"] for t in tables for r in t})
    for key in [*ids[::5], ids[-1], 10_000]:
        ours = row_history(path, {"id": str(key)})
        assert got(ours) == expected(tables, {"id": key}, 0, len(tables) - 1), key


def test_column_mapping_by_id_and_by_name_read_the_same_logical_rows() -> None:
    """Two golden tables with the same rows, one mapped by field id, one by physical name
    (their physical names differ): nested fields come back under their logical names."""
    by_id, by_name = golden_path("table-with-columnmapping-mode-id"), golden_path("table-with-columnmapping-mode-name")
    found = 0
    for i in range(-1, 8):
        a, b = row_history(by_id, {"ByteType": str(i)}), row_history(by_name, {"ByteType": str(i)})
        assert [(e.version, e.change, e.after) for e in a.events] == [(e.version, e.change, e.after) for e in b.events]
        assert (a.files_read, a.files_skipped) == (b.files_read, b.files_skipped)
        if a.events:
            found += 1
            row = a.events[0].after
            assert (row["ByteType"], row["LongType"], row["StringType"]) == (i, i, str(i))
            assert row["nested_struct"] == {"aa": str(i), "ac": {"aca": i}}
    assert found >= 4


# --- deletion vectors ----------------------------------------------------------------------------------


def _golden_rows(path: Path) -> list[dict[str, Any]]:
    """Version 0's rows read straight from its Parquet files, physical names made logical."""
    lines = [json.loads(line) for line in (path / LOG / f"{0:020d}.json").read_text().splitlines() if line]
    meta = next(a["metaData"] for a in lines if "metaData" in a)
    fields = json.loads(meta["schemaString"])["fields"]
    logical = {(f["metadata"].get("delta.columnMapping.physicalName") or f["name"]): f["name"] for f in fields}
    types = {f["name"]: f["type"] for f in fields}
    rows = []
    for a in (a["add"] for a in lines if "add" in a):
        assert "deletionVector" not in a
        for r in pq.ParquetFile(path / a["path"]).read().to_pylist():
            row = {logical[k]: v for k, v in r.items()}
            for k, v in a["partitionValues"].items():
                name = logical[k]
                row[name] = int(v) if types[name] in ("integer", "long") else v
            rows.append(row)
    return rows


def _deleted_by(path: Path, column: str) -> dict[int, int]:
    """value -> the version whose DELETE predicate names it ("(col1#463 = 0)")."""
    out = {}
    for f in sorted((path / LOG).glob("*.json")):
        info = json.loads(f.read_text().splitlines()[0])["commitInfo"]
        if info["operation"] == "DELETE":
            m = re.search(rf"{column}#\d+L? = (\d+)", info["operationParameters"]["predicate"])
            out[int(m[1])] = int(f.name[:20])
    return out


@pytest.mark.parametrize(
    ("name", "column"),
    [("dv-partitioned-with-checkpoint", "col1"), ("dv-with-columnmapping", "col1"), ("log-replay-dv-key-cases", "id")],
)
def test_deletion_vectors_on_golden_tables(name: str, column: str) -> None:
    path = golden_path(name)
    rows, deleted = _golden_rows(path), _deleted_by(path, column)
    latest = max(int(f.name[:20]) for f in (path / LOG).glob("*.json"))
    for start in sorted({0, 1, max(0, latest - 3)}):  # past a checkpoint where the table has one
        for row in rows:
            at = deleted.get(row[column])
            want = []
            if at is None or at > start:
                want.append((start, "insert", None, row))
            if at is not None and start < at <= latest:
                want.append((at, "delete", row, None))
            history = row_history(path, {column: str(row[column])}, start, latest)
            assert [(e.version, e.change, e.before, e.after) for e in history.events] == want, (row, start)


def _write_parquet(path: Path, ids: list[int], names: list[str]) -> dict[str, Any]:
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array(names)}), path)
    stats = {
        "numRecords": len(ids),
        "minValues": {"id": min(ids), "v": min(names)},
        "maxValues": {"id": max(ids), "v": max(names)},
        "nullCount": {"id": 0, "v": 0},
    }
    return {
        "path": path.name,
        "partitionValues": {},
        "size": path.stat().st_size,
        "modificationTime": 0,
        "dataChange": True,
        "stats": json.dumps(stats),
    }


ICT0 = 1_600_000_000_000  # far from the commit files' times


def _commit(root: Path, version: int, user: str, actions: list[dict[str, Any]]) -> None:
    info = {"inCommitTimestamp": ICT0 + version * 60_000, "timestamp": 1, "operation": "X", "userName": user}
    lines = [{"commitInfo": info}, *actions]
    (root / LOG / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in lines))


def _with_dv(add: dict[str, Any], rows: list[int], data_change: bool = True) -> dict[str, Any]:
    return {**add, "dataChange": data_change, **({"deletionVector": inline_descriptor(rows)} if rows else {})}


def _removed(add: dict[str, Any], data_change: bool = True) -> dict[str, Any]:
    keep = ("path", "partitionValues", "size", "deletionVector")
    return {"remove": {**{k: add[k] for k in keep if k in add}, "deletionTimestamp": 0, "dataChange": data_change}}


@pytest.fixture
def dv_table(tmp_path: Path) -> Path:
    """Deletion vectors grown, shrunk (a row back), an update through one, compaction, ICT on."""
    root = tmp_path / "dv"
    (root / LOG).mkdir(parents=True)
    f1 = _write_parquet(root / "f1.parquet", list(range(10)), ["a"] * 10)
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": ["deletionVectors", "inCommitTimestamp"],
    }
    schema = {
        "type": "struct",
        "fields": [
            {"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in [("id", "long"), ("v", "string")]
        ],
    }
    config = {"delta.enableDeletionVectors": "true", "delta.enableInCommitTimestamps": "true"}
    meta = {
        "id": "dv",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(schema),
        "partitionColumns": [],
        "configuration": config,
    }
    _commit(root, 0, "ann", [{"protocol": protocol}, {"metaData": meta}, {"add": f1}])
    a1 = _with_dv(f1, [3])
    _commit(root, 1, "bob", [_removed(f1), {"add": a1}])  # id 3 deleted
    a2 = _with_dv(f1, [3, 5])
    _commit(root, 2, "bob", [_removed(a1), {"add": a2}])  # id 5 deleted
    a3 = _with_dv(f1, [5])
    _commit(root, 3, "cy", [_removed(a2), {"add": a3}])  # id 3 back (a restore)
    a4 = _with_dv(f1, [5, 7])
    f2 = _write_parquet(root / "f2.parquet", [7], ["b"])
    _commit(root, 4, "dee", [_removed(a3), {"add": a4}, {"add": f2}])  # id 7 updated
    f3 = _write_parquet(root / "f3.parquet", [0, 1, 2, 3, 4, 6, 8, 9, 7], ["a"] * 8 + ["b"])
    _commit(root, 5, "eve", [_removed(a4, False), _removed(f2, False), {"add": {**f3, "dataChange": False}}])
    a6 = _with_dv(f3, [3])
    _commit(root, 6, "fay", [_removed(f3), {"add": a6}])  # id 3 deleted again
    for f in (root / LOG).iterdir():
        os.utime(f, ns=(10**18, 10**18))
    return root


def test_deletion_vectors_across_versions(dv_table: Path) -> None:
    def events(key: int, start: int = 0) -> list[tuple]:
        h = row_history(dv_table, {"id": str(key)}, start, 6)
        return [(e.version, e.change, e.before and e.before["v"], e.after and e.after["v"], e.user) for e in h.events]

    assert events(3) == [
        (0, "insert", None, "a", "ann"),
        (1, "delete", "a", None, "bob"),
        (3, "insert", None, "a", "cy"),
        (6, "delete", "a", None, "fay"),
    ]
    assert events(5) == [(0, "insert", None, "a", "ann"), (2, "delete", "a", None, "bob")]
    assert events(7) == [(0, "insert", None, "a", "ann"), (4, "update", "a", "b", "dee")]
    assert events(0) == [(0, "insert", None, "a", "ann")]
    assert events(3, start=2) == [(3, "insert", None, "a", "cy"), (6, "delete", "a", None, "fay")]
    assert events(5, start=2) == []
    assert events(7, start=5) == [(5, "insert", None, "b", "eve")]
    history = row_history(dv_table, {"id": "3"})
    assert [e.to_dict()["timestamp"] for e in history.events] == [format_ms(ICT0 + v * 60_000) for v in (0, 1, 3, 6)]


def test_nested_strings_and_nan_inside_structures(tmp_path: Path) -> None:
    """delta-rs writes nested strings as string views (Arrow's take has no kernel for them),
    and a NaN inside a map is the same value after a rewrite of its file: no event."""
    schema = pa.schema(
        [("id", pa.int64()), ("s", pa.struct([("a", pa.string())])), ("m", pa.map_(pa.string(), pa.float64()))]
    )
    rows = [{"id": i, "s": {"a": f"x{i}"}, "m": [("k", float("nan"))]} for i in range(3)]
    path = tmp_path / "t"
    write_deltalake(path, pa.Table.from_pylist(rows, schema=schema))
    DeltaTable(path).delete("id = 2")  # rewrites the file that holds id 1
    DeltaTable(path).update(updates={"s": "named_struct('a', 'y')"}, predicate="id = 1")
    history = row_history(path, {"id": "1"})
    assert [(e.version, e.change, e.changed) for e in history.events] == [
        (0, "insert", ["id", "s", "m"]),
        (2, "update", ["s"]),
    ]
    assert history.events[1].after["s"] == {"a": "y"} and history.to_dict()["events"][1]["after"]["m"] == {"k": "NaN"}


# --- JSON values -------------------------------------------------------------------------------------


def test_json_values_are_json_safe() -> None:
    from datetime import UTC, datetime

    value = {
        "d": date(2024, 2, 29),
        "t": datetime(2024, 1, 2, 3, 4, 5, 600000, tzinfo=UTC),
        "ntz": datetime(2024, 1, 2, 3, 4, 5),
        "dec": Decimal("1E+2"),
        "b": b"\x00\xff",
        "f": [float("nan"), float("inf"), -float("inf"), 1.5],
        "nested": {"k": [Decimal("0.10")]},
    }
    assert json_value(value) == {
        "d": "2024-02-29",
        "t": "2024-01-02T03:04:05.600000Z",
        "ntz": "2024-01-02T03:04:05",
        "dec": "100",
        "b": "AP8=",
        "f": ["NaN", "Infinity", "-Infinity", 1.5],
        "nested": {"k": ["0.10"]},
    }
    json.dumps(json_value(value), allow_nan=False)


# --- the command line -----------------------------------------------------------------------------


@pytest.fixture(scope="module", params=list(COMMANDS))
def command(request: pytest.FixtureRequest) -> list[str]:
    if request.param == "delta":
        assert DELTA_SCRIPT.is_file(), f"{DELTA_SCRIPT} is missing: `pip install -e .` installs it"
    return COMMANDS[request.param]


@pytest.fixture(scope="module")
def cli_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "t"
    schema = pa.schema([*SCHEMA, ("raw", pa.binary()), ("score", pa.float64())])
    rows = [{**record(i), "raw": bytes([i, 255]), "score": 0.5 * i} for i in range(4)]
    write_deltalake(
        path, pa.Table.from_pylist(rows, schema=schema), configuration={"delta.enableChangeDataFeed": "true"}
    )
    DeltaTable(path).update(updates={"amount": "amount + 1", "name": "'upd'"}, predicate="id = 1")
    DeltaTable(path).delete("id = 1")
    return path


def test_cli_json_contract(command: list[str], cli_table: Path) -> None:
    out = parsed(delta(command, "row-history", cli_table, "--key", "id=1", "--from", 0, "--to", 2, "--json"))
    assert set(out) == {"key", "events", "files"}
    assert out["key"] == {"id": 1}
    assert set(out["files"]) == {"read", "skipped"} and out["files"]["read"] >= 1
    assert [set(e) for e in out["events"]] == [
        {"version", "change", "before", "after", "changed", "timestamp", "user"}
    ] * 3
    insert, update, delete = out["events"]
    assert (insert["version"], insert["change"], insert["before"]) == (0, "insert", None)
    assert insert["after"] == {
        "id": 1,
        "name": "n1",
        "amount": "1.25",  # decimals as strings
        "day": "2024-01-02",  # dates ISO
        "flag": False,
        "region": "eu",
        "raw": "Af8=",  # bytes base64
        "score": 0.5,
    }
    assert (update["version"], update["change"], update["changed"]) == (1, "update", ["name", "amount"])
    assert (update["after"]["name"], update["after"]["amount"]) == ("upd", "2.25")
    assert (delete["version"], delete["change"], delete["after"]) == (2, "delete", None)
    assert delete["before"] == update["after"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", update["timestamp"])
    assert out == row_history(cli_table, {"id": "1"}, 0, 2).to_dict()


def test_cli_text_and_keys_of_several_columns(command: list[str], cli_table: Path) -> None:
    proc = delta(command, "row-history", cli_table, "--key", "region=eu", "--key", "day=2024-01-02")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("key region=eu, day=2024-01-02: 3 events")
    assert re.search(r"^1\s+update\s+\S+\s+name: n1 -> upd; amount: 1.25 -> 2.25$", proc.stdout, re.M)
    assert "files: " in proc.stdout and " read, " in proc.stdout
    quiet = delta(command, "row-history", cli_table, "--key", "id=42")
    assert quiet.returncode == 0 and "(no events)" in quiet.stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--key", "nope=1"), ("'nope'", "not a column")),
        (("--key", "id=x"), ("id='x'", "not a valid long")),
        (("--key", "amount=1.234"), ("more than 2 decimal places",)),
        (("--key", "region=eu"), ("not unique",)),
        (("--key", "id"), ("not COLUMN=VALUE",)),
        (("--key", "id=1", "--from", 9), ("latest version",)),
    ],
)
def test_cli_errors(command: list[str], cli_table: Path, args: tuple, words: tuple[str, ...]) -> None:
    assert_fails(command, cli_table, "row-history", cli_table, *args, words=words)
