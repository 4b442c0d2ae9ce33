"""The schema's timeline through the API and on the schema page: a Spark column-mapping table
with a rename, a drop and a re-added name appended, and a delta-rs table whose columns arrive
by schema merging, each registered and synced. The answers are the core's (checked against
delta-rs in tests/core/test_schema_timeline.py); here: the routes, the errors in the API's
shape, the commits' cached timestamps, the page's sections, escaping and keyboard access."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pytest

from tables.models import Table
from tables.services.access.roles import ANALYST
from tables.services.catalog import registration
from tables.services.sync import store as sync
from tables.services.versions import schema_timeline as service
from tests.conftest import golden_path
from tests.core.test_schema_timeline import (
    find_field,
    merged_table,
    metadata_of,
    renamed_table,
    with_schema,
    write_commit,
)
from tests.web.pages.test_api import assert_error, make_user, token_client
from tests.web.ui_tables import EVIL

deltalake = pytest.importorskip("deltalake")
from deltalake import write_deltalake  # noqa: E402

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_timelines():
    service.forget()
    yield
    service.forget()


def registered(name: str, path: Path) -> Table:
    t = registration.register_table(name, str(path))
    sync.sync_table(t.pk)
    t.refresh_from_db()
    return t


@pytest.fixture
def mapped(roots) -> Table:
    """Spark's column-mapping (name) table, v1 rename, v2 drop, v3 the name added again, v4 NOT NULL."""
    return registered("mapped", renamed_table(golden_path("table-with-columnmapping-mode-name"), roots / "mapped"))


@pytest.fixture
def merged(roots) -> Table:
    return registered("merged", merged_table(roots / "merged"))


@pytest.fixture
def api():
    return token_client(make_user("ana-api", group=ANALYST))


def url(table: Table, rest: str) -> str:
    return f"/api/tables/{table.pk}/schema/{rest}"


# --- the API -----------------------------------------------------------------------------------


def test_schema_as_of_a_version_with_its_ddl(api, mapped) -> None:
    body = api.get(url(mapped, "?version=1")).json()
    assert (body["version"], body["schemaVersion"], body["columnMapping"]) == (1, 1, "name")
    assert (body["earliestVersion"], body["latestVersion"]) == (0, 4)
    top = [c["name"] for c in body["columns"] if c["depth"] == 0]
    assert top[0] == "byte_col" and "ShortType" in top
    inner = next(c for c in body["columns"] if c["path"] == ["nested_struct", "ac", "inner"])
    assert inner["depth"] == 2 and inner["physicalName"].startswith("col-") and isinstance(inner["fieldId"], int)
    assert body["ddl"].startswith("CREATE TABLE `mapped` (\n  `byte_col` TINYINT,")
    assert "'delta.columnMapping.mode' = 'name'" in body["ddl"]
    assert body["commit"]["operation"] == "RENAME COLUMN" and body["commit"]["timestampSource"] in ("file", "ict")
    latest = api.get(url(mapped, "")).json()
    assert latest["version"] == 4 and "`IntegerType` INT NOT NULL" in latest["ddl"]
    assert "`ShortType` SMALLINT" in latest["ddl"]  # the one added again at 3


def test_the_timeline_names_renames_drops_and_commits(api, mapped) -> None:
    body = api.get(url(mapped, "timeline/")).json()
    byte = next(c for c in body["columns"] if c["name"] == "byte_col")
    assert byte["key"] == "id:1" and byte["added"] == 0 and byte["dropped"] is None
    assert [(e["kind"], e["version"]) for e in byte["events"]] == [("added", 0), ("renamed", 1)]
    assert byte["events"][1]["fromName"] == "ByteType"
    shorts = [c for c in body["columns"] if c["name"] == "ShortType"]
    assert [(c["added"], c["dropped"]) for c in shorts] == [(0, 2), (3, None)]
    commits = {c["version"]: c for c in body["commits"]}
    assert [commits[v]["operation"] for v in (1, 2, 3, 4)] == ["RENAME COLUMN", "DROP COLUMNS", "ADD COLUMNS",
                                                               "CHANGE COLUMN"]  # fmt: skip
    # the effective timestamp of the cached history, as the History tab shows it
    cached = {c.version: c.timestamp for c in mapped.commits.all()}
    assert all(commits[v]["timestamp"] == cached[v] for v in commits)


