"""SQL at a version through the API and the Query tab: a query run on Spark at the versions it
names (by number, by time, by a pin, the latest synced) and its rows equal to delta-rs + DuckDB,
reused when identical, the per-user limit, a statement refused before anything runs (each of
the hostile statements, its message naming the part, no job created), the same query at two
versions compared, the CSV download, and the page."""

from __future__ import annotations

import csv
import io

import pyarrow as pa
import pytest

from tables.models import Job
from tables.services.catalog import registration
from tables.services.query.run import start_query
from tables.services.sync import store as sync
from tests.web.data import test_rows

from ..pages.test_api import make_user, token_client

deltalake = pytest.importorskip("deltalake")
duckdb = pytest.importorskip("duckdb")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

pytestmark = pytest.mark.django_db
spark = test_rows.spark  # the module's Spark session, as the worker's task gets it
eager = test_rows.eager  # jobs enqueued on commit run in this process


@pytest.fixture
def orders(tmp_path, settings):
    """v0: 6 orders in eu/us; v1: 3 more in apac; v2: the eu ones deleted; synced."""
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = tmp_path / "orders"
    write_deltalake(
        str(path),
        pa.table(
            {
                "id": pa.array(range(6), pa.int64()),
                "region": ["eu", "eu", "us", "us", "us", "eu"],
                "amount": [10.0, 20.0, 5.0, 7.5, 1.0, 3.0],
            }
        ),
    )
    write_deltalake(
        str(path),
        pa.table({"id": pa.array([6, 7, 8], pa.int64()), "region": ["apac"] * 3, "amount": [2.0, 4.0, 8.0]}),
        mode="append",
    )
    DeltaTable(str(path)).delete("region = 'eu'")
    table = registration.register_table("orders", str(path))
    sync.sync_table(table.pk)
    table.refresh_from_db()
    return table


@pytest.fixture
def api():
    return token_client(make_user("reader"))


def post(api, table, body):
    return api.post(f"/api/tables/{table.pk}/query/", body, format="json")


def peer(table, sql_versions: dict[int, int], duck_sql: str) -> list[tuple]:
    con = duckdb.connect()
    for name, version in sql_versions.items():
        con.register(f"v{name}", DeltaTable(table.location, version=version).to_pyarrow_table())
    return sorted(con.execute(duck_sql).fetchall())


def test_a_query_runs_at_the_versions_it_names(eager, orders, api, django_capture_on_commit_callbacks) -> None:
    sql = (
        "SELECT a.region, count(*) AS n, sum(a.amount) AS total FROM orders VERSION AS OF 1 a "
        "GROUP BY a.region ORDER BY a.region"
    )
    with django_capture_on_commit_callbacks(execute=True):
        r = post(api, orders, {"sql": sql})
    assert r.status_code == 202, r.content
    job = Job.objects.get(pk=r.json()["id"])
    assert job.status == "succeeded", job.error
    assert job.params["references"][0]["version"] == 1 and job.params["references"][0]["slug"] == "orders"
    rows = api.get(f"/api/jobs/{job.pk}/results/").json()
    assert [c["name"] for c in rows["columns"]] == ["region", "n", "total"]
    got = [(x["region"], x["n"], x["total"]) for x in rows["rows"]]
    want = peer(orders, {1: 1}, "SELECT region, count(*), sum(amount) FROM v1 GROUP BY region ORDER BY region")
    assert got == want
    # identical query, same versions: reused, no new job
    before = Job.objects.count()
    again = post(api, orders, {"sql": sql})
    assert again.status_code == 200 and again.json()["reused"] and Job.objects.count() == before
    # the latest synced version (2: eu deleted), and the same query at a time
    with django_capture_on_commit_callbacks(execute=True):
        latest = post(api, orders, {"sql": "SELECT DISTINCT region FROM orders"})
    job = Job.objects.get(pk=latest.json()["id"])
    assert job.params["references"][0]["version"] == 2
    assert sorted(x["region"] for x in api.get(f"/api/jobs/{job.pk}/results/").json()["rows"]) == ["apac", "us"]


