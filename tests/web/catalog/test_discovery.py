"""Discovery: every Delta table under a prefix, previewed then registered, through the API, the
page and `manage.py discover`; on local disk and on S3 (a real S3-compatible server). Nested
tables, hidden directories, symbolic links out of the roots and tables registered already are
handled; the new tables sync on the probe's next pass and agree with delta-rs."""

from __future__ import annotations

import io
import os
import uuid

import pyarrow as pa
import pytest
from django.core.management import call_command

from tables.models import Table
from tables.services.catalog.registration import register_table
from tables.services.sync import probe
from tests.web.pages.test_api import make_user, token_client

deltalake = pytest.importorskip("deltalake")
pytestmark = pytest.mark.django_db(transaction=True)


def write(uri: str, **kwargs) -> None:
    for i in range(2):
        deltalake.write_deltalake(uri, pa.table({"x": [i]}), mode="append", **kwargs)


@pytest.fixture
def tree(roots, tmp_path_factory):
    lake = roots / "lake"
    for rel in ("sales/orders", "sales/customers", "raw/logs/2026/events", "sales/orders/inner", "_staging/t"):
        write(str(lake / rel))
    (lake / "empty" / "deeper").mkdir(parents=True)
    outside = tmp_path_factory.mktemp("outside")
    write(str(outside / "secret"))
    os.symlink(outside, lake / "link-out")
    register_table("customers", str(lake / "sales/customers"))
    return lake


def test_the_api_previews_then_registers_and_the_probe_syncs_them(tree, eager_celery) -> None:
    api = token_client(make_user("ana", group="analyst"))
    preview = api.post("/api/discover/", {"prefix": str(tree)}, format="json")
    assert preview.status_code == 200, preview.content
    body = preview.json()
    found = {r["location"]: r for r in body["tables"]}
    assert set(found) == {str(tree / "sales/orders"), str(tree / "sales/customers"), str(tree / "raw/logs/2026/events")}
    assert found[str(tree / "sales/customers")] == {
        "location": str(tree / "sales/customers"),
        "name": "customers",  # the name it was registered under
        "status": "registered",
        "table": "customers",
    }
    assert found[str(tree / "raw/logs/2026/events")]["name"] == "raw.logs.2026.events"
    assert (body["new"], body["registered"], body["truncated"]) == (2, 1, "")
    assert Table.objects.count() == 1  # a preview registers nothing

    done = api.post("/api/discover/", {"prefix": str(tree), "register": True}, format="json")
    assert done.status_code == 201, done.content
    assert sorted(r["name"] for r in done.json()["registered"]) == ["raw.logs.2026.events", "sales.orders"]
    due = list(Table.objects.filter(name__in=["raw.logs.2026.events", "sales.orders"]).values_list("pk", flat=True))
    assert probe.probe_tables(due).as_dict()["changed"] == 2
    for t in Table.objects.filter(pk__in=due):
        assert t.last_synced_version == deltalake.DeltaTable(t.location).version() == 1
    again = api.post("/api/discover/", {"prefix": str(tree), "register": True}, format="json").json()
    assert again["registered"] == [] and again["skipped"] == []


def test_bad_prefixes_and_users_without_the_role_are_refused(tree, roots) -> None:
    api = token_client(make_user("ana", group="analyst"))
    assert (
        api.post("/api/discover/", {"prefix": "/etc"}, format="json").json()["error"]["code"] == "location_not_allowed"
    )
    missing = api.post("/api/discover/", {"prefix": str(roots / "nope")}, format="json")
    assert missing.status_code == 400 and missing.json()["error"]["code"] == "invalid_location"
    assert api.post("/api/discover/", {}, format="json").status_code == 400
    nobody = token_client(make_user("bob"))
    assert nobody.post("/api/discover/", {"prefix": str(tree)}, format="json").status_code == 403
    assert Table.objects.count() == 1


def test_the_page_registers_only_the_ticked_tables(tree, browser) -> None:
    page = browser.get("/tables/discover/", {"prefix": str(tree)})
    text = page.content.decode()
    assert page.status_code == 200 and "2 new, 1 registered already" in text
    assert str(tree / "sales/orders") in text and "inner" not in text and "secret" not in text
    r = browser.post("/tables/discover/", {"prefix": str(tree), "location": [str(tree / "sales/orders")]})
    assert r.status_code == 302
    assert set(Table.objects.values_list("name", flat=True)) == {"customers", "sales.orders"}
    outside = browser.get("/tables/discover/", {"prefix": "/etc"})
    assert outside.status_code == 403 and "outside the allowed" in outside.content.decode()


