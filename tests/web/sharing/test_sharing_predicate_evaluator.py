"""A Delta Sharing query's partition hints and a partial RESTORE's predicate are judged by the
core's one evaluator (tables/delta/predicates.py): the same partitions of a real table (the
golden `time-travel-partition-changes-b`, written by Spark) are selected by both."""

from __future__ import annotations

import orjson

from tables.delta import predicates
from tables.delta.restore.predicate import partition_predicate
from tables.delta.snapshot.state import load_snapshot
from tables.services.sharing.predicates import PartitionFilter
from tests.conftest import golden_path


def _eq(col: str, value: str) -> dict:
    return {"op": "equal", "children": [{"op": "column", "name": col}, {"op": "literal", "value": value}]}


def test_sharing_hints_and_restore_predicates_select_the_same_partitions(settings) -> None:
    path = golden_path("time-travel-partition-changes-b")
    settings.DELTAWEB_ALLOWED_ROOTS = [str(path.parent)]
    snap = load_snapshot(path)
    partitions = snap.files.column("partitionValues").to_pylist()
    column = snap.metadata.partition_columns[0]
    values = sorted({p[column] for p in partitions if p[column] is not None})
    assert len(values) >= 2
    pairs = [
        (f"{column} = '{values[0]}'", _eq(column, values[0])),
        (f"NOT ({column} = '{values[0]}')", {"op": "not", "children": [_eq(column, values[0])]}),
        (
            f"{column} = '{values[0]}' OR {column} = '{values[-1]}'",
            {"op": "or", "children": [_eq(column, values[0]), _eq(column, values[-1])]},
        ),
    ]
    for text, hint in pairs:
        restore = partition_predicate(text, snap.metadata, snap.protocol)
        sharing = PartitionFilter(snap.metadata, orjson.dumps(hint).decode())
        # the hint is the core's tree, judged by the core's evaluator
        assert all(isinstance(n, predicates.Node) for n in sharing.nodes)
        assert [restore.matches(p) for p in partitions] == [sharing.keeps(p) for p in partitions], text
        assert any(restore.matches(p) for p in partitions)