def test_the_diff_names_renames_as_renames(api, mapped, merged) -> None:
    body = api.get(url(mapped, "diff/?from=0&to=4")).json()
    assert body["matchedBy"] == "columnMapping" and (body["from"], body["to"]) == (0, 4)
    kinds = {(c["kind"], tuple(c["path"])) for c in body["changes"]}
    assert {("renamed", ("byte_col",)), ("dropped", ("ShortType",)), ("added", ("ShortType",))} <= kinds
    merged_diff = api.get(url(merged, "diff/?from=0&to=4")).json()
    assert merged_diff["matchedBy"] == "name"
    assert [(c["kind"], c["path"]) for c in merged_diff["changes"]] == [
        ("added", ["name"]),
        ("added", ["s"]),
        ("added", ["s", "a"]),
        ("added", ["s", "b"]),
    ]


def test_errors_come_in_the_apis_shape(api, mapped) -> None:
    assert "version 9" in assert_error(api.get(url(mapped, "?version=9")), 404, "version_not_found")
    assert_error(api.get(url(mapped, "?version=abc")), 400, "invalid")
    assert_error(api.get(url(mapped, "?version=-1")), 400, "invalid")
    assert "must not be after" in assert_error(api.get(url(mapped, "diff/?from=3&to=1")), 400, "invalid_range")
    assert_error(api.get(url(mapped, "diff/?from=1")), 400, "invalid")
    assert_error(api.get(url(mapped, "diff/?from=0&to=99")), 404, "version_not_found")
    assert_error(api.get("/api/tables/nope/schema/timeline/"), 404, "not_found")
    from rest_framework.test import APIClient

    assert APIClient().get(url(mapped, "timeline/")).status_code in (401, 403)
    message = assert_error(api.get(url(mapped, "?version=9")), 404)
    assert str(mapped.location) not in message  # the table by its name, never the server's path


def test_new_commits_are_seen_without_walking_the_log_again(api, merged, monkeypatch) -> None:
    first = api.get(url(merged, "timeline/")).json()
    assert first["latestVersion"] == 4
    write_deltalake(merged.location, pa.table({"late": pa.array([1.5])}), mode="append", schema_mode="merge")
    from tables.delta.history import schema_timeline as core

    def no_full_walk(*args, **kwargs):
        raise AssertionError("the whole log walked again")

    monkeypatch.setattr(core, "schema_timeline", no_full_walk)
    later = api.get(url(merged, "timeline/")).json()
    assert later["latestVersion"] == 5
    late = next(c for c in later["columns"] if c["name"] == "late")
    assert late["added"] == 5 and late["type"] == "double"
    # not synced yet: the commit's time is its commitInfo's
    assert next(c for c in later["commits"] if c["version"] == 5)["timestampSource"] == "commitInfo"


def json_schema(node):
    """An OpenAPI 3.0 schema as JSON Schema: `nullable: true` as a union with null."""
    if isinstance(node, list):
        return [json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: json_schema(v) for k, v in node.items() if k != "nullable"}
    return {"anyOf": [out, {"type": "null"}]} if node.get("nullable") else out