def test_the_same_query_at_two_versions_compared(
    eager, orders, api, browser, django_capture_on_commit_callbacks
) -> None:
    sql = "SELECT region, count(*) AS n, sum(amount) AS total FROM orders GROUP BY region"
    with django_capture_on_commit_callbacks(execute=True):
        r = api.post(f"/api/tables/{orders.pk}/query/compare/", {"sql": sql, "from": "0", "to": "2"}, format="json")
    assert r.status_code == 202, r.content
    a, b = (j["id"] for j in r.json()["jobs"])
    body = api.get(f"/api/queries/compare/{a}/{b}/").json()
    assert body["keys"] == ["region"]
    assert body["counts"] == {"onlyFrom": 1, "onlyTo": 1, "changed": 0, "same": 1}
    assert [x["region"] for x in body["onlyFrom"]] == ["eu"] and [x["region"] for x in body["onlyTo"]] == ["apac"]
    with django_capture_on_commit_callbacks(execute=True):
        r = api.post(f"/api/tables/{orders.pk}/query/compare/", {"sql": sql, "from": "0", "to": "1"}, format="json")
    a, b = (j["id"] for j in r.json()["jobs"])
    body = api.get(f"/api/queries/compare/{a}/{b}/").json()
    assert body["counts"]["onlyTo"] == 1 and body["counts"]["changed"] == 0
    # the page shows it, and the CSV download holds the rows
    page = browser.get(f"/t/orders/query/?a={a}&b={b}")
    assert page.status_code == 200 and b'id="compare-counts"' in page.content
    csv_rows = list(
        csv.reader(io.StringIO(b"".join(browser.get(f"/t/orders/query/{b}.csv").streaming_content).decode()))
    )
    assert csv_rows[0] == ["region", "n", "total"] and len(csv_rows) == 4


HOSTILE = [
    ("DROP TABLE orders", "Only a query"),
    ("INSERT INTO orders SELECT * FROM orders", "Only a query"),
    ("DELETE FROM orders WHERE id = 1", "Only a query"),
    ("UPDATE orders SET amount = 0", "Only a query"),
    ("MERGE INTO orders USING orders s ON orders.id = s.id WHEN MATCHED THEN DELETE", "Only a query"),
    ("CREATE TABLE x AS SELECT * FROM orders", "Only a query"),
    ("CREATE TEMPORARY VIEW v AS SELECT 1", "Only a query"),
    ("SET spark.sql.ansi.enabled = false", "Only a query"),
    ("ADD JAR /tmp/evil.jar", "Only a query"),
    ("CACHE TABLE orders", "Only a query"),
    ("UNCACHE TABLE orders", "Only a query"),
    ("MSCK REPAIR TABLE orders", "Only a query"),
    ("REFRESH TABLE orders", "Only a query"),
    ("CALL system.rollback('orders', 1)", "Only a query"),
    ("SELECT * FROM orders; DROP TABLE orders", "One statement only"),
    ("SELECT 1; SELECT 2", "One statement only"),
    ("SELECT reflect('java.lang.Runtime', 'getRuntime') FROM orders", "function reflect"),
    ("SELECT java_method('java.lang.System', 'exit', 0)", "function java_method"),
    ("SELECT input_file_name() FROM orders", "function input_file_name"),
    ("SELECT my_udf(amount) FROM orders", "function my_udf"),
    ("SELECT * FROM parquet.`/etc`", "file source"),
    ("SELECT * FROM csv.`/etc/passwd`", "file source"),
    ("SELECT * FROM delta.`/tmp`", "file source"),
    ("SELECT * FROM read_files('/etc/passwd')", "read_files"),
    ("SELECT * FROM range(1000000000)", "table-valued function"),
    ("SELECT * FROM not_registered", "not a registered table"),
    ("SELECT * FROM cat.sch.nothing", "not a registered table"),
    ("SELECT * FROM default.orders", "slug or its catalog name"),
    ("SELECT * FROM orders VERSION AS OF 99", "version"),
    ("SELECT * FROM orders TIMESTAMP AS OF '1999-01-01'", "before the earliest"),
    ("SELECT * FROM orders VERSION AS OF 'no-such-pin'", "no pin named"),
    ("SELECT * FROM orders TIMESTAMP AS OF current_timestamp()", "take a literal"),
    ("SELECT 1 /* ; DROP TABLE orders */ FROM orders; -- hidden\nDROP TABLE orders", "One statement only"),
    ("/* SELECT */ DROP TABLE orders", "Only a query"),
    ("ＳＥＬＥＣＴ * FROM orders", "not valid Spark SQL"),
    ("SELECT * FROM оrders", "not a registered table"),  # a Cyrillic о
    ("SELECT rеflect('a', 'b')", "function rеflect"),  # a Cyrillic е: unknown, refused
    ("SELECT `__dw_t0`.id FROM orders", "reserved"),
    ("SELECT TRANSFORM(id) USING 'sh -c id' AS (x) FROM orders", "Only a query"),
    ("SELECT '${env:DELTAWEB_SECRET_KEY}' FROM orders", "${...} is not allowed"),
    ("SELECT system.builtin.reflect('java.lang.Runtime', 'getRuntime')", "function reflect"),
    ("SELECT * FROM IDENTIFIER('parquet.`/etc`')", "function identifier"),
    ("SELECT * FROM STREAM(orders)", "function stream"),
    ("SELECT aggregate(array(1), 0, (a, x) -> reflect('a', 'b'))", "function reflect"),
    ("   ", "Write one SELECT"),
    ("", "may not be blank"),
]


