"""The Overview's row count at the latest version: what delta-rs reads for a table it wrote,
the golden deletion-vector table's 35 rows, the footers when the log has no stats (said so),
"at least" when a file cannot be read, and never a wait on a long log (counted by a worker,
the page saying so meanwhile)."""

from __future__ import annotations

import re

import pytest

from tables.services.catalog import registration
from tables.services.sync import store as sync
from tables.services.versions import row_count as row_count_service
from tests.conftest import golden_path
from tests.core.test_row_count import strip_stats, written_by_delta_rs

deltalake = pytest.importorskip("deltalake")


def shown_rows(html: str) -> int | None:
    m = re.search(r'<dd id="row-count">.*?data-rows="(\d+)"', html, re.S)
    return None if m is None else int(m.group(1))


def register(name: str, path) -> None:
    table = registration.register_table(name, str(path))
    sync.sync_table(table.pk)


@pytest.mark.django_db
def test_the_overview_counts_rows_as_delta_rs_reads_them(browser, roots) -> None:
    path = written_by_delta_rs(roots / "orders")
    register("orders", path)
    html = browser.get("/t/orders/").content.decode()
    assert shown_rows(html) == len(deltalake.DeltaTable(str(path)).to_pyarrow_table()) == 92
    assert "Parquet footer" not in html

    # without stats in the log: the footers, and the page says so
    plain = written_by_delta_rs(roots / "plain")
    strip_stats(plain)
    register("plain", plain)
    html = browser.get("/t/plain/").content.decode()
    assert shown_rows(html) == 92
    files = len(deltalake.DeltaTable(str(plain)).file_uris())
    assert f"{files} files counted from their Parquet footers" in html


@pytest.mark.django_db
def test_deletion_vectors_are_taken_off(browser, settings, golden_copy, roots) -> None:
    golden_path("dv-partitioned-with-checkpoint")  # skips when the golden tables are absent
    register("dv", golden_copy("dv-partitioned-with-checkpoint"))
    assert shown_rows(browser.get("/t/dv/").content.decode()) == 35  # 50 rows, 15 deleted by vectors


@pytest.mark.django_db
def test_a_file_that_cannot_be_read_makes_it_at_least_never_zero(browser, roots) -> None:
    path = written_by_delta_rs(roots / "lost")
    strip_stats(path)
    for f in (path / "p=a").glob("*.parquet"):
        f.unlink()
    register("lost", path)
    html = browser.get("/t/lost/").content.decode()
    assert re.search(r'at least <span data-rows="\d+">', html)
    assert "could not be read" in html and shown_rows(html) > 0
    # every file gone: unknown, not 0
    gone = written_by_delta_rs(roots / "gone")
    strip_stats(gone)
    for f in gone.glob("p=*/*.parquet"):
        f.unlink()
    register("gone", gone)
    html = browser.get("/t/gone/").content.decode()
    assert shown_rows(html) is None and "unknown" in html.split('id="row-count"')[1][:300]


def test_a_long_log_is_counted_by_a_worker(browser, roots, settings, monkeypatch) -> None:
    """The sync asks a worker for the count; the page says it is being counted meanwhile and
    counts nothing itself; once the worker has stored it, the page shows it."""
    from tables.models import Table
    from tables.services.jobs import lifecycle as jobs

    sent = []
    monkeypatch.setattr(jobs, "send", lambda name, *args, **_kw: sent.append((name, *args)))
    settings.DELTAWEB_REACHABILITY_INLINE_VERSIONS = 1  # every log is long
    register("long", written_by_delta_rs(roots / "long"))
    table = Table.objects.get(name="long")
    assert (row_count_service.COUNT_TASK, table.pk) in sent
    html = browser.get("/t/long/").content.decode()
    assert "being counted; shown here when done" in html and 'data-pending="row-count"' in html
    assert shown_rows(html) is None
    assert sent.count((row_count_service.COUNT_TASK, table.pk)) == 1  # asked once, not again by the page
    assert row_count_service.count_in_worker(table.pk)  # what the worker runs
    assert shown_rows(browser.get("/t/long/").content.decode()) == 92
