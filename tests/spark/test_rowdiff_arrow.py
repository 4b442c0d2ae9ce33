"""The keyed diff by pyarrow (tables.spark.jobs.rowdiff_arrow) writes what Spark's two passes
write: the same rows, values, types and order, the same refusals; and it equals a diff computed
from delta-rs's reads. Tables: one written by delta-rs with every flat type, and golden tables
written by Spark (INT96 and millisecond timestamps, partition values of every type, deletion
vectors, column mapping by name, timestamp_ntz, decimals)."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tables.delta.errors import DeltaError
from tests.conftest import golden_path

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

from tables.spark.jobs import rowdiff, rowdiff_arrow  # noqa: E402

UTC = dt.UTC
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("part", pa.string()),
        ("b", pa.int8()),
        ("s", pa.int16()),
        ("i", pa.int32()),
        ("ok", pa.bool_()),
        ("f", pa.float32()),
        ("x", pa.float64()),
        ("name", pa.string()),
        ("raw", pa.binary()),
        ("day", pa.date32()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("money", pa.decimal128(10, 2)),
    ]
)
T0 = dt.datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
BASE = (1, 2, 3, True, 1.5, 2.5, "é", b"\x00\x01", dt.date(2026, 1, 2), T0, Decimal("1.25"))
BEFORE = [
    (1, "p", *BASE),
    (2, "p", *BASE[:5], 0.0, *BASE[6:]),
    (3, "q", *BASE[:5], math.nan, *BASE[6:]),
    (4, "q", *BASE),
    (None, "q", *BASE),  # a null key is a key like any other
    (6, None, *(None,) * 11),
    (7, "p", *BASE),
    (10, "p", *BASE),
]
AFTER = [
    (1, "p", *BASE),  # same
    (2, "p", *BASE[:5], -0.0, *BASE[6:]),  # -0.0 equals 0.0
    (3, "q", *BASE[:5], math.nan, *BASE[6:]),  # NaN equals NaN
    (4, "r", 9, 3, 3, False, 1.5, 2.5, "e", b"\x00", dt.date(2026, 1, 3), T0.replace(microsecond=0), Decimal("1.26")),
    (None, "q", *BASE[:6], "É", *BASE[7:]),
    (6, None, *(None,) * 10, Decimal("0.00")),  # a null becomes a value
    (8, "p", *BASE),  # 7 removed, 8 added
    (-1, "p", *BASE),  # added, sorted first after the null key
    (10, "p", None, *BASE[1:]),  # a value becomes null
]


def _table(items) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in items], schema=SCHEMA)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = tmp_path_factory.mktemp("arrow") / "t"
    write_deltalake(str(root), _table(BEFORE), partition_by=["part"])
    write_deltalake(str(root), _table(AFTER), mode="overwrite")
    return root


def run(spark, monkeypatch, tmp_path, route: str, *args, **kwargs):
    """keyed_diff by one route (both take versions of any size: no driver's route): its result
    and written rows, or the refusal's class and message; and whether pyarrow made it."""
    taken = []
    real = rowdiff_arrow.arrow_diff

    def recorded(*a, **k):
        taken.append(True)
        return real(*a, **k)

    with monkeypatch.context() as m:
        m.setattr(rowdiff, "DRIVER_BYTES", -1)
        m.setattr(rowdiff_arrow, "arrow_diff", recorded)
        if route == "spark":
            m.setattr(rowdiff_arrow, "ARROW_BYTES", -1)
        out = tmp_path / route
        try:
            result = rowdiff.keyed_diff(spark, *args, out, **kwargs)
        except DeltaError as exc:
            return (type(exc).__name__, str(exc)), bool(taken)
    written = pq.read_table(result["path"])
    result.pop("path")
    return (result, written.schema, written.to_pylist()), bool(taken)


def both_routes(spark, monkeypatch, tmp_path, *args, **kwargs):
    """The pyarrow route's outcome, checked equal to the two passes' and to have been taken."""
    ours, taken = run(spark, monkeypatch, tmp_path, "arrow", *args, **kwargs)
    theirs, spark_taken = run(spark, monkeypatch, tmp_path, "spark", *args, **kwargs)
    assert taken and not spark_taken
    assert _comparable(ours) == _comparable(theirs)
    return ours, theirs


def _comparable(outcome):
    """NaN made equal to itself for the comparison of two outcomes, and the columns by name and
    type (Spark's plan marks `_before` or `_after` never null when the other side has no rows)."""

    def fix(v):
        if isinstance(v, float) and math.isnan(v):
            return "NaN"
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, list):
            return [fix(x) for x in v]
        return v

    if len(outcome) == 3:
        result, schema, rows = outcome
        return result, [(f.name, f.type) for f in schema], fix(rows)
    return outcome


