"""Rules fired by real commits: golden tables' overwrite, DELETE and RESTORE, tables written
by delta-rs (DELETE without a predicate, a dropped column), and nothing for appends."""

from __future__ import annotations

import pyarrow as pa
import pytest

from alerts.detect import evaluate
from alerts.models import Alert, CustomRule, RuleSetting, Scan, ScanStatus
from tables.services.sync import store as sync
from tests.alerts.conftest import bring_back, hold_back, register_and_sync

deltalake = pytest.importorskip("deltalake")


def sync_and_scan(table) -> Scan:
    """The second sync: its hook leaves a Scan row (sent on commit, which the test transaction
    never reaches); the worker's function runs it here."""
    before = set(Scan.objects.values_list("pk", flat=True))
    sync.sync_table(table.pk)
    scan = Scan.objects.exclude(pk__in=before).get(table=table)
    evaluate.run_scan(scan.pk)
    scan.refresh_from_db()
    assert scan.status == ScanStatus.DONE, scan.error
    return scan


def fired(table) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for a in Alert.objects.filter(table=table):
        out.setdefault(a.version, set()).add(a.rule)
    return out


@pytest.mark.django_db
def test_golden_overwrite_and_restore_fire_appends_do_not(roots, golden_copy) -> None:
    path = golden_copy("basic-with-inserts-overwrite-restore")
    aside = hold_back(path, 1)
    table = register_and_sync("owr", path)
    assert not Scan.objects.filter(table=table).exists()  # the first sync stores the past: no news
    bring_back(path, aside)
    scan = sync_and_scan(table)
    assert (scan.first_version, scan.last_version) == (1, 3)
    # v1, an append, fires nothing; the RESTORE to v1 takes the table from 500 rows back to 200
    assert fired(table) == {2: {"overwrite"}, 3: {"restore", "large_removal"}}
    rows = {v: deltalake.DeltaTable(str(path), version=v).to_pyarrow_table().num_rows for v in (2, 3)}
    assert rows == {2: 500, 3: 200}
    removal = Alert.objects.get(table=table, version=3, rule="large_removal").explanation
    assert "60.0% of the table's rows (300 of 500 rows, from file statistics)" in removal
    overwrite = Alert.objects.get(table=table, version=2)
    assert overwrite.severity == "critical" and overwrite.operation == "WRITE"
    assert "Overwrite mode" in overwrite.explanation
    assert "RESTORE to 1" in Alert.objects.get(table=table, version=3, rule="restore").explanation
    # a scan run again (a redelivered message) adds nothing
    assert evaluate.evaluate(table, [1, 2, 3]) == []
    assert Alert.objects.filter(table=table).count() == 3


@pytest.mark.django_db
def test_golden_deletes_with_predicates_and_a_removal_threshold(roots, golden_copy) -> None:
    path = golden_copy("basic-with-inserts-deletes-checkpoint")
    aside = hold_back(path, 5)
    table = register_and_sync("dels", path)
    bring_back(path, aside)
    # what delta-rs reads at every version: rows and bytes
    rows, size = {}, {}
    for v in range(4, 14):
        dt = deltalake.DeltaTable(str(path), version=v)
        rows[v] = dt.to_pyarrow_table().num_rows
        size[v] = sum(dt.get_add_actions(flatten=True).column("size_bytes").to_pylist())
    threshold = 15.0
    expected = {
        v
        for v in range(5, 14)
        if max(100.0 * (rows[v - 1] - rows[v]) / rows[v - 1], 100.0 * (size[v - 1] - size[v]) / size[v - 1])
        >= threshold
    }
    assert expected and expected != set(range(5, 14))  # the threshold separates the DELETEs
    RuleSetting.objects.create(table=table, rule="large_removal", threshold=threshold)
    sync_and_scan(table)
    got = fired(table)
    # DELETEs with a predicate are not "every row"; the ones past the threshold are large
    assert got == {v: {"large_removal"} for v in expected}, got
    text = Alert.objects.get(table=table, version=13).explanation
    removed = rows[12] - rows[13]
    assert (
        f"{100.0 * removed / rows[12]:.1f}% of the table's rows ({removed} of {rows[12]} rows, from operationMetrics)"
        in text
    )
    lost = size[12] - size[13]
    assert (
        f"{100.0 * lost / size[12]:.1f}% of the table's bytes ({lost} of {size[12]} bytes, from file statistics)"
        in text
    )


@pytest.mark.django_db
def test_switched_off_rule_and_custom_rule(roots, golden_copy) -> None:
    path = golden_copy("basic-with-inserts-deletes-checkpoint")
    aside = hold_back(path, 5)
    table = register_and_sync("dels2", path)
    bring_back(path, aside)
    RuleSetting.objects.create(table=table, rule="large_removal", enabled=False, threshold=1.0)
    rule = CustomRule.objects.create(
        name="big deletes", table=table, operation="delete", metric="numDeletedRows", metric_op="ge", metric_value=10
    )
    CustomRule.objects.create(name="no conditions", table=None)  # never fires on everything
    sync_and_scan(table)
    assert fired(table) == {13: {f"custom:{rule.pk}"}}
    alert = Alert.objects.get(table=table)
    assert alert.explanation == "version 13: operation DELETE, numDeletedRows=14 >= 10"