def test_manage_py_discover(tree) -> None:
    out = io.StringIO()
    call_command("discover", str(tree), stdout=out, stderr=io.StringIO())
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and any(line.startswith("registered  customers") for line in lines)
    out = io.StringIO()
    call_command("discover", str(tree), "--register", stdout=out)
    assert out.getvalue().count("registered  ") == 2 and Table.objects.count() == 3


def test_discovery_on_s3(s3_server, monkeypatch, settings) -> None:
    from tests.conftest import use_store_environment

    bucket = "discovery"
    client = s3_server.boto3()
    if bucket not in [b["Name"] for b in client.list_buckets()["Buckets"]]:
        client.create_bucket(Bucket=bucket)
    use_store_environment(monkeypatch, s3_server.env())
    base = f"s3://{bucket}/allowed/{uuid.uuid4().hex}"
    settings.DELTAWEB_ALLOWED_ROOTS = [f"s3://{bucket}/allowed"]
    for rel in ("a", "b/c", "b/c/nested", "_tmp/x"):
        write(f"{base}/{rel}", storage_options=s3_server.storage_options())
    api = token_client(make_user("ana", group="analyst"))
    preview = api.post("/api/discover/", {"prefix": base}, format="json").json()
    assert [(r["location"], r["status"]) for r in preview["tables"]] == [(f"{base}/a", "new"), (f"{base}/b/c", "new")]
    done = api.post("/api/discover/", {"prefix": base, "register": True}, format="json").json()
    assert sorted(r["name"] for r in done["registered"]) == ["a", "b.c"]
    elsewhere = api.post("/api/discover/", {"prefix": f"s3://{bucket}/other"}, format="json")
    assert elsewhere.status_code == 403 and elsewhere.json()["error"]["code"] == "location_not_allowed"


def test_discovery_from_a_glue_database(s3_server, monkeypatch, settings, browser) -> None:
    """A Glue database on the moto server: its Delta tables (by table_type or the Spark provider)
    are offered, its other tables are not; registered through the API; the page and the
    command see the same."""
    from tests.conftest import use_store_environment

    use_store_environment(monkeypatch, s3_server.env())
    bucket = "discovery"
    client = s3_server.boto3()
    if bucket not in [b["Name"] for b in client.list_buckets()["Buckets"]]:
        client.create_bucket(Bucket=bucket)
    base = f"s3://{bucket}/allowed/glue-{uuid.uuid4().hex[:8]}"
    settings.DELTAWEB_ALLOWED_ROOTS = [f"s3://{bucket}/allowed"]
    write(f"{base}/orders", storage_options=s3_server.storage_options())
    write(f"{base}/events", storage_options=s3_server.storage_options())
    glue = s3_server.boto3("glue")
    settings.DELTAWEB_GLUE_ENDPOINT_URL = s3_server.endpoint  # AWS_ENDPOINT_URL is the store's only
    db = f"lake_{uuid.uuid4().hex[:6]}"
    glue.create_database(DatabaseInput={"Name": db})
    tables = {
        "orders": ({"table_type": "DELTA"}, f"{base}/orders"),
        "events": ({"spark.sql.sources.provider": "delta"}, f"{base}/events/"),
        "csv_dump": ({"classification": "csv"}, f"{base}/csv"),
    }
    for name, (params, location) in tables.items():
        glue.create_table(
            DatabaseName=db,
            TableInput={"Name": name, "Parameters": params, "StorageDescriptor": {"Location": location}},
        )
    api = token_client(make_user("gina", group="analyst"))
    preview = api.post("/api/discover/", {"glueDatabase": db}, format="json")
    assert preview.status_code == 200, preview.content
    rows = {r["name"]: r["location"] for r in preview.json()["tables"]}
    assert rows == {f"{db}.orders": f"{base}/orders", f"{db}.events": f"{base}/events"}
    both = api.post("/api/discover/", {"glueDatabase": db, "prefix": base}, format="json")
    assert both.status_code == 400
    missing = api.post("/api/discover/", {"glueDatabase": "no_such_db"}, format="json")
    assert missing.status_code == 502 and missing.json()["error"]["code"] == "glue_error"
    page = browser.get("/tables/discover/", {"glue": db}).content.decode()
    assert "2 new, 0 registered already" in page
    done = api.post("/api/discover/", {"glueDatabase": db, "register": True}, format="json").json()
    assert sorted(r["name"] for r in done["registered"]) == [f"{db}.events", f"{db}.orders"]
    out = io.StringIO()
    call_command("discover", "--glue", db, stdout=out, stderr=io.StringIO())
    assert out.getvalue().count("registered  ") == 2


