"""Reachability where users decide: the VACUUM forecast (API, table page, `delta` CLI), the
"readable" column of the history and the horizon bands of the timeline chart. The forecast is
checked against a real VACUUM by delta-rs on a copy of the table."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from tables.delta.history.reachability.compute import reachability
from tables.models import Table

from ..pages.test_api import assert_error, make_user, token_client

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable, write_deltalake  # noqa: E402

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[3]


def _write(path: Path, n: int = 6) -> None:
    for i in range(n):
        mode = "overwrite" if i in (2, 4) else "append"
        write_deltalake(str(path), pa.table({"id": pa.array([i, i + 100], pa.int64())}), mode=mode)
    time.sleep(0.05)  # a VACUUM with retention 0 "now" must lie after every removal


def _broken_by_real_vacuum(path: Path, tmp_path: Path) -> list[int]:
    """The readable versions that stop being readable when delta-rs vacuums a copy, newest first."""
    copy = tmp_path / "copy"
    shutil.copytree(path, copy)
    now = int(time.time() * 1000)
    before = {v.version for v in reachability(str(copy), now).versions if v.readable}
    DeltaTable(str(copy)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    after = reachability(str(copy), now)
    return sorted((v.version for v in after.versions if not v.readable and v.version in before), reverse=True)


@pytest.fixture
def fresh(settings, tmp_path) -> Table:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = tmp_path / "fresh"
    _write(path)
    return Table.objects.create(name="fresh", slug="fresh", location=str(path))


# --- the forecast: API ---------------------------------------------------------------------------


def test_api_forecast_matches_a_real_vacuum(fresh, tmp_path) -> None:
    api = token_client(make_user("reader"))
    body = api.get(f"/api/tables/{fresh.pk}/reachability/?vacuumRetention=0 hours").json()
    expected = _broken_by_real_vacuum(Path(fresh.location), tmp_path)
    assert expected  # the two overwrites removed files that versions 0-3 need
    forecast = body["vacuumForecast"]
    assert forecast == {"retentionMs": 0, "count": len(expected), "breaksVersions": expected, "truncated": False}
    assert body["latestVersion"] == 5 and body["count"] == 6  # the page itself is unchanged
    week = api.get(f"/api/tables/{fresh.pk}/reachability/?vacuumRetention=interval 1 week").json()
    assert week["vacuumForecast"]["breaksVersions"] == [] and week["vacuumForecast"]["retentionMs"] == 7 * 86_400_000
    assert "vacuumForecast" not in api.get(f"/api/tables/{fresh.pk}/reachability/").json()


@pytest.mark.parametrize("raw", ["", "seven days", "7 dayz", "-1 days", "x" * 500])
def test_api_forecast_refuses_an_unreadable_retention(fresh, raw) -> None:
    api = token_client(make_user("reader"))
    assert_error(api.get(f"/api/tables/{fresh.pk}/reachability/", {"vacuumRetention": raw}), 400, "invalid")


def test_schema_documents_the_retention_parameter(fresh) -> None:
    schema = token_client(make_user("reader")).get("/api/schema/?format=json")
    paths = json.loads(schema.content)["paths"] if schema.status_code == 200 else None
    if paths is None:
        pytest.skip("schema endpoint answered " + str(schema.status_code))
    get = paths["/api/tables/{id}/reachability/"]["get"]
    assert "vacuumRetention" in {p["name"] for p in get["parameters"]}


# --- the forecast: the table page ----------------------------------------------------------------


def test_page_forecast_lists_the_versions_a_real_vacuum_breaks(fresh, client, tmp_path) -> None:
    client.force_login(make_user("viewer"))
    html = client.get(f"/t/{fresh.slug}/versions/").content.decode()
    assert 'id="vacuum-forecast"' in html and 'name="vacuum_retention"' in html and 'id="vf-answer"' not in html
    html = client.get(f"/t/{fresh.slug}/versions/", {"vacuum_retention": "0 hours"}).content.decode()
    expected = _broken_by_real_vacuum(Path(fresh.location), tmp_path)
    assert 'id="vf-answer"' in html and f"{len(expected)} readable versions</strong>" in html
    listed = html.split('id="vf-versions">', 1)[1].split("</p>", 1)[0]
    for v in expected:
        assert f"/v/{v}/" in listed or f">{v}</a>" in listed
    html = client.get(f"/t/{fresh.slug}/versions/", {"vacuum_retention": "7 days"}).content.decode()
    assert "would leave every readable version readable" in html


@pytest.mark.parametrize("raw", ["", "a fortnight", "<script>1 day"])
def test_page_forecast_error_is_on_the_form(fresh, client, raw) -> None:
    client.force_login(make_user("viewer"))
    resp = client.get(f"/t/{fresh.slug}/versions/", {"vacuum_retention": raw})
    assert resp.status_code == 200
    html = resp.content.decode()
    assert 'id="vf-error"' in html and "7 days" in html and "<script>1" not in html


# --- the forecast: the CLI -----------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tables.delta.cli", "reachability", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_cli_forecast_matches_a_real_vacuum(settings, tmp_path) -> None:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = tmp_path / "t"
    _write(path)
    expected = _broken_by_real_vacuum(path, tmp_path)
    proc = _cli(str(path), "--vacuum-retention", "0 hours", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["vacuumForecast"] == {"retentionMs": 0, "breaksVersions": expected}
    text = _cli(str(path), "--vacuum-retention", "0 hours")
    assert text.returncode == 0, text.stderr
    assert f"would make {len(expected)} readable versions unreadable: {', '.join(map(str, expected))}" in text.stdout
    bad = _cli(str(path), "--vacuum-retention", "soon")
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and "not an interval" in bad.stderr


# --- the "readable" column of the history --------------------------------------------------------


@pytest.fixture
def synced_vacuumed(settings, tmp_path) -> Table:
    """v0..v5 (two overwrites), vacuumed with retention 0 (v6, v7), then synced."""
    from tables.services.catalog import registration
    from tables.services.sync import store as sync

    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    path = tmp_path / "vac"
    _write(path)
    DeltaTable(str(path)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    t = registration.register_table("Vac", str(path), "")
    sync.sync_table(t.pk)
    t.refresh_from_db()
    return t


def _column(html: str) -> dict[int, str]:
    """version -> the text of its "readable" cell."""
    import re

    out = {}
    body = html.split('class="grid history"', 1)[1].split("</tbody>", 1)[0]
    for row in re.split(r"<tr[^>]*>", body)[2:]:
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        version = int(re.sub(r"<[^>]+>", " ", cells[0]).split()[0])
        out[version] = " ".join(re.sub(r"<[^>]+>", " ", cells[1]).split())
    return out


def test_history_column_says_which_versions_can_be_read(synced_vacuumed, client, monkeypatch) -> None:
    from django.core.cache import cache

    from tables.web.tabs import frame as table_tabs

    cache.clear()
    calls = []
    real = table_tabs.table_reachability
    monkeypatch.setattr(table_tabs, "table_reachability", lambda *a, **k: calls.append(a) or real(*a, **k))
    client.force_login(make_user("viewer"))
    html = client.get(f"/t/{synced_vacuumed.slug}/history/").content.decode()
    assert len(calls) == 1  # once for the whole page, not per row
    column = _column(html)
    core = {v.version: v for v in reachability(synced_vacuumed.location, int(time.time() * 1000)).versions}
    assert set(column) == set(core) and len(column) == 8
    for version, cell in column.items():
        v = core[version]
        if v.readable:
            assert cell == "✓", (version, cell)
        else:
            n = v.missing_count
            assert v.reason == "files_missing" and cell == f"{n} file{'' if n == 1 else 's'} vacuumed", (version, cell)
    assert any(not v.readable for v in core.values()) and column[7] == "✓"
    client.get(f"/t/{synced_vacuumed.slug}/history/")
    assert len(calls) == 1  # the rendered history is cached


def test_pages_of_a_long_log_do_not_wait_for_reachability(synced_vacuumed, client, settings, monkeypatch) -> None:
    """Above the inline limit the page answers at once, says the column is being computed and
    asks a worker (once, whatever the number of pages); the web process computes nothing. Once
    the worker has stored its answer, every page shows it, the same as the core's."""
    from tables.services.jobs import lifecycle as jobs
    from tables.services.versions import reachability as app_reach

    sent, computed = [], []
    monkeypatch.setattr(jobs, "send", lambda name, *args, **_kw: sent.append((name, args)))
    real_compute = app_reach._compute
    monkeypatch.setattr(app_reach, "_compute", lambda *a: computed.append(a) or real_compute(*a))
    settings.DELTAWEB_REACHABILITY_INLINE_VERSIONS = 5  # v7 is "long" here
    client.force_login(make_user("viewer"))
    api = token_client(make_user("reader"))
    first = client.get(f"/t/{synced_vacuumed.slug}/history/").content.decode()
    assert 'id="reach-pending"' in first and set(_column(first).values()) == {""}
    overview = client.get(f"/t/{synced_vacuumed.slug}/").content.decode()
    assert 'id="reach-pending"' in overview
    assert [s for s in sent if s[0] == app_reach.COMPUTE_TASK] == [(app_reach.COMPUTE_TASK, (synced_vacuumed.pk, None))]
    assert computed == []
    assert app_reach.compute_in_worker(synced_vacuumed.pk)  # what the worker runs
    assert len(computed) == 1
    html = client.get(f"/t/{synced_vacuumed.slug}/history/").content.decode()
    column = _column(html)
    core = {v.version: v for v in reachability(synced_vacuumed.location, int(time.time() * 1000)).versions}
    assert 'id="reach-pending"' not in html and len(column) == 8
    assert all((cell == "✓") == core[v].readable for v, cell in column.items())
    overview = client.get(f"/t/{synced_vacuumed.slug}/").content.decode()
    assert 'id="reach-summary"' in overview and 'id="reach-pending"' not in overview
    from tables.delta.history.timestamps import commit_times

    t0 = commit_times(synced_vacuumed.location).timestamp(0)[0]
    body = api.get(f"/api/tables/{synced_vacuumed.pk}/resolve/?timestamp={t0}").json()
    assert body["version"] == 0 and body["reachability"]["readable"] is core[0].readable is False