def test_hostile_statements_are_refused_before_anything_runs(orders, api) -> None:
    jobs = Job.objects.count()
    for sql, words in HOSTILE:
        r = post(api, orders, {"sql": sql})
        body = r.json()
        assert r.status_code == 400, (sql, body)
        message = body["error"]["message"] + " " + str(body["error"].get("part", ""))
        assert body["error"]["code"] in ("query_refused", "invalid"), (sql, body)
        assert words.lower() in message.lower(), (sql, message)
    assert Job.objects.count() == jobs
    assert len(HOSTILE) >= 25


def test_a_table_gone_from_its_location_is_out_of_reach(orders, api) -> None:
    from django.utils import timezone

    from tables.models import Table

    Table.objects.create(name="archive", slug="archive", location=orders.location + "-gone", vanished_at=timezone.now())
    r = post(api, orders, {"sql": "SELECT * FROM orders JOIN archive ON orders.id = archive.id"})
    assert r.status_code == 400 and "archive is not a registered table you may read" in r.json()["error"]["message"]


def test_a_users_queries_are_limited(orders, settings) -> None:
    settings.DELTAWEB_QUERY_CONCURRENT = 1
    user = make_user("busy")
    start_query(orders, "SELECT count(*) FROM orders", user)  # queued: no worker here
    from tables.services.errors import ServiceError

    with pytest.raises(ServiceError) as caught:
        start_query(orders, "SELECT max(id) FROM orders", user)
    assert caught.value.status == 429 and caught.value.code == "too_many_queries"
    # the same query again joins the one queued
    assert start_query(orders, "SELECT count(*) FROM orders", user).status == "queued"


def test_the_query_tab_keeps_a_refused_statement_with_its_reason(orders, browser) -> None:
    page = browser.get("/t/orders/query/")
    assert page.status_code == 200 and b'id="query-sql"' in page.content
    r = browser.post("/t/orders/query/run/", {"sql": "SELECT reflect('a','b') FROM orders"}, follow=True)
    text = r.content.decode()
    assert 'id="query-error"' in text and "function reflect is not allowed" in text
    assert "SELECT reflect(&#x27;a&#x27;,&#x27;b&#x27;) FROM orders" in text
    assert Job.objects.filter(kind="query").count() == 0
