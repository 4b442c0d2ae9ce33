"""SQL at a version (tables.spark.jobs.query over tables.services.query.statement) against an
independent peer on every query: the same versions read by delta-rs (the Delta kernel where
delta-rs refuses or misreads a table: deletion vectors, column mapping), the same statement run
by DuckDB over those Arrow tables (transpiled from Spark's dialect by sqlglot), the sorted rows
compared exactly. Golden tables with decimals, dates, timestamps, timestamp_ntz, nulls, nested
structs, deletion vectors and column mapping, and a table with In-Commit Timestamps enabled
midway (the demo table), each query run by VERSION AS OF and again by TIMESTAMP AS OF at the
version's commit time (an ICT boundary where the table has them)."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlglot

from tables.delta.history.timestamps import commit_times, format_ms, parse_timestamp, resolve_timestamp
from tables.services.query.statement import QueryRefused, Reference, parse_statement
from tables.spark.jobs.query import run_query
from tests.conftest import golden_path

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("deltalake")

# peer: "rs" delta-rs, "kernel" the Delta kernel (delta-rs refuses deletion vectors and reads the
# column-mapped table's binary column as nulls)
TABLES = {
    "dec": ("basic-decimal-table", "kernel"),  # delta-rs misdecodes a negative decimal
    "dates": ("data-reader-date-types-UTC", "rs"),
    "ntz": ("data-reader-timestamp_ntz", "rs"),
    "nested": ("data-reader-nested-struct", "rs"),
    "dv": ("dv-partitioned-with-checkpoint", "kernel"),
    "cm": ("table-with-columnmapping-mode-name", "kernel"),
    "tt": ("time-travel-partition-changes-b", "rs"),
    "upd": ("basic-with-inserts-updates", "rs"),
    "prim": ("data-reader-primitives", "rs"),
}

# (statement, {name: version}): `{name}` is replaced by the table at the version asked
QUERIES = [
    ("SELECT * FROM {dec}", {"dec": 0}),
    ("SELECT part, sum(col1) s, CAST(avg(col2) AS DOUBLE) a, max(col3) m FROM {dec} GROUP BY part", {"dec": 0}),
    ("SELECT col1 * 2 AS d, col3 FROM {dec} WHERE col2 > 0 ORDER BY col3", {"dec": 0}),
    ("SELECT * FROM {dates}", {"dates": 0}),
    ("SELECT date, count(*) c FROM {dates} GROUP BY date", {"dates": 0}),
    ("SELECT `timestamp` FROM {dates} WHERE `timestamp` IS NOT NULL", {"dates": 0}),
    ("SELECT id, tsNtz FROM {ntz}", {"ntz": 1}),
    ("SELECT id, tsNtz FROM {ntz}", {"ntz": 0}),
    ("SELECT count(*) c, min(tsNtz) lo, max(tsNtz) hi FROM {ntz}", {"ntz": 1}),
    ("SELECT a.aa, a.ab, a.ac.aca, b FROM {nested}", {"nested": 0}),
    ("SELECT b, a.ac.acb FROM {nested} WHERE b % 2 = 0", {"nested": 0}),
    ("SELECT part, count(*) c, sum(col1) s FROM {dv} GROUP BY part", {"dv": 15}),
    ("SELECT part, count(*) c FROM {dv} GROUP BY part", {"dv": 3}),
    ("SELECT col1, col2 FROM {dv} WHERE col1 > 20", {"dv": 8}),
    (
        "SELECT a.col1 FROM {dv} a LEFT ANTI JOIN {dv2} b ON a.col1 = b.col1",
        {"dv": 3, "dv2": 15},
    ),
    (
        "SELECT x.part, x.c - coalesce(y.c, 0) AS gone FROM (SELECT part, count(*) c FROM {dv} GROUP BY part) x "
        "LEFT JOIN (SELECT part, count(*) c FROM {dv2} GROUP BY part) y ON x.part = y.part",
        {"dv": 3, "dv2": 15},
    ),
    ("SELECT ByteType, ShortType, IntegerType, LongType, decimal, BooleanType FROM {cm}", {"cm": 0}),
    ("SELECT BooleanType, count(*) c, sum(LongType) s FROM {cm} GROUP BY BooleanType", {"cm": 0}),
    ("SELECT * FROM {tt}", {"tt": 0}),
    ("SELECT * FROM {tt}", {"tt": 1}),
    ("SELECT part2, count(*) c, min(id) lo, max(id) hi FROM {tt} GROUP BY part2", {"tt": 1}),
    ("SELECT id FROM {tt} EXCEPT SELECT id FROM {tt2}", {"tt": 1, "tt2": 0}),
    ("SELECT id FROM {tt} INTERSECT SELECT id FROM {tt2}", {"tt": 1, "tt2": 0}),
    ("SELECT id, part2 AS p FROM {tt} UNION ALL SELECT id, part5 AS p FROM {tt2}", {"tt": 1, "tt2": 0}),
    ("SELECT * FROM {upd}", {"upd": 0}),
    ("SELECT * FROM {upd}", {"upd": 1}),
    (
        "SELECT a.id, a.str AS before, b.str AS after FROM {upd} a JOIN {upd2} b ON a.id = b.id WHERE a.str <> b.str",
        {"upd": 0, "upd2": 1},
    ),
    (
        "WITH changed AS (SELECT id FROM {upd} EXCEPT SELECT id FROM {upd2}) SELECT count(*) c FROM changed",
        {"upd": 0, "upd2": 1},
    ),
    ("SELECT str, count(*) c FROM {upd} GROUP BY str HAVING count(*) > 1", {"upd": 1}),
    (
        "SELECT id, str, row_number() OVER (PARTITION BY str ORDER BY id) rn FROM {upd}",
        {"upd": 1},
    ),
    ("SELECT id, sum(id) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) s FROM {upd}", {"upd": 1}),
    ("SELECT * FROM {prim}", {"prim": 0}),
    (
        "SELECT as_int, as_long, as_string, as_boolean FROM {prim} WHERE as_int IS NULL OR as_int < 5",
        {"prim": 0},
    ),
    ("SELECT count(as_int) n, count(*) c, sum(as_long) s, avg(as_double) a FROM {prim}", {"prim": 0}),
    ("SELECT coalesce(as_string, 'none') s, nvl(as_int, -1) i FROM {prim}", {"prim": 0}),
    ("SELECT as_int, CASE WHEN as_int % 2 = 0 THEN 'even' ELSE 'odd' END kind FROM {prim}", {"prim": 0}),
    ("SELECT upper(as_string) u, length(as_string) n FROM {prim} WHERE as_string LIKE '1%'", {"prim": 0}),
    ("SELECT as_int, lag(as_int) OVER (ORDER BY as_int) prev FROM {prim} WHERE as_int IS NOT NULL", {"prim": 0}),
    ("SELECT region, count(*) c, round(sum(amount), 2) total FROM {demo} GROUP BY region", {"demo": 3}),
    ("SELECT region, count(*) c, round(sum(amount), 2) total FROM {demo} GROUP BY region", {"demo": 7}),
    ("SELECT count(*) c FROM {demo}", {"demo": 6}),
    (
        "SELECT coalesce(a.region, b.region) region, coalesce(a.c, 0) before, coalesce(b.c, 0) after FROM "
        "(SELECT region, count(*) c FROM {demo} GROUP BY region) a FULL OUTER JOIN "
        "(SELECT region, count(*) c FROM {demo2} GROUP BY region) b ON a.region = b.region",
        {"demo": 5, "demo2": 8},
    ),
    # versions 3 (the last by file time), 4 (ICT enabled), 5 and 6 (by inCommitTimestamp)
    ("SELECT g, count(*) c, max(id) m FROM {ictrs} GROUP BY g", {"ictrs": 3}),
    ("SELECT g, count(*) c, max(id) m FROM {ictrs} GROUP BY g", {"ictrs": 4}),
    ("SELECT id FROM {ictrs} EXCEPT SELECT id FROM {ictrs2}", {"ictrs": 6, "ictrs2": 4}),
    ("SELECT count(*) c FROM {ictrs}", {"ictrs": 5}),
]


@pytest.fixture
def demo(tmp_path) -> Path:
    from tables.services.catalog.demo import build_demo_table

    return build_demo_table(tmp_path / "demo" / "orders")


@pytest.fixture
def ict_rs(tmp_path) -> Path:
    """Versions 0..3 written by delta-rs, In-Commit Timestamps enabled at 4 (delta-rs cannot
    enable them, and refuses to write once they are on), then versions 5..6 appended by
    deltaweb's own writer, their Parquet files written by pyarrow."""
    import time

    import pyarrow.parquet as pq
    from deltalake import write_deltalake

    from tables.delta.write.commit import commit, enable_ict

    path = tmp_path / "ict_rs"
    for i in range(4):
        rows = pa.table({"id": pa.array([i * 10 + k for k in range(5)], pa.int64()), "g": ["a", "b", "a", "c", "b"]})
        write_deltalake(str(path), rows, mode="append")
        time.sleep(0.01)  # distinct commit file times
    enable_ict(str(path))
    for v in (5, 6):
        name = f"part-ict-{v}.parquet"
        pq.write_table(pa.table({"id": pa.array([v * 100, v * 100 + 1], pa.int64()), "g": ["c", "d"]}), path / name)
        add = {
            "path": name,
            "partitionValues": {},
            "size": (path / name).stat().st_size,
            "modificationTime": 0,
            "dataChange": True,
        }
        commit(str(path), [{"add": add}], "WRITE", {"mode": "Append"})
        time.sleep(0.01)
    return path