def test_reach_words() -> None:
    from tables.web.tabs.commit_rows import reach_text

    gone = {"readable": False, "restorable": False, "reason": "files_missing", "missingFiles": {"count": 1}}
    assert reach_text(gone)["text"] == "1 file vacuumed"
    assert reach_text({**gone, "missingFiles": {"count": 3}})["text"] == "3 files vacuumed"
    assert reach_text({"readable": False, "reason": "log_expired"})["text"] == "log expired"
    old = reach_text({"readable": True, "reason": "beyond_retention"})
    assert old["ok"] and old["text"] == "beyond retention"
    fine = reach_text({"readable": True, "reason": None})
    assert fine["ok"] and fine["text"] == ""
    assert reach_text(None) is None


# --- the horizon bands of the timeline chart -----------------------------------------------------


def _bands(figure: dict) -> list[tuple[str, int, int]]:
    out = []
    for shape in figure["layout"].get("shapes", []):
        if shape.get("name", "").startswith("reach:"):
            assert shape["type"] == "rect" and shape["yref"] == "paper"
            out.append((shape["name"].split(":")[1], int(shape["x0"] + 0.5), int(shape["x1"] - 0.5)))
    return out


def test_chart_bands_match_the_reachability_answer(synced_vacuumed, client) -> None:
    client.force_login(make_user("viewer"))
    body = client.get(f"/t/{synced_vacuumed.slug}/charts.json").json()
    bands = _bands(body["timeline"])
    core = {v.version: v for v in reachability(synced_vacuumed.location, int(time.time() * 1000)).versions}
    covered = []
    for state, first, last in bands:
        for v in range(first, last + 1):
            assert core[v].readable == (state in ("readable", "beyond_retention")), (v, state)
            if state == "files_missing":
                assert core[v].reason == "files_missing"
            covered.append(v)
    assert covered == sorted(core)  # every version once, oldest first
    assert all(a[0] != b[0] or a[2] + 1 != b[1] for a, b in itertools.pairwise(bands))  # merged
    assert {s for s, _, _ in bands} == {"readable", "files_missing"}
    legend = {t["name"] for t in body["timeline"]["data"] if t.get("legendgroup") == "reachability"}
    assert legend == {"readable", "files missing (vacuumed)"}


