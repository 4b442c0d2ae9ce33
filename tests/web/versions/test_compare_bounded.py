"""The Compare tab over a wide range stays a page one can read: a table of a few hundred
versions written by delta-rs (each append a file in a partition of its own, then an overwrite),
compared across its whole history. Every long list is shown 50 rows at a time with its count
and links to the other rows, partitions fold after the first ten, the rows read on Spark come
before the rest under a table of contents, and the page says what each of change data and the
row diff covers (they differ by the first version's own changes)."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tables.models import Job, JobStatus
from tables.services.catalog import registration
from tables.services.sync import store as sync
from tables.web.tabs import compare

deltalake = pytest.importorskip("deltalake")

APPENDS = 300  # versions 0..299, each a file in partition p=<i>; version 300 overwrites them all


def write_wide_table(path: Path) -> Path:
    """APPENDS appends by delta-rs, each a row in a partition of its own, then an overwrite."""
    for i in range(APPENDS):
        deltalake.write_deltalake(str(path), pa.table({"id": [i], "p": [str(i)]}), mode="append", partition_by=["p"])
    deltalake.write_deltalake(str(path), pa.table({"id": [-1], "p": ["x"]}), mode="overwrite", partition_by=["p"])
    return path


@pytest.fixture(scope="module")
def wide_dir(tmp_path_factory):
    return write_wide_table(tmp_path_factory.mktemp("wide") / "wide")


@pytest.fixture
def wide(wide_dir, settings, db):
    settings.DELTAWEB_ALLOWED_ROOTS = [str(wide_dir.parent)]
    table = registration.register_table("Wide", str(wide_dir))
    sync.sync_table(table.pk)
    table.refresh_from_db()
    assert table.last_synced_version == APPENDS
    return table


def rows_of(html: str, table_id: str) -> int:
    """How many body rows the table with this id has."""
    m = re.search(rf'<table[^>]*id="{table_id}".*?<tbody>(.*?)</tbody>', html, re.S)
    return 0 if m is None else m.group(1).count("<tr")


pytestmark = pytest.mark.django_db


def test_a_wide_range_is_shown_a_page_at_a_time(browser, wide) -> None:
    r = browser.get("/t/wide/diff/", {"from": 0, "to": APPENDS - 1})
    html = r.content.decode()
    assert r.status_code == 200
    # 299 files added, in 299 partitions; 299 commits: 50 of each rendered
    assert rows_of(html, "files-added") == compare.PAGE
    assert rows_of(html, "diff-commits") == compare.PAGE
    assert html.count("<tr") < 3 * compare.PAGE + 30  # the whole page, headers and small tables included
    assert "Showing 1–50 of 299." in html
    assert 'href="?from=0&amp;to=299&amp;added_page=2#added-title"' in html
    assert 'href="?from=0&amp;to=299&amp;commits_page=2#commits-title"' in html
    # the core lists 200 partitions: ten shown, the rest folded
    assert "Partitions touched: 299" in html and "Show 190 more partitions" in html
    assert "The first 200 of 299 partitions are listed." in html
    # all commits of the range in the History tab, filtered
    assert "/t/wide/history/?version_from=1&amp;version_to=299&amp;sort=version" in html

    # the rows section and a table of contents come before the long lists
    assert html.index('id="rows"') < html.index('id="added-title"') < html.index('id="commits-title"')
    assert '<nav class="card toc" aria-label="On this page">' in html
    for anchor in ("#rows", "#schema-title", "#added-title", "#removed-title", "#commits-title"):
        assert f'href="{anchor}"' in html
    # what each kind of row job covers, said next to its button
    assert "<strong>Change data</strong>: the changes made by versions 0 through 299" in html
    assert "version 0's own changes are included" in html
    assert "<strong>Row diff</strong>: version 0's rows compared with version 299's" in html
    assert "by versions 1 through 299; version 0's own changes are not included" in html


def test_the_next_pages_of_files_and_commits(browser, wide) -> None:
    html = browser.get(
        "/t/wide/diff/", {"from": 0, "to": APPENDS - 1, "added_page": 6, "commits_page": 2}
    ).content.decode()
    assert rows_of(html, "files-added") == APPENDS - 1 - 5 * compare.PAGE  # the last 49
    assert "Showing 251–299 of 299." in html
    assert rows_of(html, "diff-commits") == compare.PAGE
    assert "Showing 51–100 of 299." in html
    commits = re.findall(r'<td class="num"><a href="/t/wide/v/(\d+)/">', html)
    assert commits[:2] == ["51", "52"]
    # removed files of the overwrite: version 100's 101 files, a page of them
    html = browser.get("/t/wide/diff/", {"from": 100, "to": APPENDS, "removed_page": 3}).content.decode()
    assert rows_of(html, "files-removed") == 1 and "Showing 101–101 of 101." in html
    assert rows_of(html, "files-added") == 1  # the overwrite's one file: no page links
    # a page number past the list or not a number is the list's start or its end, never an error
    for bad in ("0", "-1", "x", "99999999999"):
        assert browser.get("/t/wide/diff/", {"from": 0, "to": 3, "commits_page": bad}).status_code == 200


def test_change_data_counts_per_version_are_paged(browser, wide, tmp_path) -> None:
    """A change-data job over 700 versions counts each version and change type: a row each,
    50 on the page. (The job's result is written here; Spark runs it in tests/spark.)"""
    result = tmp_path / "changes.parquet"
    pq.write_table(pa.table({"id": [1], "_change_type": ["insert"], "_commit_version": [3]}), result)
    counts = [{"version": v, "changeType": "insert", "rows": 1} for v in range(3, 703)]
    job = Job.objects.create(
        kind="changes",
        table=wide,
        status=JobStatus.SUCCEEDED,
        params={"from": 3, "to": 9},
        result={"path": str(result), "counts": counts},
    )
    html = browser.get("/t/wide/diff/", {"from": 3, "to": 9, "rowjob": job.pk}).content.decode()
    assert rows_of(html, "row-counts") == compare.PAGE
    assert "Showing 1–50 of 700." in html
    assert "counts_page=2#change-counts" in html
    assert "Change data: the changes made by versions 3 through 9 (version 3's own changes included)." in html
    html = browser.get("/t/wide/diff/", {"from": 3, "to": 9, "rowjob": job.pk, "counts_page": 14}).content.decode()
    assert rows_of(html, "row-counts") == compare.PAGE and "Showing 651–700 of 700." in html