def test_answers_conform_to_the_published_schema(api, mapped, merged) -> None:
    """The fuzz (test_schemathesis.py) rarely guesses a real table's id: the answers of real
    tables are checked against /api/schema/ here, every documented field with its type."""
    import jsonschema

    doc = json_schema(api.get("/api/schema/?format=json").json())
    for table in (mapped, merged):
        for path, query in (("", "?version=1"), ("timeline/", ""), ("diff/", "?from=0&to=4")):
            op = doc["paths"][f"/api/tables/{{id}}/schema/{path}"]["get"]
            assert {p["name"] for p in op["parameters"]} >= {"id"}
            schema = op["responses"]["200"]["content"]["application/json"]["schema"]
            body = api.get(url(table, path + query)).json()
            jsonschema.validate(body, {**schema, "components": doc["components"]})
            with pytest.raises(jsonschema.ValidationError):  # the check has teeth
                jsonschema.validate(
                    {**body, "to" if path == "diff/" else "latestVersion": "x"},
                    {**schema, "components": doc["components"]},
                )


# --- the page ----------------------------------------------------------------------------------


def test_overview_links_to_the_schema_page(browser, merged) -> None:
    page = browser.get(f"/t/{merged.slug}/").content.decode()
    assert f'href="/t/{merged.slug}/schema/#schema-timeline"' in page
    assert '<label for="overview-schema-version">' in page and 'id="overview-schema-version" name="version"' in page


def test_schema_page_shows_the_ddl_the_timeline_and_the_diff(browser, mapped) -> None:
    r = browser.get(f"/t/{mapped.slug}/schema/?version=1&from=0&to=2")
    assert r.status_code == 200
    page = r.content.decode()
    ddl = re.search(r'<pre class="json"><code id="sql-ddl-1">(.*?)</code></pre>', page, re.S)
    assert ddl and ddl.group(1).startswith("CREATE TABLE `mapped` (\n  `byte_col` TINYINT,")
    assert 'data-copy="sql-ddl-1"' in page and 'aria-label="Copy the query' in page
    assert "<code>byte_col</code> renamed from ByteType to byte_col" in page
    assert "<code>ShortType</code> dropped (was short)" in page
    assert "<code>IntegerType</code> now NOT NULL" in page
    timeline = page[page.index('id="timeline-versions"') :]
    assert timeline.index('id="schema-v4"') < timeline.index('id="schema-v1"')  # newest first
    assert "RENAME COLUMN" in page and "by ana" in page
    assert "<summary>30 changes</summary>" in timeline  # the creation of 30 fields, folded
    diff = page[page.index('id="schema-diff"') :]
    assert "renamed from ByteType to byte_col" in diff and "matched by column mapping" in page
    assert '<label for="schema-from">' in page and '<label for="as-of-version">' in page


def test_schema_page_errors_stay_in_their_section(browser, mapped) -> None:
    page = browser.get(f"/t/{mapped.slug}/schema/?version=9&from=3&to=1").content.decode()
    assert 'id="as-of-error"' in page and "version 9" in page
    assert 'id="diff-error"' in page and "must not be after" in page
    assert 'id="timeline-versions"' in page  # the rest still shows
    assert str(mapped.location) not in page
    assert browser.get(f"/t/{mapped.slug}/schema/?version=x").status_code == 400
    assert browser.get("/t/nope/schema/").status_code == 404


def test_schema_page_needs_sign_in(client, merged) -> None:
    r = client.get(f"/t/{merged.slug}/schema/")
    assert r.status_code == 302 and r["Location"].startswith("/accounts/login/")


def test_names_and_comments_of_the_log_are_escaped(browser, roots) -> None:
    path = roots / "evil"
    write_deltalake(str(path), pa.table({"a": pa.array([1], pa.int64())}))
    md = metadata_of(path)
    schema = json.loads(md["schemaString"])
    find_field(schema, "a")["metadata"] = {"comment": EVIL}
    schema["fields"].append({"name": EVIL, "type": "long", "nullable": True, "metadata": {}})
    write_commit(path, 1, [with_schema(md, schema)], f"ADD COLUMNS{EVIL}")
    table = registered("evil", path)
    page = browser.get(f"/t/{table.slug}/schema/?version=1&from=0&to=1").content.decode()
    assert EVIL not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