def location(name: str, demo: Path, ict_rs: Path | None = None) -> tuple[Path, str]:
    base = name.rstrip("0123456789")
    if base == "demo":
        return demo, "rs"
    if base == "ictrs":
        # delta-rs reads it (it refuses to write after ICT, not to read)
        return ict_rs, "rs"  # type: ignore[return-value]
    golden, peer = TABLES[base]
    return golden_path(golden), peer


def peer_table(path: Path, version: int, peer: str, tmp: Path) -> pa.Table:
    """The version as the peer reads it."""
    if peer == "kernel":
        from tests.web.sharing_site import kernel_table

        return kernel_table(path, version, tmp)
    from deltalake import DeltaTable

    return DeltaTable(str(path), version=version).to_pyarrow_table()


def normal(value):
    """A value as both engines' results can be compared: instants in UTC without a zone, floats
    to 9 significant digits, decimals by value, structs and lists recursively."""
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value
    if isinstance(value, float):
        return None if math.isnan(value) else float(f"{value:.9g}")
    if isinstance(value, Decimal):
        return value.normalize()
    if isinstance(value, dict):
        return {k: normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normal(v) for v in value]
    return value


def rows(table: pa.Table) -> list[tuple]:
    out = [tuple(normal(v) for v in r.values()) for r in table.to_pylist()]
    return sorted(out, key=repr)