def _same(u, v) -> bool:
    if isinstance(u, float) and isinstance(v, float):
        return (math.isnan(u) and math.isnan(v)) or u == v
    return u == v


def test_every_flat_type_as_the_two_passes_and_as_delta_rs(spark, monkeypatch, table, tmp_path) -> None:
    (result, schema, rows), theirs = both_routes(spark, monkeypatch, tmp_path, str(table), 0, 1, ["id"])
    assert schema == theirs[1]  # nullable where Spark's writes are
    assert result["counts"] == {"added": 2, "removed": 1, "changed": 4}
    assert [r["id"] for r in rows] == [None, -1, 4, 6, 7, 8, 10]  # Spark's order: nulls first
    a = {r["id"]: r for r in DeltaTable(str(table), version=0).to_pyarrow_table().to_pylist()}
    b = {r["id"]: r for r in DeltaTable(str(table), version=1).to_pyarrow_table().to_pylist()}
    peer = {}
    for key in a.keys() | b.keys():
        if key not in b:
            peer[key] = ("removed", [])
        elif key not in a:
            peer[key] = ("added", [])
        elif changed := [c for c in SCHEMA.names[1:] if not _same(a[key][c], b[key][c])]:
            peer[key] = ("changed", changed)
    assert {r["id"]: (r["_diff"], r["_changed_columns"]) for r in rows} == peer
    four = next(r for r in rows if r["id"] == 4)
    assert four["_before"]["at"] == T0 and four["_after"]["money"] == Decimal("1.26")


def test_compound_keys_and_repeated_keys_as_the_two_passes(spark, monkeypatch, table, tmp_path) -> None:
    (result, _schema, _rows), _ = both_routes(spark, monkeypatch, tmp_path / "two", str(table), 0, 1, ["part", "id"])
    assert result["counts"]["added"] >= 2
    refused, _ = both_routes(spark, monkeypatch, tmp_path / "dup", str(table), 0, 1, ["part"])
    assert refused[0] == "InvalidColumnsError" and "is not unique in version 0" in refused[1]
    assert not (tmp_path / "dup" / "arrow" / "rowdiff").exists()


GOLDEN = {
    "INT96 timestamps, timestamp partition": ("kernel-timestamp-INT96", "id", pa.int32()),
    "millisecond timestamps": ("kernel-timestamp-TIMESTAMP_MILLIS", "id", pa.int32()),
    "PST timestamps": ("kernel-timestamp-PST", "id", pa.int32()),
    "primitives": ("data-reader-primitives", "as_int", pa.int32()),
    "deletion vectors, column mapping by name": ("dv-with-columnmapping", "col1", pa.int32()),
    "deletion vectors, partitions, checkpoint": ("dv-partitioned-with-checkpoint", "col1", pa.int32()),
    "timestamp_ntz, column mapping by name": ("data-reader-timestamp_ntz-name-mode", "id", pa.int32()),
    "decimals": ("decimal-various-scale-precision", "decimal_4_0", pa.decimal128(4, 0)),
    "decimal partitions": ("basic-decimal-table", "col1", pa.decimal128(5, 2)),
    "dates and timestamps": ("data-reader-date-types-UTC", "date", pa.date32()),
}