@pytest.mark.django_db
def test_delta_rs_delete_without_predicate_and_dropped_column(roots) -> None:
    path = roots / "events"
    deltalake.write_deltalake(str(path), pa.table({"id": [1, 2, 3], "kind": ["a", "b", "c"]}))
    table = register_and_sync("events", path)
    deltalake.write_deltalake(str(path), pa.table({"id": [4], "kind": ["d"]}), mode="append")
    deltalake.DeltaTable(str(path)).delete()
    deltalake.write_deltalake(str(path), pa.table({"id": [5]}), mode="overwrite", schema_mode="overwrite")
    sync_and_scan(table)
    got = fired(table)
    assert 1 not in got  # the append
    assert {"overwrite", "large_removal"} <= got[2]
    assert {"overwrite", "schema_change"} <= got[3]
    assert "dropped kind" in Alert.objects.get(table=table, version=3, rule="schema_change").explanation
    assert "DELETE without a predicate" in Alert.objects.get(table=table, version=2, rule="overwrite").explanation


@pytest.mark.django_db
def test_vacuum_protocol_upgrade_and_a_new_writer(roots) -> None:
    from tables.delta.write.commit import enable_ict

    path = roots / "t"
    deltalake.write_deltalake(str(path), pa.table({"id": [1, 2, 3]}))
    deltalake.write_deltalake(str(path), pa.table({"id": [4]}), mode="append")
    table = register_and_sync("t", path)
    dt = deltalake.DeltaTable(str(path))
    dt.delete("id = 1")  # v2
    dt.vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False)  # v3 START, v4 END
    enable_ict(str(path))  # v5, by deltaweb's own writer: writer 7 with inCommitTimestamp
    sync_and_scan(table)
    got = fired(table)
    ops = dict(table.commits.values_list("version", "operation"))
    vacuum_end = next(v for v, op in ops.items() if op == "VACUUM END")
    assert "vacuum" in got[vacuum_end]
    assert not any("vacuum" in got.get(v, set()) for v in ops if v != vacuum_end)
    last = max(ops)
    assert {"protocol_upgrade", "unknown_writer"} <= got[last]
    text = Alert.objects.get(table=table, version=last, rule="protocol_upgrade").explanation
    assert "-> 1/7" in text or "-> 3/7" in text
    assert "inCommitTimestamp" in text
    assert (
        "never wrote to this table before"
        in Alert.objects.get(table=table, version=last, rule="unknown_writer").explanation
    )
    assert 2 not in got  # a DELETE with a predicate removing a quarter of the rows


def test_commit_rate_burst_and_silence() -> None:
    from alerts.detect.facts import CommitFacts
    from alerts.detect.rules import commit_rate
    from tables.models import Commit, Table

    t = Table(name="x", slug="x")
    hour = 3_600_000
    earlier = [Commit(table=t, version=v, timestamp=v * hour) for v in range(10, -1, -1)]  # hourly, newest first

    def facts(ts: int) -> CommitFacts:
        c = Commit(table=t, version=11, timestamp=ts)
        return CommitFacts(t, c, earlier[0], [], [], earlier, lambda: None)

    assert commit_rate(facts(11 * hour), None) is None  # on time
    assert "silence" in commit_rate(facts(10 * hour + 11 * hour), None)
    assert "burst" in commit_rate(facts(10 * hour + 60_000), None)  # a minute after the last
    assert commit_rate(facts(10 * hour + 60_000), 100.0) is None  # a looser factor


@pytest.mark.django_db
def test_ict_switched_off_and_a_user_never_seen(roots) -> None:
    from tables.delta.snapshot.state import load_snapshot
    from tables.delta.write.commit import commit, enable_ict

    path = roots / "clock"
    deltalake.write_deltalake(str(path), pa.table({"id": [1]}))
    enable_ict(str(path))  # v1
    commit(str(path), [], "WRITE", {"mode": "Append"}, user_name="ana")  # v2
    table = register_and_sync("clock", path)
    md = load_snapshot(str(path)).metadata.to_dict()
    md["configuration"] = {**md["configuration"], "delta.enableInCommitTimestamps": "false"}
    commit(str(path), [{"metaData": md}], "SET TBLPROPERTIES", user_name="mallory")  # v3
    sync_and_scan(table)
    got = fired(table)
    assert {"ict", "unknown_writer"} <= got[3]
    assert Alert.objects.get(table=table, rule="ict").explanation == "version 3: In-Commit Timestamps disabled"
    assert "user mallory never committed" in Alert.objects.get(table=table, rule="unknown_writer").explanation


@pytest.mark.django_db
def test_a_rule_on_a_spark_metric_fires_for_delta_rs_names(roots) -> None:
    """delta-rs writes num_deleted_rows where Spark writes numDeletedRows: one vocabulary."""
    path = roots / "rs"
    deltalake.write_deltalake(str(path), pa.table({"id": list(range(20))}))
    table = register_and_sync("rs", path)
    deltalake.DeltaTable(str(path)).delete("id < 12")
    written = deltalake.DeltaTable(str(path)).history(1)[0]["operationMetrics"]
    assert "num_deleted_rows" in written and "numDeletedRows" not in written  # the writer's own name
    rule = CustomRule.objects.create(
        name="big deletes", table=table, operation="delete", metric="numDeletedRows", metric_op="ge", metric_value=10
    )
    sync_and_scan(table)
    assert f"custom:{rule.pk}" in fired(table)[1]
    assert "numDeletedRows=12 >= 10" in Alert.objects.get(table=table, rule=f"custom:{rule.pk}").explanation


@pytest.mark.django_db
def test_deltawebs_own_restore_is_not_an_unknown_writer(roots) -> None:
    from tables.delta.restore.commit import commit_restore
    from tables.delta.restore.plan import plan_restore

    path = roots / "own"
    for i in range(3):
        deltalake.write_deltalake(str(path), pa.table({"id": [i]}), mode="append")
    table = register_and_sync("own", path)
    commit_restore(str(path), plan_restore(str(path), version=1))  # deltaweb's own writer
    assert deltalake.DeltaTable(str(path)).history(1)[0]["operation"] == "RESTORE"
    sync_and_scan(table)
    assert not any("unknown_writer" in rules for rules in fired(table).values())