def statement(
    template: str, versions: dict[str, int], demo: Path, by_time: bool, ict_rs: Path | None = None
) -> tuple[str, dict]:
    """The template with each name as a reference at its version (or at the version's commit
    time), and {name: (path, version, peer)}."""
    refs, where = {}, {}
    for name, version in versions.items():
        path, peer = location(name, demo, ict_rs)
        where[name] = (path, version, peer)
        if by_time:
            stamp = format_ms(commit_times(str(path)).timestamp(version)[0])
            refs[name] = f"`{path}` TIMESTAMP AS OF '{stamp}'"
        else:
            refs[name] = f"`{path}` VERSION AS OF {version}"
    sql = template
    for name, ref in refs.items():
        sql = sql.replace("{" + name + "}", ref)
    return sql, where


def resolve(ref: Reference) -> tuple[tuple, tuple]:
    """A reference's table by its path (these tests name tables by their location), its version
    asked by number or resolved by the core's TIMESTAMP AS OF."""
    if ref.by == "timestamp":
        version = resolve_timestamp(commit_times(ref.name), parse_timestamp(str(ref.value)))["version"]
    else:
        version = ref.value
    return (ref.name, version), (ref.name, version)


@pytest.mark.parametrize("by_time", [False, True], ids=["version", "timestamp"])
def test_every_query_equals_duckdb_over_the_peers_reads(spark, demo, ict_rs, tmp_path, by_time) -> None:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    mismatches = []
    for n, (template, versions) in enumerate(QUERIES):
        sql, where = statement(template, versions, demo, by_time, ict_rs)
        parsed = parse_statement(sql, resolve)
        frames = {i: (str(b[0]), b[1]) for i, b in enumerate(parsed.bindings)}
        out = run_query(spark, frames, parsed.statement, tmp_path / f"q{n}", 10_000, 300, f"test-query-{n}")
        got = pq.read_table(out["path"])
        peers = {str(p): peer for p, _v, peer in where.values()}
        for i, (path, version) in frames.items():
            con.register(f"__dw_t{i}", peer_table(Path(path), version, peers[path], tmp_path / f"k{n}-{i}"))
        want = con.execute(sqlglot.transpile(parsed.statement, read="spark", write="duckdb")[0]).to_arrow_table()
        for i in frames:
            con.unregister(f"__dw_t{i}")
        assert out["rows"] == got.num_rows and not out["cut"]
        if rows(got) != rows(want):
            mismatches.append((template, rows(got)[:5], rows(want)[:5]))
    assert mismatches == []
    assert len(QUERIES) >= 40 and len({location(n, demo, ict_rs)[0] for _t, v in QUERIES for n in v}) >= 8