@pytest.mark.parametrize("name,key,key_type", GOLDEN.values(), ids=GOLDEN.keys())
def test_a_golden_tables_rows_read_as_spark_reads_them(spark, monkeypatch, tmp_path, name, key, key_type) -> None:
    """Every row of the golden table's latest version removed (and added the other way) against
    a table of its key only without rows: each value as Spark reads it, in `_before`."""
    empty = tmp_path / "empty"
    write_deltalake(str(empty), pa.table({key: pa.array([], key_type)}))
    golden = str(golden_path(name))
    out, _ = both_routes(
        spark, monkeypatch, tmp_path / "a", golden, 0, 1, [key], sources=((golden, None), (str(empty), 0))
    )
    back, _ = both_routes(
        spark, monkeypatch, tmp_path / "b", golden, 1, 0, [key], sources=((str(empty), 0), (golden, None))
    )
    if len(out) == 3:
        assert out[0]["counts"]["removed"] == back[0]["counts"]["added"] > 0


def test_what_pyarrow_would_answer_otherwise_goes_to_spark(spark, monkeypatch, tmp_path) -> None:
    """Nested columns (compared by Spark), a floating-point key (Spark makes -0.0 and 0.0 one),
    a column whose type changed: the two passes make the diff."""
    root = tmp_path / "nested"
    write_deltalake(str(root), pa.table({"id": [1, 2], "l": [[1], [2]]}))
    write_deltalake(str(root), pa.table({"id": [1, 3], "l": [[1], [3]]}), mode="overwrite")
    floats = tmp_path / "floats"
    write_deltalake(str(floats), pa.table({"k": [0.0, 1.0], "v": [1, 2]}))
    write_deltalake(str(floats), pa.table({"k": [-0.0, 1.0], "v": [1, 3]}), mode="overwrite")
    for location, key, counts in ((root, "id", (1, 1, 0)), (floats, "k", (0, 0, 1))):
        (result, _schema, _rows), taken = run(spark, monkeypatch, tmp_path / key, "arrow", str(location), 0, 1, [key])
        assert not taken
        assert tuple(result["counts"].values()) == counts


def test_a_missing_data_file_is_named_as_spark_names_it(spark, monkeypatch, tmp_path) -> None:
    root = tmp_path / "t"
    write_deltalake(str(root), _table(BEFORE))
    write_deltalake(str(root), _table(AFTER), mode="overwrite")
    gone = DeltaTable(str(root), version=1).file_uris()[0].removeprefix("file://")
    __import__("os").remove(gone)
    ours, taken = run(spark, monkeypatch, tmp_path, "arrow", str(root), 0, 1, ["id"])
    theirs, _ = run(spark, monkeypatch, tmp_path, "spark", str(root), 0, 1, ["id"])
    assert not taken and ours == theirs and ours[0] == "StorageError" and "missing" in ours[1]


REPEATS = {
    "a new key twice": ([(1, "a"), (2, "b")], [(1, "a"), (2, "b"), (3, "c"), (3, "d")]),
    "the same row twice on both sides": ([(1, "a"), (1, "a"), (2, "b")], [(1, "a"), (1, "a"), (2, "c")]),
    "a removed key twice, another kept key twice": ([(1, "a"), (5, "x"), (5, "y"), (2, "b"), (2, "c")], [(2, "b")]),
    "a changed key twice on one side": ([(1, "a"), (2, "b")], [(1, "z"), (1, "y"), (2, "b")]),
}


@pytest.mark.parametrize("key", ["id", "name"], ids=["sorted integer key", "hashed string key"])
@pytest.mark.parametrize("before,after", REPEATS.values(), ids=REPEATS.keys())
def test_every_kind_of_repeated_key_is_refused_as_spark_refuses_it(
    spark, monkeypatch, tmp_path, before, after, key
) -> None:
    root = tmp_path / "t"
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    tables = [pa.Table.from_pylist([{"id": i, "v": v} for i, v in rows], schema=schema) for rows in (before, after)]
    if key == "name":  # the same rows keyed by a string
        tables = [t.append_column("name", pc_cast(t.column("id"))) for t in tables]
    write_deltalake(str(root), tables[0])
    write_deltalake(str(root), tables[1], mode="overwrite")
    refused, _ = both_routes(spark, monkeypatch, tmp_path, str(root), 0, 1, [key])
    assert refused[0] == "InvalidColumnsError" and "is not unique in version" in refused[1]