def test_a_glue_database_without_a_region_is_a_400_naming_the_region(
    s3_server, monkeypatch, settings, tmp_path
) -> None:
    """No region anywhere (not in the settings, the environment or an AWS config file): the
    answer says which region is missing and where to set it, not a 502 from the catalog."""
    from tests.conftest import use_store_environment

    use_store_environment(monkeypatch, s3_server.env())
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    settings.DELTAWEB_GLUE_REGION = ""
    api = token_client(make_user("rita", group="analyst"))
    r = api.post("/api/discover/", {"glueDatabase": "lake"}, format="json")
    assert r.status_code == 400, r.content[:300]
    error = r.json()["error"]
    assert error["code"] == "glue_region_missing"
    assert "region" in error["message"] and "DELTAWEB_GLUE_REGION" in error["message"]
    assert "\n" not in error["message"] and "Traceback" not in error["message"]
    settings.DELTAWEB_GLUE_ENDPOINT_URL = s3_server.endpoint
    settings.DELTAWEB_GLUE_REGION = s3_server.region  # the same request with a region gets the catalog's answer
    r = api.post("/api/discover/", {"glueDatabase": "no_such_db"}, format="json")
    assert r.status_code == 502 and r.json()["error"]["code"] == "glue_error"


def test_discovery_on_a_schedule_registers_new_tables_and_marks_vanished_ones(tree, browser) -> None:
    import shutil
    from datetime import timedelta

    from django.utils import timezone

    from tables.models import DiscoverySource
    from tables.services.catalog import discovery

    api = token_client(make_user("sam", group="analyst"))
    done = api.post("/api/discover/", {"prefix": str(tree), "register": True, "everyHours": 6}, format="json").json()
    assert done["schedule"]["everyHours"] == 6 and len(done["registered"]) == 2
    source = DiscoverySource.objects.get()
    assert set(Table.objects.filter(source=source).values_list("name", flat=True)) == {
        "sales.orders",
        "raw.logs.2026.events",
    }

    write(str(tree / "sales/returns"))  # a new table
    shutil.rmtree(tree / "raw")  # one gone
    assert discovery.rerun_due(timezone.now()) == 0  # not due yet
    assert discovery.rerun_due(timezone.now() + timedelta(hours=7)) == 1
    source.refresh_from_db()
    assert source.last_result == {"registered": 1, "skipped": 0, "vanished": 1, "back": 0}
    gone = Table.objects.get(name="raw.logs.2026.events")
    assert gone.vanished_at is not None and Table.objects.get(name="sales.returns").source == source
    assert Table.objects.get(name="customers").vanished_at is None  # not the source's: untouched
    assert "vanished" in browser.get("/").content.decode()
    assert 'id="vanished"' in browser.get(f"/t/{gone.slug}/").content.decode()

    write(str(tree / "raw/logs/2026/events"))  # back again
    discovery.rerun(source)
    assert Table.objects.get(pk=gone.pk).vanished_at is None


def test_a_glue_table_at_s3a_is_not_registered_again_by_an_s3_prefix(s3_server, monkeypatch, settings) -> None:
    """Glue names a table `s3a://bucket/x/` (as Spark writes it); a later discovery of the
    `s3://` prefix finds the same table registered, not a new one; so does registering it by hand."""
    from tests.conftest import s3_buckets

    bucket = "discovery"
    s3_buckets(s3_server, monkeypatch, settings, bucket)
    key = f"allowed/spelling-{uuid.uuid4().hex[:8]}"
    write(f"s3://{bucket}/{key}/x", storage_options=s3_server.storage_options())
    glue = s3_server.boto3("glue")
    settings.DELTAWEB_GLUE_ENDPOINT_URL = s3_server.endpoint  # AWS_ENDPOINT_URL is the store's only
    db = f"lake_{uuid.uuid4().hex[:6]}"
    glue.create_database(DatabaseInput={"Name": db})
    glue.create_table(
        DatabaseName=db,
        TableInput={
            "Name": "x",
            "Parameters": {"table_type": "DELTA"},
            "StorageDescriptor": {"Location": f"s3a://{bucket}/{key}/x/"},
        },
    )
    api = token_client(make_user("gina", group="analyst"))
    done = api.post("/api/discover/", {"glueDatabase": db, "register": True}, format="json")
    assert done.status_code == 201, done.content
    assert Table.objects.get().location == f"s3://{bucket}/{key}/x"
    seen = api.post("/api/discover/", {"prefix": f"s3://{bucket}/{key}"}, format="json").json()
    assert [(r["location"], r["status"]) for r in seen["tables"]] == [(f"s3://{bucket}/{key}/x", "registered")]
    again = api.post("/api/discover/", {"prefix": f"s3://{bucket}/{key}", "register": True}, format="json").json()
    assert again["registered"] == [] and Table.objects.count() == 1
    by_hand = api.post("/api/tables/", {"name": "x again", "location": f"s3a://{bucket}/{key}/x/"}, format="json")
    assert by_hand.status_code == 409 and Table.objects.count() == 1