def test_a_result_past_the_cap_is_cut_and_marked(spark, tmp_path) -> None:
    path = golden_path("basic-with-inserts-updates")

    def here(ref: Reference):
        return (ref.name, ref.value), (str(path), ref.value)

    parsed = parse_statement("SELECT id FROM t VERSION AS OF 1 ORDER BY id", here)
    out = run_query(spark, dict(enumerate(parsed.bindings)), parsed.statement, tmp_path / "q", 7, 300, "cap")
    assert out["cut"] and out["rows"] == 7
    assert pq.read_table(out["path"]).column("id").to_pylist() == list(range(7))


def test_a_query_past_its_time_is_cancelled_with_the_reason(spark, tmp_path) -> None:
    from tables.spark.jobs.query import QueryTimedOut

    path = golden_path("basic-with-inserts-updates")

    def here(ref: Reference):
        return (ref.name, ref.value), (str(path), ref.value)

    # a cross join of a table with itself five times: 100^5 rows, far longer than half a second
    slow = "SELECT count(*) FROM t a, t b, t c, t d, t e WHERE a.id + b.id + c.id + d.id + e.id >= 0"
    parsed = parse_statement(slow, here)
    from tables.spark.engine.control import job_scope

    # the job's tag, as the worker runs every data job (tables.spark.engine.worker.SparkDataJobs)
    with pytest.raises(QueryTimedOut, match=r"longer than 1 s"), job_scope(spark, "slow-query"):
        run_query(spark, dict(enumerate(parsed.bindings)), parsed.statement, tmp_path / "q", 10, 1, "slow-query")
    # the session is usable after: the same table answers at once
    quick = parse_statement("SELECT count(*) c FROM t VERSION AS OF 1", here)
    out = run_query(spark, dict(enumerate(quick.bindings)), quick.statement, tmp_path / "q2", 10, 300, "quick")
    assert pq.read_table(out["path"]).to_pylist() == [{"c": 100}]


def test_a_refused_statement_never_reaches_spark(tmp_path) -> None:
    with pytest.raises(QueryRefused, match="file source"):
        parse_statement("SELECT * FROM parquet.`/etc/passwd`", resolve)