def test_bands_of_a_long_table_are_few() -> None:
    from tables.delta.history.reachability.compute import Reachability, VersionReach
    from tables.delta.history.reachability.runs import ReachRuns
    from tables.web.base.charts import _band_shapes, reachability_bands

    def entry(v: int) -> VersionReach:
        if v < 100:
            return VersionReach(v, False, False, "log_expired", timestamp=v)
        if v < 4000:
            return VersionReach(v, False, False, "files_missing", 1, ["a.parquet"], timestamp=v)
        if v < 9000:
            return VersionReach(v, True, True, "beyond_retention", timestamp=v)
        return VersionReach(v, True, True, None, timestamp=v)

    entries = ReachRuns.of(Reachability(9999, 0, 0, [entry(v) for v in range(9999, -1, -1)]))
    assert len(entries.starts) == 4  # 10,000 versions kept as 4 runs
    runs = reachability_bands(entries, 0, 9999)
    assert runs == [
        ("log_expired", 0, 99),
        ("files_missing", 100, 3999),
        ("beyond_retention", 4000, 8999),
        ("readable", 9000, 9999),
    ]
    assert reachability_bands(entries, 5000, 9500) == [("beyond_retention", 5000, 8999), ("readable", 9000, 9500)]
    shapes, legend = _band_shapes(runs)
    assert len(shapes) == 4 and len(legend) == 4
