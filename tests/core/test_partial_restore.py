"""Partial RESTORE by partition predicate: the parser, the plan, the commit, the CLI, row impact.

The oracle of every partial restore is computed here independently of the core: delta-rs (or
the plain JSON replay model of tests/core/reference.py for deletion-vector tables, which
delta-rs cannot read) gives each version's files with their partition values, a Python lambda
selects the partitions, and the expected state is the target's files inside them plus the
latest's files outside them. After committing, delta-rs reads the table back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tables.delta.errors import CommitConflictError, RestoreError
from tables.delta.predicates import And, Compare, Not, Or
from tables.delta.restore.commit import commit_restore
from tables.delta.restore.plan import RestorePlan, plan_restore
from tables.delta.restore.predicate import InvalidPredicateError, parse_predicate, tokenize
from tables.delta.snapshot.partitions import PartitionColumn
from tables.delta.snapshot.replay import identity_keys
from tables.delta.snapshot.state import load_snapshot
from tests.core import reference
from tests.core.builders import writable

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LOG = "_delta_log"

COLS = [
    PartitionColumn("region", "region", "string"),
    PartitionColumn("date", "date", "date"),
    PartitionColumn("n", "n", "integer"),
    PartitionColumn("ts", "ts", "timestamp"),
    PartitionColumn("flag", "flag", "boolean"),
    PartitionColumn("my col", "my col", "string"),
    PartitionColumn("price", "price", "decimal(5,2)"),
    PartitionColumn("x", "x", "double"),
]


def sel(text: str, **values: str | None) -> bool:
    """Whether the partition with these raw (log string) values is selected by `text`."""
    return parse_predicate(text, COLS).matches(values)


# --- the parser ------------------------------------------------------------------------------------


def test_tokens() -> None:
    toks = tokenize("`my col` <> 'it''s' AND n>=-1.5e2")
    assert [(t.kind, t.text) for t in toks] == [
        ("qident", "my col"),
        ("op", "<>"),
        ("string", "it's"),
        ("ident", "AND"),
        ("ident", "n"),
        ("op", ">="),
        ("op", "-"),
        ("number", "1.5e2"),
        ("end", ""),
    ]
    assert tokenize("a = 1")[2].pos == 4


@pytest.mark.parametrize(
    ("text", "values", "expected"),
    [
        ("region = 'eu'", {"region": "eu"}, True),
        ("region == 'eu'", {"region": "us"}, False),
        ("region != 'eu'", {"region": "us"}, True),
        ("region <> 'eu'", {"region": "eu"}, False),
        ("n < 10", {"n": "9"}, True),
        ("n < 10", {"n": "10"}, False),
        ("n <= 10", {"n": "10"}, True),
        ("n > 10", {"n": "11"}, True),
        ("n >= 10", {"n": "9"}, False),
        ("10 > n", {"n": "9"}, True),  # literal on the left: the comparison is flipped
        ("n IN (1, 2, 3)", {"n": "2"}, True),
        ("n in (1, 2, 3)", {"n": "4"}, False),
        ("n NOT IN (1, 2)", {"n": "4"}, True),
        ("n NOT IN (1, 2)", {"n": "1"}, False),
        ("n IS NULL", {"n": None}, True),
        ("n IS NULL", {"n": "1"}, False),
        ("n IS NOT NULL", {"n": "1"}, True),
        ("NOT n = 1", {"n": "2"}, True),
        ("region = 'eu' AND n = 1", {"region": "eu", "n": "1"}, True),
        ("region = 'eu' AND n = 1", {"region": "eu", "n": "2"}, False),
        ("region = 'eu' OR n = 1", {"region": "us", "n": "1"}, True),
        ("(region = 'eu')", {"region": "eu"}, True),
        ("flag", {"flag": "true"}, True),  # a boolean column alone
        ("flag = FALSE", {"flag": "false"}, True),
        ("NOT flag", {"flag": "false"}, True),
        ("`my col` = 'a b'", {"my col": "a b"}, True),
        ("region = 'it''s'", {"region": "it's"}, True),
        ("price = 1.5", {"price": "1.50"}, True),
        ("x > -0.5", {"x": "0.25"}, True),
    ],
)
def test_each_operator(text: str, values: dict[str, str | None], expected: bool) -> None:
    assert sel(text, **values) is expected


def test_precedence_not_and_or() -> None:
    p = parse_predicate("NOT region = 'a' AND n = 1 OR n = 2", COLS)
    assert isinstance(p.node, Or) and isinstance(p.node.left, And) and isinstance(p.node.left.left, Not)
    assert isinstance(p.node.right, Compare) and p.node.right.value == 2
    # OR binds loosest: n = 2 selects whatever the region
    assert sel("NOT region = 'a' AND n = 1 OR n = 2", region="a", n="2")
    assert not sel("NOT region = 'a' AND n = 1 OR n = 2", region="a", n="1")
    assert not sel("NOT region = 'a' AND (n = 1 OR n = 2)", region="a", n="2")
    assert sel("NOT (region = 'a' AND n = 1)", region="a", n="2")
    # keywords in any case
    assert sel("region = 'b' and not n is null or FALSE = flag", region="b", n="3")


def test_comparisons_are_typed_by_the_column() -> None:
    # strings compare as strings, integers as integers
    assert sel("region < '9'", region="10")
    assert not sel("n < 9", n="10")
    assert sel("n < 10", n="9")
    # dates: a plain string or a DATE literal, compared as dates; a column named `date` unquoted
    assert sel("date = '2024-01-01'", date="2024-01-01")
    assert sel("date >= DATE '2024-01-02' AND date < '2024-02-01'", date="2024-01-15")
    assert not sel("date > DATE '2024-01-02'", date="2024-01-02")
    # timestamps: UTC without a zone, as the log's values
    assert sel("ts = TIMESTAMP '2021-09-08 11:11:11'", ts="2021-09-08 11:11:11")
    assert sel("ts = '2021-09-08T13:11:11+02:00'", ts="2021-09-08 11:11:11")
    assert sel("ts >= DATE '2021-09-08'", ts="2021-09-08 00:00:00")
    assert sel("ts < TIMESTAMP '2021-09-08 11:11:11.000001'", ts="2021-09-08 11:11:11")
    p = parse_predicate("ts = TIMESTAMP '2021-09-08 11:11:11'", COLS)
    assert p.node.value == datetime(2021, 9, 8, 11, 11, 11, tzinfo=UTC)
    assert parse_predicate("date = '2024-01-01'", COLS).node.value == date(2024, 1, 1)
    assert parse_predicate("price < 10", COLS).node.value == Decimal(10)


def test_null_partition_values_follow_sql_three_valued_logic() -> None:
    for text in ("n = 1", "n != 1", "n < 1", "NOT n = 1", "n IN (1, 2)", "n NOT IN (1, 2)", "n = NULL"):
        assert not sel(text, n=None), text
    assert sel("n IS NULL", n=None) and sel("n IS NULL", n="")  # "" is null in the log too
    assert sel("n IS NULL OR n = 1", n=None)
    assert not sel("n = 1 AND n IS NULL", n=None)
    assert sel("n IN (1, NULL)", n="1")
    assert not sel("n IN (1, NULL)", n="2")  # unknown
    assert not sel("n NOT IN (2, NULL)", n="1")  # never true with a NULL in the list
    assert sel("NOT (n = 1 AND n IS NOT NULL)", n="2")


@pytest.mark.parametrize(
    ("text", "position", "words"),
    [
        ("", 1, "empty"),
        ("region = 'eu", 10, "unterminated string"),
        ("region = 'eu' AND", 18, "ends here"),
        ("(region = 'eu'", 15, "expected ')'"),
        ("region = 'eu' n = 1", 15, "expected AND, OR"),
        ("region 'eu'", 8, "expected a comparison"),
        ("n = 'abc'", 5, "not a valid integer"),
        ("date = '2024-13-01'", 8, "not a valid date"),
        ("region = 5", 10, "compare it with a quoted string"),
        ("n = TRUE", 5, "boolean"),
        ("region = n", 10, "not with another column"),
        ("1 = 1", 1, "partition column on one side"),
        ("n IN (1, n)", 10, "IN lists values"),
        ("n IS 1", 6, "NULL or NOT NULL"),
        ("n = 1 # 2", 7, "unexpected character"),
        ("AND = 1", 1, "not AND"),
        ("``", 1, "empty quoted identifier"),
    ],
)
def test_errors_name_the_position(text: str, position: int, words: str) -> None:
    with pytest.raises(InvalidPredicateError) as exc:
        parse_predicate(text, COLS)
    assert exc.value.code == "invalid_predicate"
    assert exc.value.details["position"] == position, str(exc.value)
    assert f"at position {position}" in str(exc.value) and words in str(exc.value)


def test_a_column_that_is_not_a_partition_column_is_refused_by_name() -> None:
    cols = [PartitionColumn("date", "date", "date"), PartitionColumn("region", "region", "string")]
    with pytest.raises(InvalidPredicateError) as exc:
        parse_predicate("region = 'eu' AND amount > 10", cols)
    assert "column 'amount' is not a partition column; partition columns: date, region" in str(exc.value)
    assert exc.value.details["position"] == 19


def test_mask_is_evaluated_per_distinct_partition() -> None:
    files = pa.table(
        {
            "partitionValues": pa.array(
                [{"region": "eu", "n": "1"}, {"region": "us", "n": None}, {"region": "eu", "n": "1"}, None],
                pa.struct([("region", pa.string()), ("n", pa.string())]),
            )
        }
    )
    p = parse_predicate("region = 'eu' OR n IS NULL", COLS)
    assert p.mask(files).to_pylist() == [True, True, True, True]
    assert parse_predicate("region = 'eu'", COLS).mask(files).to_pylist() == [True, False, True, False]


# --- tables and the oracle ------------------------------------------------------------------------


def rows(ids: list[int], region: str | None, day: date) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "region": pa.array([region] * len(ids), pa.string()),
            "day": pa.array([day] * len(ids), pa.date32()),
        }
    )


D1, D2, D3 = date(2024, 1, 1), date(2024, 1, 2), date(2024, 1, 3)


def rs_partitioned(tmp_path: Path) -> Path:
    """delta-rs history partitioned by (region, day):
    0 create eu/D1 eu/D2 us/D1; 1 append us/D2 and a null region; 2 overwrite region = 'eu'
    (replaceWhere) with other rows; 3 delete in us/D1; 4 append apac/D3."""
    t = tmp_path / "rs-part"
    by = ["region", "day"]
    write_deltalake(str(t), pa.concat_tables([rows([1, 2], "eu", D1), rows([3], "eu", D2), rows([4, 5], "us", D1)]),
                    partition_by=by)  # fmt: skip
    write_deltalake(
        str(t), pa.concat_tables([rows([6], "us", D2), rows([7], None, D1)]), mode="append", partition_by=by
    )
    write_deltalake(str(t), rows([10, 11, 12], "eu", D3), mode="overwrite", predicate="region = 'eu'", partition_by=by)
    DeltaTable(str(t)).delete("id = 4")
    write_deltalake(str(t), rows([20], "apac", D3), mode="append", partition_by=by)
    assert DeltaTable(str(t)).version() == 4
    return t


def rs_files(table: Path, version: int | None = None) -> dict[str, dict[str, Any]]:
    """delta-rs's files of a version: path -> {partition column: value, numRecords}."""
    dt = DeltaTable(str(table)) if version is None else DeltaTable(str(table), version=version)
    t = pa.table(dt.get_add_actions(flatten=True))
    parts = [c for c in t.column_names if c.startswith("partition.")]
    out = {}
    for r in t.to_pylist():
        out[r["path"]] = {c.removeprefix("partition."): r[c] for c in parts} | {"numRecords": r["num_records"]}
    return out