def pc_cast(column):
    import pyarrow.compute as pc

    return pc.cast(column, pa.string())


# A side already in key order (a table written in key order, the usual case) is matched
# without a sort and its paired values are filtered, not gathered. Each layout of the same two
# versions must give the same diff as their shuffled layout (both sides sorted by the match)
# and as a full outer join of delta-rs's reads by pyarrow, nulls matching nulls.
LAYOUTS = {  # (before, after): how each version's rows are ordered in its file; argsorts made
    "both in key order": (("sorted", "sorted"), 0),
    "before in key order": (("sorted", "shuffled"), 1),
    "after in key order": (("shuffled", "sorted"), 1),
    "in key order but one row": (("one row out", "sorted"), 1),
    "descending": (("descending", "descending"), 0),
    "blocks of key order out of order": (("blocks", "blocks"), 2),  # as delta-rs spreads rows
    "both shuffled": (("shuffled", "shuffled"), 2),
}
KEY_TYPES = {
    "long": pa.int64(),
    "int": pa.int32(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}


def _versions(key_type: pa.DataType, n: int = 3000, seed: int = 5) -> tuple[pa.Table, pa.Table]:
    """Two versions in key order: 5% of the rows removed, 5% changed (a value, a null, NaN
    kept NaN, -0.0 for 0.0), 5% added between and after the old keys."""
    import numpy as np

    rng = np.random.default_rng(seed)
    ids = np.arange(n, dtype=np.int64) * 3
    x = rng.random(n)
    x[::50], x[1::50] = np.nan, 0.0
    s = np.array([f"s{i % 37}" for i in range(n)], dtype=object)
    s[::40] = None
    before = {"id": ids, "x": x, "s": s}
    keep = rng.random(n) > 0.05
    xb, sb = x.copy(), s.copy()
    changed = rng.random(n) < 0.05
    xb[changed & (np.arange(n) % 2 == 0)] += 1.0
    sb[changed & (np.arange(n) % 2 == 1)] = "changed"
    xb[1::50] = -0.0  # equal to 0.0, as Spark compares
    sb[7::97] = None
    new = np.concatenate([rng.choice(n, n // 40, replace=False) * 3 + 1, np.arange(n, n + n // 40) * 3])
    after = {
        "id": np.concatenate([ids[keep], new]),
        "x": np.concatenate([xb[keep], rng.random(len(new))]),
        "s": np.concatenate([sb[keep], np.array(["new"] * len(new), dtype=object)]),
    }
    tables = []
    for cols in (before, after):
        order = np.argsort(cols["id"], kind="stable")
        key = pa.array(cols["id"][order])
        key = key.cast(pa.int32()).cast(key_type) if key_type == pa.date32() else key.cast(key_type)
        tables.append(pa.table({"id": key, "x": cols["x"][order], "s": pa.array(cols["s"][order], pa.string())}))
    return tables[0], tables[1]


def _laid_out(t: pa.Table, layout: str, seed: int) -> pa.Table:
    import numpy as np

    n = t.num_rows
    if layout == "shuffled":
        return t.take(np.random.default_rng(seed).permutation(n))
    if layout == "one row out":  # the last row written first
        return t.take(np.concatenate([[n - 1], np.arange(n - 1)]))
    if layout == "blocks":  # four blocks of rows in key order, the blocks out of order
        cuts = [0, n // 4, n // 2, 3 * n // 4, n]
        return t.take(np.concatenate([np.arange(cuts[i], cuts[i + 1]) for i in (2, 0, 3, 1)]))
    if layout == "descending":
        return t.take(np.arange(n - 1, -1, -1))
    return t


def _write(root, before: pa.Table, after: pa.Table) -> str:
    write_deltalake(str(root), before)
    write_deltalake(str(root), after, mode="overwrite")
    return str(root)


def _arrow_only(monkeypatch, root: str, out, keys=("id",)):
    """keyed_diff by pyarrow's route alone (no Spark session: a decline would fail here), and
    how many argsorts it made; the result and written rows, or the refusal's message."""
    import numpy as np

    sorts = []
    real = np.argsort

    def counted(*a, **k):
        sorts.append(True)
        return real(*a, **k)

    with monkeypatch.context() as m:
        m.setattr(rowdiff, "DRIVER_BYTES", -1)
        m.setattr(np, "argsort", counted)
        try:
            result = rowdiff.keyed_diff(None, root, 0, 1, list(keys), out)
        except DeltaError as exc:
            return (type(exc).__name__, str(exc)), len(sorts)
    written = pq.read_table(result.pop("path"))
    return (result, written.schema, written.to_pylist()), len(sorts)


def _peer(root: str, key: str) -> dict:
    """The diff from delta-rs's reads of both versions joined by pyarrow (full outer, on the
    key's value with nulls filled and whether it was null: nulls match nulls as in Spark)."""
    import pyarrow.compute as pc

    tables = [DeltaTable(root, version=v).to_pyarrow_table() for v in (0, 1)]
    chunks = [c for t in tables for c in t.column(key).chunks]
    present = pc.drop_null(pa.chunked_array(chunks, tables[0].column(key).type))
    sides = []
    for t, tag in zip(tables, "ab", strict=True):
        k = t.column(key)
        t = t.rename_columns([f"{c}_{tag}" for c in t.column_names])
        t = t.append_column("__k", pc.fill_null(k, present[0]) if len(present) else k)
        t = t.append_column("__null", pc.cast(pc.is_null(k), pa.int8())).append_column(
            f"__in_{tag}", pa.repeat(True, len(k))
        )
        sides.append(t)
    joined = sides[0].join(sides[1], keys=["__k", "__null"], join_type="full outer").to_pylist()
    others = [c for c in tables[0].column_names if c != key]
    peer = {}
    for r in joined:
        before = {c: r[f"{c}_a"] for c in others} if r["__in_a"] else None
        after = {c: r[f"{c}_b"] for c in others} if r["__in_b"] else None
        k = r[f"{key}_a"] if r["__in_a"] else r[f"{key}_b"]
        if after is None:
            peer[k] = ("removed", [], before, None)
        elif before is None:
            peer[k] = ("added", [], None, after)
        elif changed := [c for c in others if not _same(before[c], after[c])]:
            peer[k] = ("changed", changed, before, after)
    return peer


def _rows_by_key(rows: list[dict], key: str) -> dict:
    return {r[key]: (r["_diff"], r["_changed_columns"], r["_before"], r["_after"]) for r in rows}


def _nan_free(v):
    """NaN as a string, to compare diffs holding NaN."""
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, dict):
        return {k: _nan_free(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_nan_free(x) for x in v]
    return v


@pytest.mark.parametrize("key_type", KEY_TYPES.values(), ids=KEY_TYPES.keys())
@pytest.mark.parametrize("layout,sorts", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_a_side_in_key_order_is_not_sorted_and_diffs_as_the_shuffled_one_and_the_peer(
    monkeypatch, tmp_path, layout, sorts, key_type
) -> None:
    before, after = _versions(key_type)
    shuffled = _write(tmp_path / "shuffled", _laid_out(before, "shuffled", 1), _laid_out(after, "shuffled", 2))
    laid = _write(tmp_path / "laid", _laid_out(before, layout[0], 1), _laid_out(after, layout[1], 2))
    ours, made = _arrow_only(monkeypatch, laid, tmp_path / "out-laid")
    reference, _ = _arrow_only(monkeypatch, shuffled, tmp_path / "out-shuffled")
    assert made == sorts
    assert _comparable(ours) == _comparable(reference)
    result, _schema, rows = ours
    assert result["counts"]["added"] == 150
    assert result["counts"]["removed"] > 100 and result["counts"]["changed"] > 100
    assert _nan_free(_rows_by_key(rows, "id")) == _nan_free(_peer(laid, "id"))
    keys = [r["id"] for r in rows]
    assert keys == sorted(keys)


@pytest.mark.parametrize("first", ["higher keys", "lower keys"])
def test_a_version_in_key_order_over_several_files_is_not_sorted(monkeypatch, tmp_path, first) -> None:
    """A version written in key order into two files (appended one after the other, in either
    order): its files are read in key order, whatever the order of its log's entries."""
    before, after = _versions(pa.int64())
    low, high = before.slice(0, 1000), before.slice(1000)
    root = tmp_path / "t"
    write_deltalake(str(root), high if first == "higher keys" else low)
    write_deltalake(str(root), low if first == "higher keys" else high, mode="append")
    write_deltalake(str(root), after, mode="overwrite")
    with monkeypatch.context() as m:  # versions 1 and 2 as 0 and 1 of `_arrow_only`
        m.setattr(rowdiff, "_side", lambda loc, v, real=rowdiff._side: real(loc, v + 1))
        (result, _schema, rows), sorts = _arrow_only(monkeypatch, str(root), tmp_path / "out")
    shuffled = _write(tmp_path / "shuffled", before, _laid_out(after, "shuffled", 2))
    reference, _ = _arrow_only(monkeypatch, shuffled, tmp_path / "out-shuffled")
    assert sorts == 0
    assert _comparable((result, _schema, rows))[2] == _comparable(reference)[2]


def test_nulls_in_a_sorted_key_match_nulls_as_the_peer(monkeypatch, tmp_path) -> None:
    """A key in order with nulls first (matched by the hash join, null with null)."""
    before, after = _versions(pa.int64())
    nulls = pa.table({"id": pa.array([None], pa.int64()), "x": [1.0], "s": ["null key"]})
    before = pa.concat_tables([nulls, before])
    after = pa.concat_tables([nulls.set_column(2, "s", pa.array(["still null"])), after])
    root = _write(tmp_path / "t", before, after)
    (_result, _schema, rows), _ = _arrow_only(monkeypatch, root, tmp_path / "out")
    assert rows[0]["id"] is None and rows[0]["_changed_columns"] == ["s"]
    assert _nan_free(_rows_by_key(rows, "id")) == _nan_free(_peer(root, "id"))


REPEATED_LAYOUTS = {
    "a repeated key in a side in key order": ("sorted", "sorted"),
    "in a descending side": ("descending", "sorted"),
    "in a shuffled side": ("shuffled", "sorted"),
}


@pytest.mark.parametrize("layout", REPEATED_LAYOUTS.values(), ids=REPEATED_LAYOUTS.keys())
def test_a_repeated_key_is_refused_in_every_order(monkeypatch, tmp_path, layout) -> None:
    """The same refusal, naming the version and how many key values repeat (pyarrow's count of
    the delta-rs read), whatever the order of the side's rows."""
    import pyarrow.compute as pc

    before, after = _versions(pa.int64())
    before = pa.concat_tables([before, before.slice(10, 3)]).sort_by("id")  # three keys twice
    root = _write(tmp_path / "t", _laid_out(before, layout[0], 1), _laid_out(after, layout[1], 2))
    refused, _ = _arrow_only(monkeypatch, root, tmp_path / "out")
    counts = DeltaTable(root, version=0).to_pyarrow_table().group_by("id").aggregate([("id", "count")])
    repeated = pc.sum(pc.greater(counts.column("id_count"), 1)).as_py()
    assert repeated == 3
    assert refused[0] == "InvalidColumnsError"
    assert refused[1].endswith(": key (id) is not unique in version 0: 3 key value(s) repeat")


@pytest.mark.parametrize("layout", ["sorted", "one row out", "descending"])
def test_a_side_in_key_order_diffs_as_the_two_passes(spark, monkeypatch, tmp_path, layout) -> None:
    before, after = _versions(pa.int64(), n=600)
    root = _write(tmp_path / "t", _laid_out(before, layout, 1), _laid_out(after, "sorted", 2))
    (result, _schema, _rows), _ = both_routes(spark, monkeypatch, tmp_path, root, 0, 1, ["id"])
    assert result["counts"]["added"] == 30
