"""Partial RESTORE on Spark: spark_plan_restore(where=...) gives the pure planner's plan (same
fingerprint, actions, metrics, row impact), and run_restore commits an approved partial plan
again with its predicate, also when another partition was appended to meanwhile.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pyarrow as pa
import pytest

from tables.delta.errors import RestoreError
from tables.delta.restore.plan import plan_restore
from tables.spark.jobs.restore import run_restore, spark_plan_restore
from tests.spark.test_restore_spark import ids, writable

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

NOW = 1_700_000_000_000
BY = ["region", "day"]
D1, D2 = date(2024, 1, 1), date(2024, 1, 2)


def clock() -> int:
    return NOW


def rows(ids_: list[int], region: str, day: date) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids_, pa.int64()),
            "region": pa.array([region] * len(ids_), pa.string()),
            "day": pa.array([day] * len(ids_), pa.date32()),
        }
    )


def rs_partitioned(tmp_path: Path) -> Path:
    """0 create eu/D1 us/D1; 1 append eu/D2 us/D2; 2 overwrite region = 'eu'; 3 delete in us."""
    t = tmp_path / "rs-part"
    write_deltalake(str(t), pa.concat_tables([rows([1, 2], "eu", D1), rows([3], "us", D1)]), partition_by=BY)
    write_deltalake(
        str(t), pa.concat_tables([rows([4], "eu", D2), rows([5], "us", D2)]), mode="append", partition_by=BY
    )
    write_deltalake(str(t), rows([10], "eu", D2), mode="overwrite", predicate="region = 'eu'", partition_by=BY)
    DeltaTable(str(t)).delete("id = 3")
    return t


def data(table: Path) -> list[dict]:
    return sorted(DeltaTable(str(table)).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])


def same_partial_plan(spark, table: Path, **kwargs):
    ours = spark_plan_restore(spark, table, clock=clock, **kwargs)
    pure = plan_restore(table, clock=clock, **kwargs)
    assert ours.fingerprint == pure.fingerprint
    assert ids(ours.adds) == ids(pure.adds) and ids(ours.removes) == ids(pure.removes)
    assert ours.metrics == pure.metrics and ours.row_impact == pure.row_impact
    assert ours.to_dict() == pure.to_dict()
    return ours


@pytest.mark.parametrize(
    ("version", "where"),
    [(1, "region = 'eu'"), (0, "region = 'us' OR day = '2024-01-01'"), (1, "day >= DATE '2024-01-02'")],
)
def test_spark_and_pure_partial_plans_are_the_same(spark, tmp_path: Path, version: int, where: str) -> None:
    t = rs_partitioned(tmp_path)
    plan = same_partial_plan(spark, t, version=version, where=where)
    assert plan.predicate == where and (plan.adds or plan.removes)


def test_golden_dv_table_same_partial_plan(spark, golden_copy) -> None:
    t = writable(golden_copy("dv-partitioned-with-checkpoint"))
    plan = same_partial_plan(spark, t, version=3, where="part IN (2, 6)")
    assert all(a["partitionValues"]["part"] in ("2", "6") for a in plan.adds + plan.removes)


def test_spark_refuses_a_predicate_selecting_nothing(spark, tmp_path: Path) -> None:
    t = rs_partitioned(tmp_path)
    with pytest.raises(RestoreError, match="the predicate selects no partition"):
        spark_plan_restore(spark, t, version=1, where="region = 'apac'")


def test_run_restore_commits_an_approved_partial_plan_over_an_append_elsewhere(spark, tmp_path: Path) -> None:
    t = rs_partitioned(tmp_path)
    approved = plan_restore(t, version=1, where="region = 'eu'")
    expected = [r for r in data(t) if r["region"] != "eu"]
    expected += [r for r in DeltaTable(str(t), version=1).to_pyarrow_table().to_pylist() if r["region"] == "eu"]
    write_deltalake(str(t), rows([99], "us", D2), mode="append", partition_by=BY)  # another partition
    result = run_restore(spark, t, approved.to_dict(), "partial-restore-1")
    assert not result["stale"] and result["verified"], result
    assert DeltaTable(str(t)).history(1)[0]["operationParameters"]["predicate"] == "region = 'eu'"
    expected += rows([99], "us", D2).to_pylist()
    assert data(t) == sorted(expected, key=lambda r: r["id"])