def rs_data(table: Path, version: int | None = None) -> list[dict[str, Any]]:
    dt = DeltaTable(str(table)) if version is None else DeltaTable(str(table), version=version)
    return sorted(dt.to_pyarrow_table().to_pylist(), key=lambda r: r["id"])


def oracle_files(table: Path, version: int, selected: Callable[[dict[str, Any]], bool]) -> set[str]:
    """The target's files inside the selected partitions, the latest's outside them."""
    inside = {p for p, f in rs_files(table, version).items() if selected(f)}
    outside = {p for p, f in rs_files(table).items() if not selected(f)}
    return inside | outside


def oracle_rows(table: Path, version: int, selected: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    rows_ = [r for r in rs_data(table, version) if selected(r)] + [r for r in rs_data(table) if not selected(r)]
    return sorted(rows_, key=lambda r: r["id"])


def commit_lines(table: Path, version: int) -> list[dict[str, Any]]:
    text = (table / LOG / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# --- partial restores on delta-rs tables ---------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "where", "selected"),
    [
        (1, "region = 'eu'", lambda f: f["region"] == "eu"),
        (0, "region = 'us' AND day <= '2024-01-01'", lambda f: f["region"] == "us" and f["day"] <= D1),
        (1, "region IN ('eu', 'us') AND NOT day = DATE '2024-01-02'",
         lambda f: f["region"] in ("eu", "us") and f["day"] != D2),
        (0, "region IS NULL OR region = 'apac'", lambda f: f["region"] in (None, "apac")),
        (2, "day > '2024-01-01'", lambda f: f["day"] > D1),
    ],
)  # fmt: skip
def test_partial_restore_matches_the_oracle(tmp_path: Path, version: int, where: str, selected) -> None:
    t = rs_partitioned(tmp_path)
    expected_files, expected_rows = oracle_files(t, version, selected), oracle_rows(t, version, selected)
    rows_now = len(rs_data(t))
    plan = plan_restore(t, version=version, where=where)
    assert plan.predicate == where and plan.to_dict()["predicate"] == where
    assert plan.protocol_outcome == "unchanged" and plan.domains == []
    assert plan.metadata == load_snapshot(t).metadata.to_dict()
    # the plan touches only selected partitions
    keys = ("region", "day")
    for a in plan.adds + plan.removes:
        pv = a["partitionValues"]
        assert selected({"region": pv.get("region"), "day": date.fromisoformat(pv["day"])}), a["path"]
        assert set(pv) == set(keys)
    # the row impact agrees with delta-rs's row counts
    impact = plan.row_impact
    assert impact["rowsNow"] == rows_now and impact["rowsAfter"] == len(expected_rows)
    assert impact["rowsNow"] - impact["rowsRemoved"] + impact["rowsAdded"] == impact["rowsAfter"]
    assert not impact["estimate"]
    expected_by_part = Counter((r["region"], r["day"].isoformat()) for r in expected_rows)
    now_by_part = Counter((r["region"], r["day"].isoformat()) for r in rs_data(t))
    assert impact["partitions"], "a partial restore that changes something lists its partitions"
    for part in impact["partitions"]:
        key = (part["partition"]["region"], part["partition"]["day"])
        assert part["rowsAfter"] == expected_by_part[key], key
        assert part["rowsNow"] == now_by_part[key], key

    result = commit_restore(t, plan)
    assert result["verified"] and result["version"] == 5
    assert set(rs_files(t)) == expected_files
    assert rs_data(t) == expected_rows
    lines = commit_lines(t, 5)
    info = lines[0]["commitInfo"]
    assert info["operation"] == "RESTORE"
    assert info["operationParameters"] == {"version": version, "timestamp": None, "predicate": where}
    assert not any("metaData" in a or "protocol" in a for a in lines), "a partial restore keeps the metadata"
    assert int(info["operationMetrics"]["numOfFilesAfterRestore"]) == len(expected_files)
    assert int(info["operationMetrics"]["numRestoredFiles"]) == len(plan.adds)
    assert DeltaTable(str(t)).version() == 5


def test_the_latest_files_outside_the_partitions_are_untouched(tmp_path: Path) -> None:
    t = rs_partitioned(tmp_path)
    before = rs_files(t)
    plan = plan_restore(t, version=0, where="region = 'eu'")
    commit_restore(t, plan)
    after = rs_files(t)
    assert {p for p, f in before.items() if f["region"] != "eu"} == {p for p, f in after.items() if f["region"] != "eu"}
    assert {p for p, f in after.items() if f["region"] == "eu"} == {
        p for p, f in rs_files(t, 0).items() if f["region"] == "eu"
    }


def test_a_predicate_selecting_nothing_is_refused(tmp_path: Path) -> None:
    t = rs_partitioned(tmp_path)
    for where in ("region = 'nowhere'", "day > '2030-01-01'", "region = NULL"):
        with pytest.raises(RestoreError, match="the predicate selects no partition"):
            plan_restore(t, version=1, where=where)


def test_invalid_predicates_and_tables_are_refused(tmp_path: Path) -> None:
    t = rs_partitioned(tmp_path)
    with pytest.raises(
        InvalidPredicateError, match="column 'id' is not a partition column; partition columns: region, day"
    ):
        plan_restore(t, version=1, where="id = 1")
    with pytest.raises(InvalidPredicateError, match="empty"):
        plan_restore(t, version=1, where="  ")
    flat = tmp_path / "flat"
    write_deltalake(str(flat), rows([1], "eu", D1))
    write_deltalake(str(flat), rows([2], "eu", D1), mode="append")
    with pytest.raises(RestoreError, match="not partitioned"):
        plan_restore(flat, version=0, where="region = 'eu'")


def test_partition_columns_must_be_the_same_in_both_versions(tmp_path: Path) -> None:
    t = tmp_path / "repart"
    write_deltalake(str(t), rows([1], "eu", D1), partition_by=["region"])
    write_deltalake(str(t), rows([2], "eu", D1), mode="overwrite", schema_mode="overwrite", partition_by=["day"])
    assert load_snapshot(t).metadata.partition_columns == ("day",)
    with pytest.raises(RestoreError, match="partitioned by region, the latest version by day"):
        plan_restore(t, version=0, where="day = '2024-01-01'")


def test_concurrent_append_to_another_partition_commits_cleanly(tmp_path: Path) -> None:
    t = rs_partitioned(tmp_path)
    plan = plan_restore(t, version=1, where="region = 'eu'")
    expected = oracle_rows(t, 1, lambda f: f["region"] == "eu")
    write_deltalake(str(t), rows([99], "us", D3), mode="append", partition_by=["region", "day"])  # version 5
    DeltaTable(str(t)).delete("id = 20")  # version 6: removes a file outside the partitions
    result = commit_restore(t, plan)
    assert result["version"] == 7 and result["rebasedOver"] == [5, 6] and result["verified"]
    expected = [r for r in expected if r["id"] != 20] + rows([99], "us", D3).to_pylist()
    assert rs_data(t) == sorted(expected, key=lambda r: r["id"])


def test_concurrent_change_inside_the_partitions_conflicts(tmp_path: Path) -> None:
    t = rs_partitioned(tmp_path)
    plan = plan_restore(t, version=1, where="region = 'eu'")
    DeltaTable(str(t)).delete("id = 10")  # removes an eu file the plan removes
    with pytest.raises(CommitConflictError, match="conflicts with version 5"):
        commit_restore(t, plan)


def test_plan_round_trip_and_fingerprint(tmp_path: Path) -> None:
    t = rs_partitioned(tmp_path)
    partial = plan_restore(t, version=1, where="region = 'eu'")
    again = RestorePlan.from_dict(json.loads(json.dumps(partial.to_dict(), default=str)))
    assert again.predicate == "region = 'eu'" and again.fingerprint == partial.fingerprint
    assert again.row_impact == partial.row_impact
    full = plan_restore(t, version=1)
    assert full.predicate is None and full.fingerprint != partial.fingerprint
    d = partial.to_dict()
    d["predicate"] = "region = 'us'"
    with pytest.raises(RestoreError, match="fingerprint"):
        RestorePlan.from_dict(d)


def test_row_impact_of_a_full_restore(tmp_path: Path) -> None:
    t = rs_partitioned(tmp_path)
    plan = plan_restore(t, version=0)
    impact = plan.to_dict()["rowImpact"]
    assert impact["rowsNow"] == len(rs_data(t)) and impact["rowsAfter"] == len(rs_data(t, 0))
    assert impact["rowsAdded"] == sum(f["numRecords"] for p, f in rs_files(t, 0).items() if p not in rs_files(t))
    assert impact["rowsRemoved"] == sum(f["numRecords"] for p, f in rs_files(t).items() if p not in rs_files(t, 0))
    assert impact["numPartitionsChanged"] == len(impact["partitions"]) and not impact["partitionsTruncated"]
    # an unpartitioned table has totals only
    flat = tmp_path / "flat"
    write_deltalake(str(flat), rows([1, 2], "eu", D1))
    write_deltalake(str(flat), rows([3], "eu", D1), mode="append")
    flat_impact = plan_restore(flat, version=0).row_impact
    assert flat_impact["rowsNow"] == 3 and flat_impact["rowsAfter"] == 2 and flat_impact["rowsRemoved"] == 1
    assert "partitions" not in flat_impact


# --- golden partitioned tables -----------------------------------------------------------------------


def test_golden_partition_values_of_every_type(golden_copy) -> None:
    """data-reader-partition-values: 12 partition columns of every type and a null partition;
    delta-rs deletes two partitions, and typed predicates bring them back."""
    t = writable(golden_copy("data-reader-partition-values"))
    DeltaTable(str(t)).delete("as_int = 1 OR as_int IS NULL")
    assert len(rs_data_by_value(t)) == 1
    for where in (
        "as_date = DATE '2021-09-08' AND as_timestamp = TIMESTAMP '2021-09-08 11:11:11' AND as_big_decimal = 1",
        "as_int IS NULL",
    ):
        plan = plan_restore(t, version=0, where=where)
        assert plan.adds and not plan.removes
    plan = plan_restore(t, version=0, where="as_long >= 1 AND as_boolean = FALSE AND as_string_lit_null = 'null'")
    assert [a["partitionValues"]["as_int"] for a in plan.adds] == ["1"]
    # the golden's adds carry no statistics: their rows come from the Parquet footers, exact
    impact = plan.row_impact
    assert not impact["estimate"] and impact["filesWithoutStats"] == 0
    assert [p["estimate"] for p in impact["partitions"]] == [False]
    rows_before = len(rs_data_by_value(t))
    result = commit_restore(t, plan)
    assert impact["rowsAfter"] == impact["rowsNow"] + impact["rowsAdded"] - impact["rowsRemoved"]
    assert impact["rowsNow"] == rows_before and impact["rowsAdded"] == 1
    assert result["verified"]
    assert sorted(rs_data_by_value(t)) == ["0", "1"]
    plan = plan_restore(t, version=0, where="as_int IS NULL AND as_date IS NULL AND as_float IS NULL")
    commit_restore(t, plan)
    assert sorted(rs_data_by_value(t)) == ["0", "1", "2"]
    assert rs_data_by_value(t) and DeltaTable(str(t)).version() == 3


def rs_data_by_value(table: Path) -> list[str]:
    return DeltaTable(str(table)).to_pyarrow_table().column("value").to_pylist()


def reference_files(root: Path, version: int) -> dict[str, dict[str, Any]]:
    """The plain JSON replay model's files (identity -> add) of a version."""
    return {
        (f"{k[0]}\x00{k[1]}" if k[1] else k[0]): body
        for k, body in reference.replay_json(root, version)["files"].items()
    }


def reference_rows(adds: list[dict[str, Any]]) -> int:
    return sum(
        json.loads(a["stats"])["numRecords"] - (a.get("deletionVector") or {}).get("cardinality", 0) for a in adds
    )


def test_golden_deletion_vectors_partitioned_with_checkpoint(golden_copy) -> None:
    """dv-partitioned-with-checkpoint (deletion vectors, a checkpoint at 10): restoring three
    partitions to version 3 brings back their files with the deletion vectors of then."""
    t = writable(golden_copy("dv-partitioned-with-checkpoint"))
    latest = load_snapshot(t).version
    if not reference.has_all_commits(t, latest):
        pytest.skip("the reference model needs every commit")
    inside = ("2", "6", "7")
    target, now = reference_files(t, 3), reference_files(t, latest)
    expected = {k for k, a in target.items() if a["partitionValues"]["part"] in inside}
    expected |= {k for k, a in now.items() if a["partitionValues"]["part"] not in inside}
    plan = plan_restore(t, version=3, where="part IN (2, 6) OR part = 7")
    assert plan.adds and plan.removes
    assert all(a["partitionValues"]["part"] in inside for a in plan.adds + plan.removes)
    impact = plan.row_impact
    assert impact["rowsNow"] == reference_rows(list(now.values()))
    assert impact["rowsAfter"] == reference_rows([a for k, a in {**target, **now}.items() if k in expected])
    assert {p["partition"]["part"] for p in impact["partitions"]} <= set(inside)
    result = commit_restore(t, plan)
    assert result["verified"]
    snap = load_snapshot(t)
    assert set(identity_keys(snap.files).to_pylist()) == expected
    assert set(reference_files(t, snap.version)) == expected


# --- the CLI ---------------------------------------------------------------------------------------


def delta_cli(*args: object) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DELTAWEB_ALLOWED_ROOTS"}
    return subprocess.run(
        [sys.executable, "-m", "tables.delta.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )


def test_cli_partial_restore(tmp_path: Path) -> None:
    t = rs_partitioned(tmp_path)
    where = "region = 'eu'"
    proc = delta_cli("restore", t, "--version", 1, "--where", where, "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert (
        plan["dryRun"]
        and plan["predicate"] == where
        and plan["rowImpact"]["rowsAfter"] == len(oracle_rows(t, 1, lambda f: f["region"] == "eu"))
    )
    assert DeltaTable(str(t)).version() == 4

    text = delta_cli("restore", t, "--version", 1, "--where", where, "--dry-run")
    assert text.returncode == 0, text.stderr
    assert f"where        {where}" in text.stdout and "rows         " in text.stdout
    assert "region=eu, day=2024-01-03" in text.stdout

    bad = delta_cli("restore", t, "--version", 1, "--where", "amount > 1", "--json")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.splitlines() == [
        "error: invalid predicate at position 1 (near 'amount > 1'): column 'amount' is not a partition "
        "column; partition columns: region, day"
    ]

    proc = delta_cli("restore", t, "--version", 1, "--where", where, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["version"] == 5 and out["verified"] and out["plan"]["predicate"] == where
    assert rs_data(t) == oracle_rows(t, 1, lambda f: f["region"] == "eu")


def test_a_huge_integer_literal_is_compared_without_being_expanded() -> None:
    # 1e600000 as a Python int takes seconds to build and holds the interpreter meanwhile;
    # past int64 the literal stays a Decimal and compares exactly with the partition's integers
    p = parse_predicate("n < 1e600000", COLS)
    assert isinstance(p.node.value, Decimal)
    assert sel("n < 1e600000", n="2147483647")
    assert not sel("n = 1e600000", n="5")
    assert sel("n > -1e999999999", n="-2147483648")
    assert parse_predicate("n = 9223372036854775807", COLS).node.value == 9223372036854775807
    assert isinstance(parse_predicate("n = 1.5e1", COLS).node.value, int)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("(" * 234 + "n = 1" + ")" * 234, "nested more than 32 levels"),
        ("NOT " * 1000 + "n = 1", "nested more than 32 levels"),
        (" AND ".join(["n = 1"] * 600), "more than 256 AND/OR terms"),
    ],
)
def test_deep_or_long_predicates_are_refused_by_name(text: str, words: str) -> None:
    with pytest.raises(InvalidPredicateError) as exc:
        parse_predicate(text, COLS)
    assert words in str(exc.value)


def test_nesting_within_the_limits_still_parses() -> None:
    assert sel("(" * 32 + "n = 1" + ")" * 32, n="1")
    assert sel("NOT " * 32 + "n = 1", n="1")
    assert sel(" OR ".join(f"n = {i}" for i in range(257)), n="256")


def test_row_impact_counts_files_without_statistics_from_their_footers(tmp_path: Path) -> None:
    """A log whose adds carry no stats (as some checkpoints and writers leave them): the rows
    come from the files' Parquet footers, exact, not 0 and not an estimate."""
    t = rs_partitioned(tmp_path)
    truth_now, truth_after = len(rs_data(t)), len(rs_data(t, 0))
    for f in sorted((t / "_delta_log").glob("*.json")):  # every add's stats taken out
        lines = []
        for line in f.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                action["add"].pop("stats", None)
            lines.append(json.dumps(action))
        f.write_text("\n".join(lines) + "\n")
    impact = plan_restore(t, version=0).row_impact
    assert impact["rowsNow"] == truth_now and impact["rowsAfter"] == truth_after
    assert impact["estimate"] is False
