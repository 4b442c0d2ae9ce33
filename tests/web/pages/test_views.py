"""The browser UI, through Django's test client: what a signed-in user sees on each page."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tables.delta.history.columns import SHOWN_COLUMNS
from tables.delta.history.timestamps import format_ms
from tables.delta.write.commit import enable_ict
from tables.models import Commit, Job, SyncState, Table
from tables.services.catalog import registration
from tables.services.sync import store as sync
from tables.web.tabs import history as history_views
from tables.web.tabs import versions as versions_views
from tests.web.ui_tables import DESCRIBE_HISTORY_DETAILS, EVIL, evil_commit, history_table, ict_table

EVERY_HISTORY_COLUMN = ["readable", "timestamp", *(c.name for c in SHOWN_COLUMNS)]

pytest.importorskip("deltalake")

pytestmark = pytest.mark.django_db


@pytest.fixture
def table(roots):
    """'Sales': v0 create, v1..v2 appends, v3 delete; synced into the cache."""
    path = history_table(roots / "sales")
    t = registration.register_table("Sales", str(path), "orders by region")
    sync.sync_table(t.pk)
    t.refresh_from_db()
    return t


def text(response) -> str:
    return response.content.decode()


def versions_listed(response, table) -> set[int]:
    """The versions the history table links to."""
    return {r["version"] for r in response.context["rows"]}


# --- sign-in ---------------------------------------------------------------------------


def test_every_page_requires_sign_in(client, table) -> None:
    job = Job.objects.create(kind="sync", table=table)
    urls = [
        "/",
        "/tables/register/",
        "/t/sales/",
        "/t/sales/v/0/",
        "/t/sales/diff/?from=0&to=1",
        f"/jobs/{job.pk}.json",
    ]
    for url in urls:
        r = client.get(url)
        assert r.status_code == 302, url
        assert r["Location"].startswith("/accounts/login/?next="), url
    r = client.post("/t/sales/sync/")
    assert r.status_code == 302 and r["Location"].startswith("/accounts/login/")
    assert Job.objects.count() == 1


def test_sign_in_page_and_sign_in(client, analyst, table) -> None:
    r = client.get("/accounts/login/?next=/t/sales/")
    assert r.status_code == 200
    page = text(r)
    assert "Sign in" in page and 'name="username"' in page and "autofocus" in page
    r = client.post("/accounts/login/", {"username": "ana", "password": "wrong", "next": "/t/sales/"})
    assert "Please enter a correct username and password" in text(r)
    r = client.post("/accounts/login/", {"username": "ana", "password": "secret-pass-1", "next": "/t/sales/"})
    assert r.status_code == 302 and r["Location"] == "/t/sales/"
    assert "orders by region" in text(client.get("/t/sales/"))


# --- table list and sync ---------------------------------------------------------------


def test_table_list_shows_sync_status(browser, table) -> None:
    r = browser.get("/")
    page = text(r)
    assert r.status_code == 200
    assert 'href="/t/sales/"' in page and "Sales" in page
    assert "in sync" in page
    assert 'version <span class="num">3</span>' in page  # last synced version
    assert 'action="/t/sales/sync/"' in page and "Sync now" in page
    assert 'href="/tables/register/"' in page


def test_table_list_shows_sync_error(browser, table) -> None:
    Table.objects.filter(pk=table.pk).update(sync_state=SyncState.ERROR, last_error="the log has a gap; missing 7")
    page = text(browser.get("/"))
    assert "error" in page and "the log has a gap; missing 7" in page


def test_sync_now_shows_job_progress(browser, table) -> None:
    r = browser.post("/t/sales/sync/", {"next": "/"})
    job = Job.objects.get()
    assert r.status_code == 302 and r["Location"] == f"/?job={job.pk}"
    page = text(browser.get(r["Location"]))
    assert f'data-url="/jobs/{job.pk}.json"' in page
    assert "Sync of Sales queued." in page
    assert "tables/job.js" in page
    payload = browser.get(f"/jobs/{job.pk}.json").json()
    assert payload["status"] == "queued" and payload["terminal"] is False and payload["table"] == "sales"
    sync.sync_table(table.pk, job.pk)
    payload = browser.get(f"/jobs/{job.pk}.json").json()
    assert payload["status"] == "succeeded" and payload["stage"] == "done" and payload["terminal"] is True
    r = browser.get("/jobs/999999.json")
    assert r.status_code == 404 and r.json() == {"error": {"code": "not_found", "message": "There is no job 999999."}}


def test_sync_now_ignores_offsite_next(browser, table) -> None:
    r = browser.post("/t/sales/sync/", {"next": "https://evil.example/"})
    assert r["Location"].startswith("/t/sales/?job=")
    assert browser.get("/t/sales/sync/").status_code == 405


# --- the table page --------------------------------------------------------------------


def test_table_page_shows_history_as_describe_history(browser, table) -> None:
    r = browser.get("/t/sales/history/", {"cols": EVERY_HISTORY_COLUMN})
    page = text(r)
    assert r.status_code == 200
    head = page.split('class="grid history"')[1].split("</thead>")[0]
    headers = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th scope=\"col\"[^>]*>(.*?)</th>", head)]
    assert headers == ["version", "readable", "timestamp", *DESCRIBE_HISTORY_DETAILS]
    assert versions_listed(r, table) == {0, 1, 2, 3}
    assert "Commits 1–4 of 4, newest first." in page
    assert "DELETE" in page and "WRITE" in page and "delta-rs:py-" in page
    assert '<span class="badge src-file"' in page  # no ICT on this table: file times
    v1 = Commit.objects.get(table=table, version=1)
    assert format_ms(v1.timestamp) in page
    # charts: the Timeline tab fetches its figures as JSON, plotly comes from our own server
    page = text(browser.get("/t/sales/charts/"))
    assert 'data-chart-src="/t/sales/charts.json"' in page and 'data-figure="timeline"' in page
    assert "/static/vendor/plotly" in page
    # every script and stylesheet comes from this server (not a search for "cdn" in the page:
    # the random CSRF token in the sign-out form may spell it)
    sources = re.findall(r'<(?:script|link)\b[^>]*\b(?:src|href)="([^"]*)"', page)
    assert sources and all(src.startswith("/") and not src.startswith("//") for src in sources), sources
    figures = browser.get("/t/sales/charts.json").json()
    assert figures["files"]["data"][0]["y"] == [
        r.num_files for r in Commit.objects.filter(table=table).order_by("version")
    ]


def test_history_filters(browser, table) -> None:
    r = browser.get("/t/sales/history/", {"operation": "delete"})
    assert versions_listed(r, table) == {3}
    assert "matching the filters" in text(r) and "Clear filters" in text(r)
    r = browser.get("/t/sales/history/", {"version_from": 1, "version_to": 2})
    assert versions_listed(r, table) == {1, 2}
    assert "Commits 1–2 of 2 matching the filters" in text(r)
    today = datetime.fromtimestamp(Commit.objects.get(table=table, version=0).timestamp / 1000, tz=UTC).date()
    r = browser.get("/t/sales/history/", {"date_from": today.isoformat(), "date_to": today.isoformat()})
    assert versions_listed(r, table) == {0, 1, 2, 3}
    r = browser.get("/t/sales/history/", {"date_from": (today + timedelta(days=1)).isoformat()})
    assert versions_listed(r, table) == set()
    assert "No commits match the filters." in text(r)
    r = browser.get("/t/sales/history/", {"version_from": 3, "version_to": 1})
    assert "The first version of the range is after the last one." in text(r)
    r = browser.get("/t/sales/history/", {"version_from": "abc"})
    assert "Enter a whole number." in text(r)
    # the operations offered for the filter come from the cached history
    assert '<option value="DELETE">' in text(r) and '<option value="WRITE">' in text(r)


def test_history_pagination_keeps_filters(browser, table, monkeypatch) -> None:
    monkeypatch.setattr(history_views, "HISTORY_PAGE_SIZE", 2)
    r = browser.get("/t/sales/history/")
    assert versions_listed(r, table) == {3, 2}
    assert "Commits 1–2 of 4, newest first." in text(r) and "page 1 of 2" in text(r)
    assert 'href="?page=2"' in text(r)  # relative: the next page stays on the History tab
    r = browser.get("/t/sales/history/", {"page": 2})
    assert versions_listed(r, table) == {1, 0}
    assert "Commits 3–4 of 4" in text(r)
    r = browser.get("/t/sales/history/", {"operation": "WRITE"})
    assert versions_listed(r, table) == {2, 1}
    assert 'href="?operation=WRITE&amp;page=2"' in text(r)
    r = browser.get("/t/sales/history/", {"operation": "WRITE", "page": 2})
    assert versions_listed(r, table) == {0}
    assert versions_listed(browser.get("/t/sales/history/", {"page": 99}), table) == {1, 0}  # past the end: last page


def test_log_strings_are_escaped_everywhere(browser, table) -> None:
    evil_commit(Path(table.location), 4)
    sync.sync_table(table.pk)
    escaped = "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;"
    pages = {
        "overview": browser.get("/t/sales/"),
        "table": browser.get("/t/sales/history/", {"cols": EVERY_HISTORY_COLUMN}),
        "filtered": browser.get("/t/sales/history/", {"operation": f"WRITE{EVIL}"}),
        "version": browser.get("/t/sales/v/4/"),
        "diff": browser.get("/t/sales/diff/", {"from": 3, "to": 4}),
    }
    for name, r in pages.items():
        assert r.status_code == 200, name
        page = text(r)
        assert "<script>alert" not in page, name
        assert escaped in page, name
    assert f"mallory{escaped}" in text(pages["table"])
    assert f"evil-engine{escaped}" in text(pages["table"])
    assert versions_listed(pages["filtered"], table) == {4}
    # the chart JSON is served as JSON (never HTML) and escapes plotly's HTML-ish labels
    r = browser.get(f"/t/{table.slug}/charts.json")
    assert r["Content-Type"] == "application/json" and r["X-Content-Type-Options"] == "nosniff"
    figure = r.json()["timeline"]
    assert any("&lt;script&gt;" in c[1] for c in figure["data"][0]["customdata"])


def test_time_travel_answers_with_version_rule_and_link(browser, table) -> None:
    v1 = Commit.objects.get(table=table, version=1)
    r = browser.get("/t/sales/versions/", {"as_of": format_ms(v1.timestamp)})
    page = text(r)
    assert r.status_code == 200
    assert "the table was at" in page and "<strong>version 1</strong>" in page
    assert "In-Commit Timestamps are off, so versions 0..3 were searched by commit file modification time" in page
    assert 'href="/t/sales/v/1/"' in page and "Open version 1" in page
    assert 'href="/t/sales/diff/?from=1&amp;to=3"' in page


def test_time_travel_errors_are_worded_as_the_service(browser, table) -> None:
    r = browser.get("/t/sales/versions/", {"as_of": "1970-01-01"})
    assert r.status_code == 400
    assert "before the earliest version available" in text(r)
    assert "version 0 at" in text(r)
    r = browser.get("/t/sales/versions/", {"as_of": "2999-01-01 00:00:00"})
    assert r.status_code == 400 and "after the latest commit" in text(r)
    r = browser.get("/t/sales/versions/", {"as_of": "last tuesday"})
    assert r.status_code == 400 and "is not a timestamp" in text(r)
    r = browser.get("/t/sales/versions/", {"as_of": ""})
    assert r.status_code == 400 and "Give a timestamp" in text(r)
    # the rest of the tab is still there
    assert 'id="version-list"' in text(r) and 'href="/t/sales/v/3/"' in text(r)


def test_timeline_chart_marks_the_ict_boundary(browser, roots) -> None:
    t = registration.register_table("clock", str(ict_table(roots / "clock")))
    sync.sync_table(t.pk)
    page = text(browser.get("/t/clock/"))
    assert "In-Commit Timestamps" in page and "on since version 3" in page
    r = browser.get("/t/clock/history/")
    figures = browser.get("/t/clock/charts.json").json()
    figure = figures["timeline"]
    assert figure["layout"]["annotations"][0]["text"] == "ICT enabled at v3"
    assert figure["layout"]["shapes"][0]["x0"] == 3
    names = [trace["name"] for trace in figure["data"]]
    assert names[:3] == ["commit timestamp (effective)", "inCommitTimestamp", "file modification time"]
    assert figure["data"][1]["x"] == [3, 4, 5]
    # each row's timestamp source as the History table shows it, newest first
    rows = text(r).split('id="commits"', 1)[1].split("</tbody>", 1)[0].split('<tr id="v')[1:]
    sources = [re.search(r'<span class="badge src-(\w+)"[^>]*>([^<]*)</span>', row).groups() for row in rows]
    assert sources == [("ict", "ICT")] * 3 + [("file", "file")] * 3
    assert figures["files"]["data"][0]["y"] == [1, 2, 3, 3, 4, 5]


# --- version page ----------------------------------------------------------------------


def test_version_page(browser, table, monkeypatch) -> None:
    r = browser.get("/t/sales/v/1/")
    page = text(r)
    assert r.status_code == 200
    assert 'Sales <span class="muted">at version 1</span>' in page
    schema = [row["name"] for row in r.context["schema"]]
    assert schema == ["x", "p"]
    assert "<code>long</code>" in page and "<code>string</code>" in page
    assert '<p id="partitioning"><code>p</code></p>' in page
    assert "Reader version</dt><dd>1</dd>" in page and "Writer version</dt><dd>2</dd>" in page
    assert "&quot;operation&quot;: &quot;WRITE&quot;" in page  # commitInfo pretty-printed
    assert "Files 1–3 of 3." in page and "p=a/" in page and "{&quot;p&quot;: &quot;a&quot;}" in page
    assert 'href="/t/sales/v/0/"' in page and 'href="/t/sales/v/2/"' in page
    assert 'href="/t/sales/diff/?from=0&amp;to=1"' in page
    monkeypatch.setattr(versions_views, "FILES_PAGE_SIZE", 2)
    r = browser.get("/t/sales/v/1/", {"page": 2})
    assert "Files 3–3 of 3." in text(r) and len(r.context["page_obj"].object_list) == 1


def test_unknown_table_and_version_are_404(browser, table) -> None:
    r = browser.get("/t/nope/")
    assert r.status_code == 404 and "There is no table &#x27;nope&#x27;" in text(r)
    assert browser.get("/t/nope/v/0/").status_code == 404
    r = browser.get("/t/sales/v/99/")
    assert r.status_code == 404
    assert "version 99 not found" in text(r) and "Traceback" not in text(r)


def test_broken_table_shows_an_error_not_a_traceback(browser, table) -> None:
    import shutil

    shutil.rmtree(table.location + "/_delta_log")
    r = browser.get("/t/sales/v/1/")
    # the same status as the API's (tables.services.errors.DELTA_STATUS): the log cannot be read
    assert r.status_code == 422 and "not a Delta table" in text(r)
    r = browser.get("/t/sales/versions/", {"as_of": "2020-01-01"})
    assert r.status_code == 400 and "not a Delta table" in text(r)
    r = browser.get("/t/sales/history/")
    assert r.status_code == 200 and "Commits 1–4 of 4" in text(r)  # the cached history still shows


# --- diff page -------------------------------------------------------------------------


def test_diff_page(browser, table) -> None:
    r = browser.get("/t/sales/diff/", {"from": 0, "to": 3})
    page = text(r)
    assert r.status_code == 200
    res = r.context["result"]
    assert (res["filesAdded"]["count"], res["filesRemoved"]["count"]) == (2, 1)
    assert 'Files added</span><span class="value">2</span>' in page
    assert 'Files removed</span><span class="value">1</span>' in page
    assert "p=b" in page and "&quot;p&quot;" not in page  # the removed partition, as people write it
    assert "No schema changes." in page and "No property changes." in page
    assert [c["version"] for c in r.context["commits"]] == [1, 2, 3]
    assert 'Commits in between <span class="muted">(3)</span>' in page and "DELETE" in page


def test_diff_defaults_and_errors(browser, table) -> None:
    r = browser.get("/t/sales/diff/")
    assert r.status_code == 200 and (r.context["v_from"], r.context["v_to"]) == (2, 3)
    r = browser.get("/t/sales/diff/", {"from": 3, "to": 1})
    assert r.status_code == 400 and "&#x27;from&#x27; (3) must not be after &#x27;to&#x27; (1)" in text(r)
    r = browser.get("/t/sales/diff/", {"from": "x", "to": 1})
    assert r.status_code == 400 and "must be a version number" in text(r)
    r = browser.get("/t/sales/diff/", {"from": 0, "to": 42})
    assert r.status_code == 404 and "version 42 not found" in text(r)


def test_diff_shows_schema_properties_and_protocol_changes(browser, roots) -> None:
    import deltalake
    import pyarrow as pa

    path = history_table(roots / "clock")  # v0..v3
    deltalake.write_deltalake(
        str(path), pa.table({"x": [9], "p": ["a"], "y": ["new"]}), mode="append", schema_mode="merge"
    )
    enable_ict(str(path))  # v5
    t = registration.register_table("clock", str(path))
    sync.sync_table(t.pk)
    r = browser.get("/t/clock/diff/", {"from": 3, "to": 5})
    page = text(r)
    assert [c["column"] for c in r.context["schema_changes"]] == ["y"]
    assert '<tr class="change-added"><td><code>y</code></td><td>added</td>' in page
    keys = {c["key"] for c in r.context["property_changes"]}
    assert {"delta.enableInCommitTimestamps", "delta.inCommitTimestampEnablementVersion"} <= keys
    protocol = page.split('id="protocol-changes"', 1)[1].split("</table>", 1)[0]
    assert (
        "<td><code>minWriterVersion</code></td><td>changed</td><td><code>2</code></td><td><code>7</code></td>"
        in protocol
    )
    features = re.search(
        r"<td><code>writerFeatures</code></td><td>\w+</td><td><code>[^<]*</code></td><td><code>([^<]*)</code>", protocol
    )
    assert "inCommitTimestamp" in features.group(1)


# --- registering -----------------------------------------------------------------------


def test_register_form_registers_and_starts_a_sync(browser, roots) -> None:
    path = history_table(roots / "orders")
    page = text(browser.get("/tables/register/"))
    assert '<label for="id_name">Name</label>' in page and "autofocus" in page
    r = browser.post("/tables/register/", {"name": "Orders 2024", "location": str(path), "description": "d"})
    table = Table.objects.get()
    job = Job.objects.get()
    assert r.status_code == 302 and r["Location"] == f"/t/orders-2024/?job={job.pk}"
    assert (table.name, table.slug, job.kind, job.table_id) == ("Orders 2024", "orders-2024", "sync", table.pk)
    assert table.created_by.username == "ana"


def test_register_form_errors_save_nothing(browser, roots, tmp_path_factory) -> None:
    import deltalake
    import pyarrow as pa

    outside = tmp_path_factory.mktemp("elsewhere") / "t"
    deltalake.write_deltalake(str(outside), pa.table({"x": [1]}))
    r = browser.post("/tables/register/", {"name": "o", "location": str(outside)})
    assert r.status_code == 400 and "is outside the allowed roots" in text(r)
    assert 'value="o"' in text(r)  # the form keeps what was typed
    (roots / "plain").mkdir()
    r = browser.post("/tables/register/", {"name": "o", "location": str(roots / "plain")})
    assert r.status_code == 400 and "is not a Delta table (no _delta_log/ directory)" in text(r)
    assert r.context["form"].fields["location"].widget.attrs.get("autofocus")
    r = browser.post("/tables/register/", {"name": "", "location": str(roots / "plain")})
    assert r.status_code == 400 and "This field is required." in text(r)
    r = browser.post("/tables/register/", {"name": "!!!", "location": str(roots / "plain")})
    assert "The name needs at least one letter or digit." in text(r)
    assert Table.objects.count() == 0 and Job.objects.count() == 0
    history_table(roots / "a")
    registration.register_table("A", str(roots / "a"))
    r = browser.post("/tables/register/", {"name": "A", "location": str(roots / "a")})
    assert r.status_code == 400 and "A table named &#x27;A&#x27; is registered already." in text(r)
    assert Table.objects.count() == 1 and Job.objects.count() == 0


def test_user_without_a_role_cannot_register_or_sync(client, django_user_model, table) -> None:
    client.force_login(django_user_model.objects.create_user("visitor", password="x-secret-9"))
    r = client.get("/tables/register/")
    assert r.status_code == 403 and "needs the analyst or approver role" in text(r)
    r = client.post("/tables/register/", {"name": "n", "location": table.location})
    assert r.status_code == 403
    assert client.post("/t/sales/sync/").status_code == 403
    assert Table.objects.count() == 1 and Job.objects.count() == 0
    page = text(client.get("/"))
    assert "Sales" in page and "Register a table" not in page and "Sync now" not in page
    assert client.get("/t/sales/").status_code == 200  # browsing needs no role


def test_a_sessions_roles_and_sign_in_are_read_afresh_on_each_request(client, django_user_model, table) -> None:
    from django.contrib.auth.models import Group
    from django.contrib.sessions.models import Session
    from django.utils import timezone

    user = django_user_model.objects.create_user("later", password="x-secret-9")
    client.force_login(user)
    assert client.get("/tables/register/").status_code == 403
    user.groups.add(Group.objects.get_or_create(name="analyst")[0])  # an administrator grants the role
    assert client.get("/tables/register/").status_code == 200
    assert "Register a table" in text(client.get("/"))
    user.groups.clear()
    assert client.get("/tables/register/").status_code == 403
    django_user_model.objects.filter(pk=user.pk).update(is_active=False)  # deactivated: signed out
    assert client.get("/t/sales/")["Location"].startswith("/accounts/login/")
    django_user_model.objects.filter(pk=user.pk).update(is_active=True)
    client.force_login(user)
    assert client.get("/t/sales/").status_code == 200
    Session.objects.update(expire_date=timezone.now())  # expired on the server: signed out
    assert client.get("/t/sales/")["Location"].startswith("/accounts/login/")


def test_plotly_is_a_static_file_from_the_package(browser) -> None:
    from django.contrib.staticfiles.storage import staticfiles_storage

    r = browser.get("/vendor/plotly.min.js")  # the former address
    assert r.status_code == 302 and r["Location"] == staticfiles_storage.url("vendor/plotly.min.js")
    r = browser.get(r["Location"])
    assert r.status_code == 200 and r["Content-Type"].startswith("text/javascript")
    head = b"".join(r.streaming_content)[:2000]
    assert b"plotly" in head.lower()


def test_favicon_is_served(client) -> None:
    r = client.get("/favicon.ico")  # no sign-in: browsers ask for it on the sign-in page too
    assert r.status_code == 302
    icon = client.get(r["Location"])
    assert icon.status_code == 200 and icon["Content-Type"] == "image/svg+xml"
    assert b"<svg" in b"".join(icon.streaming_content)


def test_out_of_range_numbers_are_errors_not_crashes(browser, table) -> None:
    huge = str(2**70)
    r = browser.get("/t/sales/history/", {"version_from": huge})
    assert r.status_code == 200 and "Ensure this value is less than or equal to" in text(r)
    r = browser.get("/t/sales/diff/", {"from": "0", "to": huge})
    assert r.status_code == 400 and "must be a version number" in text(r)
    r = browser.get("/t/sales/diff/", {"from": "²", "to": "3"})
    assert r.status_code == 400
    assert browser.get(f"/t/sales/v/{huge}/").status_code == 404
    assert browser.get(f"/jobs/{huge}.json").status_code == 404
    assert browser.get("/t/sales/", {"job": huge}).status_code == 200


def test_empty_register_post_shows_required_fields(browser, roots) -> None:
    r = browser.post("/tables/register/", {})
    assert r.status_code == 400 and text(r).count("This field is required.") == 2


@pytest.mark.django_db(transaction=True)
def test_sync_now_with_the_broker_down_says_so(browser, table, monkeypatch) -> None:
    """Outside a transaction (as in production) the job is enqueued during the request."""
    from tables import tasks

    def unreachable(*args, **kwargs):
        raise ConnectionRefusedError("no broker")

    monkeypatch.setattr(tasks.sync_table, "apply_async", unreachable)
    r = browser.post("/t/sales/sync/")
    page = text(browser.get(r["Location"]))
    assert "The sync of Sales could not start: the task queue is unreachable" in page
    assert 'data-status="failed"' in page
    assert Job.objects.get().status == "failed"


def test_chart_data_needs_sign_in_and_a_known_table(browser, table) -> None:
    from django.test import Client

    r = Client().get("/t/sales/charts.json")
    assert r.status_code == 302 and "/accounts/login/" in r["Location"]
    r = browser.get("/t/nope/charts.json")
    assert (
        r.status_code == 404 and r.json()["error"]["code"] == "not_found" and "no table" in r.json()["error"]["message"]
    )