# --- a prefix with many tables: streamed, a page listed, all counted ---------------------------


def fleet(root, n: int):
    """`n` copies of one 2-commit delta-rs table, ten to a folder: root/g0/t00 … g3/t35."""
    import shutil

    seed = root / "_seed"  # `_`: not a parent of tables, never walked
    write(str(seed))
    for i in range(n):
        shutil.copytree(seed, root / f"g{i // 10}" / f"t{i:02d}")
    return root


def test_the_walk_yields_each_table_as_it_finds_it(roots) -> None:
    from tables.delta.discover import Walk, walk_tables
    from tables.delta.storage.opening import as_storage

    lake = fleet(roots / "many", 36)
    (lake / "g0" / "t00" / "inner" / "_delta_log").mkdir(parents=True)  # inside a table: not one
    (lake / ".hidden" / "x" / "_delta_log").mkdir(parents=True)
    walk = Walk()
    found = walk_tables(as_storage(str(lake)), walk)
    assert next(found) == "g0/t00" and walk.dirs_listed == 3  # the prefix, g0, t00: nothing more yet
    assert list(found) == [f"g{i // 10}/t{i:02d}" for i in range(1, 36)]
    assert (walk.dirs_listed, walk.truncated) == (1 + 4 + 36, "")
    short = Walk()
    assert len(list(walk_tables(as_storage(str(lake)), short, max_dirs=10))) == 8  # the prefix, g0, 8 tables
    assert short.truncated == "stopped after listing 10 directories"


def test_a_preview_lists_a_page_counts_the_rest_and_registering_takes_them_all(roots, browser) -> None:
    from tables.services.catalog import discovery

    lake = fleet(roots / "many", 36)
    register_table("t03", str(lake / "g0" / "t03"))
    register_table("g0.t01", str(lake / "g3" / "t35"))  # takes the name g0/t01 would get
    api = token_client(make_user("pia", group="analyst"))
    body = api.post("/api/discover/", {"prefix": str(lake), "limit": 5}, format="json").json()
    assert [(r["location"], r["name"], r["status"]) for r in body["tables"]] == [
        (str(lake / "g0/t00"), "g0.t00", "new"),
        (str(lake / "g0/t01"), "g0.t01-2", "new"),
        (str(lake / "g0/t02"), "g0.t02", "new"),
        (str(lake / "g0/t03"), "t03", "registered"),
        (str(lake / "g0/t04"), "g0.t04", "new"),
    ]
    assert (body["found"], body["more"], body["new"], body["registered"]) == (36, 31, 34, 2)
    assert api.post("/api/discover/", {"prefix": str(lake), "limit": -1}, format="json").status_code == 400
    page = browser.get("/tables/discover/", {"prefix": str(lake)}).content.decode()
    assert "34 new, 2 registered already" in page and "and 31 more" not in page  # 36 rows fit a page

    done = discovery.register_found(str(lake), None)
    assert len(done["registered"]) == 34 and Table.objects.count() == 36
    assert Table.objects.get(location=str(lake / "g0/t01")).name == "g0.t01-2"


def test_the_page_registers_beyond_its_rows_only_when_every_listed_one_is_ticked(roots, browser, monkeypatch) -> None:
    from tables.services.catalog import discovery

    monkeypatch.setattr(discovery, "PREVIEW_ROWS", 3)
    lake = fleet(roots / "many", 8)
    page = browser.get("/tables/discover/", {"prefix": str(lake)}).content.decode()
    assert "8 new, 0 registered already" in page and "and 5 more" in page and 'name="offered" value="3"' in page
    listed = [str(lake / f"g0/t{i:02d}") for i in range(3)]
    form = {"prefix": str(lake), "offered": "3", "more": "5"}
    browser.post("/tables/discover/", {**form, "location": listed[:2]})
    assert Table.objects.count() == 2  # one unticked: the ticked ones only
    again = browser.get("/tables/discover/", {"prefix": str(lake)}).content.decode()
    assert 'name="offered" value="1"' in again and 'name="more" value="5"' in again  # t00, t01 registered
    browser.post("/tables/discover/", {**form, "offered": "1", "location": listed[2:]})
    assert Table.objects.count() == 8  # every listed one ticked: the rest too
