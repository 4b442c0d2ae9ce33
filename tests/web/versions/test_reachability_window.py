"""The reachability answer as pages read it when the clock moves: after its window has rolled
over, the History page and the API show the answer of the new time (versions leaving the
deleted-file retention say so, a pinned version still reads from its pin) without the core
computing anything again; lists of versions get counts, and the missing files' names are read
only for the one version whose entry lists them."""

from __future__ import annotations

import re
import time

import pytest

from tables.delta.history.reachability.compute import DAY_MS, reachability
from tables.services.versions import reachability as app_reach
from tests.web.versions.test_kept_version_pages import LOST, PIN_NAME, PINNED, kept  # noqa: F401 (the fixture)

pytestmark = pytest.mark.django_db


def _column(html: str) -> dict[int, str]:
    """version -> the text of its "readable" cell (rows of another kind, such as a VACUUM's
    removed files, left out)."""
    out = {}
    body = html.split('class="grid history"', 1)[1].split("</tbody>", 1)[0]
    for row in re.split(r"<tr[^>]*>", body)[2:]:
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        first = re.sub(r"<[^>]+>", " ", cells[0]).split() if cells else []
        if len(cells) > 1 and first and first[0].isdigit():
            out[int(first[0])] = " ".join(re.sub(r"<[^>]+>", " ", cells[1]).split())
    return out


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every call into the core's computation of an answer (the state brought up to date, the
    map of every version), counted: the calls still run."""
    calls: list[str] = []
    for name in ("answer", "update_state"):
        real = getattr(app_reach, name)
        monkeypatch.setattr(app_reach, name, lambda *a, _n=name, _r=real, **k: calls.append(_n) or _r(*a, **k))
    return calls


def _cell(entry, pinned: bool) -> str:
    """The History column's words for the core's entry (tables.web.tabs.commit_rows.reach_text)."""
    if pinned:
        return f"✓ kept by pin {PIN_NAME}"
    if entry.readable:
        return "✓ beyond retention" if entry.reason == "beyond_retention" else "✓"
    n = entry.missing_count
    return f"{n} file{'' if n == 1 else 's'} vacuumed"


def test_a_rolled_over_window_is_derived_without_computing_again(kept, browser, monkeypatch) -> None:  # noqa: F811
    table, _before, pin, latest = kept
    first = _column(browser.get(f"/t/{table.slug}/history/").content.decode())
    assert first[latest] == "✓" and first[PINNED] == f"✓ kept by pin {PIN_NAME}"
    assert not any("beyond retention" in c for c in first.values())  # every commit is minutes old
    calls = _counted(monkeypatch)
    later = int(time.time() * 1000) + 8 * DAY_MS  # past the 7-day deleted-file retention
    monkeypatch.setattr(app_reach, "_now_ms", lambda: later)

    column = _column(browser.get(f"/t/{table.slug}/history/").content.decode())
    core = {v.version: v for v in reachability(table.location, later).versions}
    assert column == {v: _cell(core[v], v == PINNED) for v in core}
    assert "✓ beyond retention" in column.values()  # the edge moved with the clock
    body = browser.get(f"/api/tables/{table.pk}/reachability/?limit=100").json()
    assert calls == []  # neither page computed anything: both derived the window
    expected = reachability(table.location, later).to_dict()["versions"]
    for got, want in zip(body["results"], expected, strict=True):
        read_from = {"pin": pin.pk, "name": PIN_NAME} if want["version"] == PINNED else None
        assert got == {**want, "readable": want["readable"] or read_from is not None, "readFrom": read_from}


def test_lists_count_missing_files_and_a_versions_entry_names_them(kept, browser, monkeypatch) -> None:  # noqa: F811
    table, _before, _pin, latest = kept
    read: list[int] = []
    real = app_reach._StoredNames.paths
    monkeypatch.setattr(app_reach._StoredNames, "paths", lambda self, v: read.append(v) or real(self, v))
    shown: list[dict] = []
    from tables.web.tabs import history as history_tab

    real_row = history_tab.history_row
    monkeypatch.setattr(
        history_tab, "history_row", lambda c, reach=None, *a, **k: shown.append(reach) or real_row(c, reach, *a, **k)
    )
    html = browser.get(f"/t/{table.slug}/history/").content.decode()
    assert _column(html)[LOST].endswith("vacuumed")
    core = {v.version: v for v in reachability(table.location, int(time.time() * 1000)).versions}
    lost = next(e for e in shown if e and e["version"] == LOST)
    assert lost["missingFiles"] == {"count": core[LOST].missing_count} and core[LOST].missing_count > 0
    assert read == []  # the History rows read no name

    entry = app_reach.version_reachability(table, LOST)
    assert entry["missingFiles"] == {"count": core[LOST].missing_count, "paths": core[LOST].missing_files}
    assert read == [LOST]  # the one version's names, read for it
    page = browser.get(f"/api/tables/{table.pk}/reachability/?offset={latest - LOST}&limit=1").json()
    assert page["results"][0]["version"] == LOST
    assert page["results"][0]["missingFiles"]["paths"] == core[LOST].missing_files
