"""Issue 57, items 9 and 10 on the pages: the table page names the Delta Sharing shares the
table is in (linked to the share for who may see shares), the schema is a tab of its own, the
Overview carries no promotional card, and discovery ticks nothing by itself ("Tick all" /
"tick none") and lists the tables it cannot read apart, with why, never as "new"."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from django.contrib.auth.models import Permission

from tables.models import Share, SharedTable, Table
from tables.services.catalog import registration
from tables.services.sync import store as sync
from tests.web.pages.test_api import make_user, token_client

deltalake = pytest.importorskip("deltalake")

pytestmark = pytest.mark.django_db


def write(path, n: int = 2) -> None:
    for i in range(n):
        deltalake.write_deltalake(str(path), pa.table({"x": [i]}), mode="append")


@pytest.fixture
def table(roots) -> Table:
    write(roots / "sales")
    t = registration.register_table("Sales", str(roots / "sales"))
    sync.sync_table(t.pk)
    return t


def current_tab(page: str) -> list[str]:
    return re.findall(r'<a href="[^"]+" aria-current="page">([^<]+)</a>', page)


# --- item 9: the table page links to its shares ----------------------------------------------


def test_the_table_page_names_its_shares_and_links_them_for_who_may_see_shares(table, browser, client) -> None:
    assert 'id="table-shares"' not in browser.get("/t/sales/").content.decode()  # in no share: no line
    finance = Share.objects.create(name="finance")
    SharedTable.objects.create(share=finance, schema="q4", name="orders", table=table, first_version=1)
    partners = Share.objects.create(name="partners")
    SharedTable.objects.create(share=partners, name="sales", table=table)
    Share.objects.create(name="unrelated")

    for url in ("/t/sales/", "/t/sales/history/", "/t/sales/schema/", "/t/sales/versions/"):
        page = browser.get(url).content.decode()  # an analyst: the names, no admin link
        line = page.split('id="table-shares"')[1].split("</p>")[0]
        assert "finance as <code>finance.q4.orders</code> (versions from 1)" in line, url
        assert "partners as <code>partners.default.sales</code>" in line and "unrelated" not in line
        assert "/admin/" not in line

    admin = make_user("admin", staff=True)
    admin.user_permissions.add(Permission.objects.get(codename="view_share"))
    client.force_login(admin)
    line = client.get("/t/sales/").content.decode().split('id="table-shares"')[1].split("</p>")[0]
    assert f'<a href="/admin/tables/share/{finance.pk}/change/">finance</a>' in line
    assert f'<a href="/admin/tables/share/{partners.pk}/change/">partners</a>' in line
    assert client.get(f"/admin/tables/share/{finance.pk}/change/").status_code == 200  # the link opens


# --- item 10: no promotional card, the schema's own tab --------------------------------------


def test_the_overview_has_no_promotional_card(table, browser) -> None:
    page = browser.get("/t/sales/").content.decode()
    assert "Answers no other Delta tool gives" not in page and 'id="only-here"' not in page
    assert 'id="schema-timeline-link"' in page  # the Overview still leads to the schema


def test_the_schema_is_a_tab_of_its_own(table, browser) -> None:
    page = browser.get("/t/sales/schema/").content.decode()
    nav = page.split('aria-label="Table sections"')[1].split("</nav>")[0]
    tabs = re.findall(r">([^<]+)</a>", nav)
    assert tabs[:3] == ["Overview", "Schema", "History"]
    assert current_tab(page) == ["Schema"] and "<title>Sales · schema" in page
    assert current_tab(browser.get("/t/sales/").content.decode()) == ["Overview"]
    assert 'href="/t/sales/schema/"' in browser.get("/t/sales/history/").content.decode()


# --- item 10: discovery ----------------------------------------------------------------------


@pytest.fixture
def lake(roots):
    """Two readable new tables, one whose first commit is damaged, one whose protocol this
    server cannot read, one being written."""
    lake = roots / "lake"
    write(lake / "a")
    write(lake / "b")
    write(lake / "broken", 1)
    (lake / "broken" / "_delta_log" / f"{0:020d}.json").write_text("this is not JSON\n")
    write(lake / "future", 1)
    log0 = lake / "future" / "_delta_log" / f"{0:020d}.json"
    log0.write_text(
        re.sub(r'"minReaderVersion":\d+', '"minReaderVersion":99', log0.read_text()).replace(
            '"minReaderVersion": 1', '"minReaderVersion": 99'
        )
    )
    (lake / "writing" / "_delta_log").mkdir(parents=True)
    return lake


def test_discovery_ticks_nothing_by_itself_and_offers_tick_all_and_none(lake, browser) -> None:
    page = browser.get("/tables/discover/", {"prefix": str(lake)}).content.decode()
    boxes = re.findall(r'<input type="checkbox" name="location"[^>]*>', page)
    assert len(boxes) == 2 and not any(" checked" in b for b in boxes)
    assert 'id="tick-all"' in page and 'data-tick="none"' in page and "tables/discover.js" in page
    ticked = browser.get("/tables/discover/", {"prefix": str(lake), "tick": "all"}).content.decode()
    boxes = re.findall(r'<input type="checkbox" name="location"[^>]*>', ticked)
    assert len(boxes) == 2 and all(" checked" in b for b in boxes)
    # the form sent back with nothing ticked registers nothing (it used to mean "all")
    r = browser.post("/tables/discover/", {"prefix": str(lake), "offered": "2", "more": "0"})
    assert r.status_code == 302 and r["Location"].startswith("/tables/discover/?prefix=")
    assert Table.objects.count() == 0
    assert "No table was ticked" in browser.get(r["Location"]).content.decode()
    browser.post("/tables/discover/", {"prefix": str(lake), "offered": "2", "more": "0", "location": [str(lake / "a")]})
    assert list(Table.objects.values_list("location", flat=True)) == [str(lake / "a")]


def test_unreadable_tables_are_listed_apart_with_why_and_never_registered(lake, browser) -> None:
    page = browser.get("/tables/discover/", {"prefix": str(lake)}).content.decode()
    assert "2 new, 0 registered already, 1 still being written (no commit yet; not offered), 2 unreadable" in page
    form = page.split('id="discover-form"')[1].split("</form>")[0]
    assert str(lake / "broken") not in form and str(lake / "future") not in form
    apart = page.split('id="discover-unreadable"')[1].split("</section>")[0]
    broken = apart.partition(str(lake / "broken"))[2].split("</tr>")[0]
    assert "its log cannot be read" in broken and "not valid JSON" in broken
    future = apart.partition(str(lake / "future"))[2].split("</tr>")[0]
    assert "its log cannot be read" in future and "99" in future

    api = token_client(make_user("pia", group="analyst"))
    body = api.post("/api/discover/", {"prefix": str(lake)}, format="json").json()
    states = {r["location"]: (r["status"], r.get("reason", "")) for r in body["tables"]}
    assert states[str(lake / "broken")][0] == "unreadable" and states[str(lake / "broken")][1]
    assert (body["new"], body["unreadable"], body["incomplete"]) == (2, 2, 1)
    done = api.post("/api/discover/", {"prefix": str(lake), "register": True}, format="json").json()
    assert sorted(r["location"] for r in done["registered"]) == [str(lake / "a"), str(lake / "b")]
    skipped = {r["location"]: r for r in done["skipped"]}
    assert set(skipped) == {str(lake / "broken"), str(lake / "future")}
    assert skipped[str(lake / "broken")]["code"] == "unreadable"
    assert skipped[str(lake / "broken")]["message"].startswith("cannot be registered: its log cannot be read")
