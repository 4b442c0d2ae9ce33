"""Keyed row diff: the first pass's fingerprints never hide a change, and the result equals a
diff computed independently from the versions delta-rs reads (rows compared in Python)."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

deltalake = pytest.importorskip("deltalake")
pytestmark = pytest.mark.usefixtures("diff_route")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

from tables.spark.jobs.rowdiff import keyed_diff  # noqa: E402

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("a", pa.int64()),
        ("b", pa.int64()),
        ("x", pa.float64()),
        ("items", pa.list_(pa.int32())),
        ("s", pa.struct([("p", pa.string()), ("q", pa.string())])),
    ]
)

BEFORE = [
    (1, None, 5, 1.0, [1, None], {"p": "u", "q": None}),
    (2, 7, None, 0.0, [None, 1], {"p": None, "q": "u"}),
    (3, 1, 2, math.nan, [], None),
    (4, 1, 2, 3.0, None, {"p": "z", "q": "z"}),
    (None, 9, 9, 9.0, [9], None),  # a null key is a key like any other
    (6, 6, 6, 6.0, [6], {"p": "6", "q": "6"}),
    (7, None, 5, 7.0, [7], None),
]
AFTER = [
    (1, 5, None, 1.0, [None, 1], {"p": None, "q": "u"}),  # nulls moved: a, b, items and s differ
    (2, 7, None, -0.0, [None, 1], {"p": None, "q": "u"}),  # -0.0 equals 0.0: no change
    (3, 1, 2, math.nan, [], None),  # NaN equals NaN: no change
    (4, 1, 2, 3.0, [], {"p": "z", "q": "z"}),  # null list -> empty list
    (None, 9, 9, 9.5, [9], None),
    (8, 8, 8, 8.0, [8], {"p": "8", "q": "8"}),  # 6 removed, 8 added
    (7, 5, None, 7.0, [7], None),  # only a null moved from one column to the other
]


def _table(items) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in items], schema=SCHEMA)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = tmp_path_factory.mktemp("fingerprint") / "t"
    write_deltalake(str(root), _table(BEFORE))
    write_deltalake(str(root), _table(AFTER), mode="overwrite")
    return root


def _same(u, v) -> bool:
    if isinstance(u, float) and isinstance(v, float):
        return (math.isnan(u) and math.isnan(v)) or u == v
    return u == v


def peer_diff(root, v_from: int, v_to: int) -> dict:
    """The keyed diff computed from delta-rs's reads of both versions, in plain Python."""
    a = {r["id"]: r for r in DeltaTable(str(root), version=v_from).to_pyarrow_table().to_pylist()}
    b = {r["id"]: r for r in DeltaTable(str(root), version=v_to).to_pyarrow_table().to_pylist()}
    out = {}
    for key in a.keys() | b.keys():
        if key not in b:
            out[key] = ("removed", [])
        elif key not in a:
            out[key] = ("added", [])
        else:
            changed = [c for c in SCHEMA.names[1:] if not _same(a[key][c], b[key][c])]
            if changed:
                out[key] = ("changed", changed)
    return out


def test_fingerprints_find_every_change_and_the_diff_equals_the_peer(spark, table, tmp_path) -> None:
    result = keyed_diff(spark, str(table), 0, 1, ["id"], tmp_path)
    got = pq.read_table(result["path"]).to_pylist()
    assert {r["id"]: (r["_diff"], r["_changed_columns"]) for r in got} == peer_diff(table, 0, 1)
    assert got[0]["id"] is None  # sorted by key, nulls first (Spark's order)
    assert {r["id"]: r["_changed_columns"] for r in got if r["_diff"] == "changed"} == {
        1: ["a", "b", "items", "s"],
        4: ["items"],
        7: ["a", "b"],
        None: ["x"],
    }
    assert result["counts"] == {"added": 1, "removed": 1, "changed": 4}


def test_repeated_null_keys_are_refused(spark, tmp_path) -> None:
    root = tmp_path / "t"
    write_deltalake(str(root), _table(BEFORE))
    write_deltalake(str(root), _table([*AFTER, (None, 1, 1, 1.0, None, None)]), mode="overwrite")
    with pytest.raises(Exception, match="not unique in version 1: 1 key value"):
        keyed_diff(spark, str(root), 0, 1, ["id"], tmp_path / "out")
    assert not (tmp_path / "out" / "rowdiff").exists()


REPEATS = {
    # a key of the later version only, twice: both rows are in the first pass's result
    "new key twice": (BEFORE, [*AFTER, (100, 1, 1, 1.0, None, None), (100, 2, 2, 2.0, None, None)], 1),
    # the same row twice in both versions: the join matches the pairs and sees no difference
    "same row twice on both sides": ([*BEFORE, BEFORE[2]], [*AFTER, AFTER[2]], 0),
    # a key of the earlier version only, twice
    "removed key twice": ([*BEFORE, BEFORE[5]], AFTER, 0),
}


@pytest.mark.parametrize("before,after,version", REPEATS.values(), ids=REPEATS.keys())
def test_every_kind_of_repeated_key_is_refused_naming_its_version(spark, tmp_path, before, after, version) -> None:
    root = tmp_path / "t"
    write_deltalake(str(root), _table(before))
    write_deltalake(str(root), _table(after), mode="overwrite")
    with pytest.raises(Exception, match=f"not unique in version {version}: 1 key value"):
        keyed_diff(spark, str(root), 0, 1, ["id"], tmp_path / "out")
    assert not (tmp_path / "out" / "rowdiff").exists()
