"""Plotly figures for the table page, built from the cached Commit and Anomaly rows.

Figures are plain dicts ({"data": [...], "layout": {...}}) handed to the page with
`json_script` and drawn by static/tables/charts.js. Text from a table's log (operations,
anomaly details) is HTML-escaped here because plotly renders a subset of HTML in hover text.
"""

from __future__ import annotations

import html
from datetime import UTC, datetime
from typing import Any

from tables.delta.history.reachability.runs import ReachRuns
from tables.models import Anomaly, Commit, FileRemovalEvent, Table
from tables.services.errors import ServiceError
from tables.services.versions.reachability import table_reachability

# The charts draw at most this many of the newest versions.
MAX_POINTS = 20_000
# Above this many versions a trace is one line, no marker per version: markers would merge,
# and SVG draws one element per marker (17,600 of them took 2.1-5.4 s to draw at 10,000
# versions, the line alone 0.35 s: benchmarks/chart_draw.py). Every trace is SVG (`scatter`):
# plotly's WebGL traces need 'unsafe-eval', which the app's CSP forbids.
DENSE = 1_000
# The timeline marks at most this many files-removed events (the newest).
MAX_REMOVALS = 500
# Above this many versions the timeline gets a range slider.
RANGESLIDER_FROM = 50

_EFFECTIVE = "#2563eb"
_ICT = "#16a34a"
_FILE = "#9ca3af"
_ANOMALY = "#dc2626"
_REMOVAL = "#ea580c"


def plot_time(ms: int | None) -> str | None:
    """A plotly date string (UTC, millisecond precision); plotly ignores zone suffixes."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _layout(title: str | None, ytitle: str, ytype: str | None = None) -> dict[str, Any]:
    yaxis: dict[str, Any] = {"title": {"text": ytitle}, "automargin": True}
    if ytype:
        yaxis["type"] = ytype
    layout: dict[str, Any] = {
        "xaxis": {"title": {"text": "version"}, "tickformat": "d", "automargin": True},
        "yaxis": yaxis,
        "margin": {"l": 60, "r": 20, "t": 70, "b": 50},
        "height": 360,
        "hovermode": "closest",
        # above the plot: below it, the legend ran into the axis title and the range slider
        "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "#fafafa",
    }
    if title:
        layout["title"] = {"text": title, "x": 0, "font": {"size": 15}}
    return layout


def _rows(table: Table) -> tuple[list[dict[str, Any]], bool]:
    qs = Commit.objects.filter(table=table).order_by("-version")
    rows = list(
        qs.values(
            "version",
            "timestamp",
            "timestamp_source",
            "in_commit_timestamp",
            "file_modification_time",
            "adjusted",
            "operation",
            "num_files",
            "size_bytes",
        )[: MAX_POINTS + 1]
    )
    truncated = len(rows) > MAX_POINTS
    rows = rows[:MAX_POINTS]
    rows.reverse()
    return rows, truncated


# Long on purpose: one plotly figure declared whole (traces, axes, annotations, layout);
# split, its parts would only be read together anyway.
def timeline_figure(
    table: Table,
    rows: list[dict[str, Any]],
    anomalies: list[dict[str, Any]],
    reach: ReachRuns | None = None,
    removals: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Effective commit timestamp per version, ICT and file-time traces, the ICT boundary
    as a labelled vertical line, anomalies as red crosses, files removed outside the log
    (the sync's FileRemovalEvent rows) as markers after the commit they were noticed after
    and, given the reachability answer, shaded bands for which versions can still be read."""
    versions = [r["version"] for r in rows]
    by_version = {r["version"]: r for r in rows}
    marked = [a for a in anomalies if a["version"] in by_version]
    anomaly_text: dict[int, str] = {}
    for a in marked:  # several anomalies of one version share its hover line
        text = html.escape(f"{a['kind']}: {a['detail']}")[:300]
        anomaly_text[a["version"]] = f"{anomaly_text[a['version']]}; {text}" if a["version"] in anomaly_text else text
    dense = len(rows) > DENSE
    effective = {
        "type": "scatter",
        "mode": "lines" if dense else "lines+markers",
        "name": "commit timestamp (effective)",
        "x": versions,
        "y": [plot_time(r["timestamp"]) for r in rows],
        "customdata": [
            [
                "ICT" if r["timestamp_source"] == "ict" else "file" + (", monotonized" if r["adjusted"] else ""),
                html.escape(r["operation"] or ""),
                f"<br>anomaly: {anomaly_text[r['version']]}" if r["version"] in anomaly_text else "",
            ]
            for r in rows
        ],
        # the anomaly line is empty for most versions; its text is escaped above
        "hovertemplate": "version %{x}<br>%{y} UTC<br>source: %{customdata[0]}<br>%{customdata[1]}"
        "%{customdata[2]}<extra></extra>",
        "line": {"color": _EFFECTIVE, "width": 2},
        "marker": {"size": 6},
        # the value axis is fitted to this trace alone (static/tables/charts.js, on zoom too)
        "meta": {"fit": True},
    }
    data: list[dict[str, Any]] = [effective]
    both = [r for r in rows if r["in_commit_timestamp"] is not None]
    if both:
        # dense: thin lines (the file time dotted) where a marker per version merged into a band
        few = len(both) <= DENSE
        data.append(
            {
                "type": "scatter",
                "mode": "markers" if few else "lines",
                "name": "inCommitTimestamp",
                "x": [r["version"] for r in both],
                "y": [plot_time(r["in_commit_timestamp"]) for r in both],
                "hovertemplate": "v%{x}<br>ICT %{y}<extra></extra>",
                "marker": {"color": _ICT, "symbol": "diamond-open", "size": 9},
                "line": {"color": _ICT, "width": 1},
            }
        )
        data.append(
            {
                "type": "scatter",
                "mode": "markers" if few else "lines",
                "name": "file modification time",
                "x": [r["version"] for r in both],
                "y": [plot_time(r["file_modification_time"]) for r in both],
                "hovertemplate": "v%{x}<br>file time %{y}<extra></extra>",
                "marker": {"color": _FILE, "symbol": "circle-open", "size": 8},
                "line": {"color": _FILE, "width": 1, "dash": "dot"},
            }
        )
    if marked:
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "anomaly",
                "x": [a["version"] for a in marked],
                "y": [plot_time(by_version[a["version"]]["timestamp"]) for a in marked],
                "hovertext": [html.escape(f"{a['kind']}: {a['detail']}")[:300] for a in marked],
                "hovertemplate": "v%{x}<br>%{hovertext}<extra></extra>",
                "marker": {"color": _ANOMALY, "symbol": "x", "size": 13, "line": {"width": 1}},
            }
        )
    data.extend(removal_markers(removals or [], by_version))
    layout = _layout(None, "commit timestamp (UTC)", "date")  # the page's heading names it
    # The time axis spans the effective times, not every trace's: a copied ICT table's file
    # times are all the day of the copy, and plotly's autorange made room for them, squashing
    # months of commits into a flat line. A file time outside the span lies off the chart
    # (its hover and the version page still give it).
    fitted = [r["timestamp"] for r in rows if r["timestamp"] is not None]
    if fitted:
        lo, hi = min(fitted), max(fitted)
        pad = max((hi - lo) * 0.05, 1000)
        layout["yaxis"]["range"] = [plot_time(int(lo - pad)), plot_time(int(hi + pad))]
        layout["yaxis"]["autorange"] = False
    if RANGESLIDER_FROM < len(versions):
        # long histories: a slider under the chart to move a zoomed window through the versions
        layout["xaxis"]["rangeslider"] = {"visible": True, "thickness": 0.08}
        layout["height"] = 420
    boundary = ict_boundary(table)
    if boundary is not None and versions and versions[0] <= boundary <= versions[-1]:
        layout["shapes"] = [
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": boundary,
                "x1": boundary,
                "y0": 0,
                "y1": 1,
                "line": {"color": _ICT, "width": 2, "dash": "dash"},
            }
        ]
        layout["annotations"] = [
            {
                "x": boundary,
                "y": 1,
                "xref": "x",
                "yref": "paper",
                "text": f"ICT enabled at v{boundary}",
                "showarrow": False,
                "xanchor": "left",
                "yanchor": "bottom",
                "font": {"color": _ICT},
            }
        ]
    if reach is not None and versions:
        shapes, legend = _band_shapes(reachability_bands(reach, versions[0], versions[-1]))
        layout["shapes"] = layout.get("shapes", []) + shapes  # the ICT line stays first
        data.extend(legend)
    return {"data": data, "layout": layout}


def removal_markers(removals: list[dict[str, Any]], by_version: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """One trace: each file-removal event half a version after the commit it was noticed after,
    at that commit's time, its hover saying what vanished and which versions it broke."""
    shown = [e for e in removals if e["version"] in by_version]
    if not shown:
        return []
    text = []
    for e in shown:
        ranges = ", ".join(f"{a}..{b}" if a != b else f"{a}" for a, b in (e["unreadable"] or [])[:10])
        vacuum = e["vacuum_end_version"] if e["vacuum_end_version"] is not None else e["vacuum_start_version"]
        said = f"{e['files']} files ({e['bytes']} bytes) removed outside the log"
        said += f"; versions {ranges} unreadable" if ranges else ""
        said += (
            f"; VACUUM at v{vacuum}" + (f" by {e['vacuum_user']}" if e["vacuum_user"] else "")
            if vacuum is not None
            else ""
        )
        text.append(html.escape(said)[:400])
    return [
        {
            "type": "scatter",
            "mode": "markers",
            "name": "files removed (VACUUM)",
            "x": [e["version"] + 0.5 for e in shown],
            "y": [plot_time(by_version[e["version"]]["timestamp"]) for e in shown],
            "hovertext": text,
            "hovertemplate": "after v%{x:.0f}<br>%{hovertext}<extra></extra>",
            "marker": {"color": _REMOVAL, "symbol": "triangle-down", "size": 15, "line": {"width": 1}},
        }
    ]


# The horizon bands: what each version's reachability state looks like behind the timeline.
# state: (legend text, RGB); bands are drawn faint, legend squares stronger
BAND_STATES: dict[str, tuple[str, str]] = {
    "readable": ("readable", "22, 163, 74"),
    "beyond_retention": ("readable, beyond retention (VACUUM may delete its files)", "234, 179, 8"),
    "files_missing": ("files missing (vacuumed)", "220, 38, 38"),
    "log_expired": ("log expired", "107, 114, 128"),
    "not_reproducible": ("not reproducible from the log", "75, 85, 99"),
    "checkpoint_mismatch": ("its checkpoint disagrees with the log", "147, 51, 234"),
}


def band_state(entry: dict[str, Any]) -> str:
    """One version's band: a key of BAND_STATES (an unknown reason: not_reproducible)."""
    reason = entry.get("reason")
    if entry.get("readable"):
        return "beyond_retention" if reason == "beyond_retention" else "readable"
    return reason if reason in BAND_STATES else "not_reproducible"


def reachability_bands(reach: ReachRuns, lo: int, hi: int) -> list[tuple[str, int, int]]:
    """(state, first, last) runs of versions in [lo, hi] sharing a state, oldest first: runs
    of the same state merge, so a 10,000-version table draws a handful of rectangles."""
    runs: list[tuple[str, int, int]] = []
    for first, last, entry in reach.runs(lo, hi):
        state = band_state(entry)
        if runs and runs[-1][0] == state and runs[-1][2] == first - 1:
            runs[-1] = (state, runs[-1][1], last)
        else:
            runs.append((state, first, last))
    return runs


def _band_shapes(runs: list[tuple[str, int, int]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rectangles behind the traces (half a version wider on each side, so adjacent runs touch)
    and one legend entry per state shown, as an empty trace: shapes have no legend of their own
    in every plotly version."""
    shapes = [
        {
            "type": "rect",
            "name": f"reach:{state}:{first}-{last}",
            "xref": "x",
            "yref": "paper",
            "x0": first - 0.5,
            "x1": last + 0.5,
            "y0": 0,
            "y1": 1,
            "layer": "below",
            "line": {"width": 0},
            "fillcolor": f"rgba({BAND_STATES[state][1]}, 0.14)",
        }
        for state, first, last in runs
    ]
    legend = [
        {
            "type": "scatter",
            "mode": "markers",
            "name": BAND_STATES[state][0],
            "x": [None],
            "y": [None],
            "hoverinfo": "skip",
            "marker": {"symbol": "square", "size": 12, "color": f"rgba({BAND_STATES[state][1]}, 0.5)"},
            "legendgroup": "reachability",
        }
        for state in dict.fromkeys(s for s, _, _ in runs)
    ]
    return shapes, legend


def ict_boundary(table: Table) -> int | None:
    """The version from which In-Commit Timestamps apply (None when ICT is off)."""
    if not table.ict_enabled:
        return None
    if table.ict_enablement_version is not None:
        return table.ict_enablement_version
    return table.earliest_version if table.earliest_version is not None else 0


def growth_figures(rows: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Active files and bytes after each version (versions whose size is known)."""
    known = [r for r in rows if r["num_files"] is not None]
    if not known:
        return None, None
    x = [r["version"] for r in known]
    files = {
        "data": [
            {
                "type": "scatter",
                "mode": "lines+markers" if len(known) <= DENSE else "lines",
                "name": "files",
                "x": x,
                "y": [r["num_files"] for r in known],
                "hovertemplate": "version %{x}<br>%{y:,} files<extra></extra>",
                "line": {"shape": "hv", "color": _EFFECTIVE},
            }
        ],
        "layout": {**_layout("Active files per version", "files"), "height": 280, "showlegend": False},
    }
    size = {
        "data": [
            {
                "type": "scatter",
                "mode": "lines+markers" if len(known) <= DENSE else "lines",
                "name": "size",
                "x": x,
                "y": [r["size_bytes"] for r in known],
                "hovertemplate": "version %{x}<br>%{y:,} bytes<extra></extra>",
                "line": {"shape": "hv", "color": _ICT},
            }
        ],
        "layout": {**_layout("Table size per version", "bytes"), "height": 280, "showlegend": False},
    }
    return files, size


def table_charts(table: Table) -> dict[str, Any]:
    """Every figure of the table page, and whether the newest MAX_POINTS versions were cut."""
    rows, truncated = _rows(table)
    if not rows:
        return {"timeline": None, "files": None, "size": None, "truncated": False, "max_points": MAX_POINTS}
    anomalies = list(Anomaly.objects.filter(table=table).values("version", "kind", "detail"))
    files, size = growth_figures(rows)
    pending = False
    try:
        data = table_reachability(table, wait=False)
        pending = data is None  # a long log's answer is being computed: bands on a later load
    except ServiceError:  # the log cannot be read right now: the chart without its bands
        data = None
    reach = data or None
    removals = list(
        FileRemovalEvent.objects.filter(table=table).values(
            "version", "files", "bytes", "unreadable", "vacuum_start_version", "vacuum_end_version", "vacuum_user"
        )[:MAX_REMOVALS]
    )
    return {
        "timeline": timeline_figure(table, rows, anomalies, reach, removals),
        "files": files,
        "size": size,
        "truncated": truncated,
        "max_points": MAX_POINTS,
        "bandsPending": pending,
    }


# plotly's modebar keeps what helps here (zoom, pan, reset, download as PNG); selection tools,
# spike lines and the hover-mode toggles do nothing useful on these charts, "edit in chart
# studio" sends data away.
CONFIG = {
    "displaylogo": False,
    # nothing leaves for plotly's cloud: no share link, no send-to-cloud, no Chart Studio, no server
    "showLink": False,
    "showSendToCloud": False,
    "showEditInChartStudio": False,
    "plotlyServerURL": "",
    "responsive": True,
    "modeBarButtonsToRemove": [
        "sendDataToCloud",
        "editInChartStudio",
        "lasso2d",
        "select2d",
        "autoScale2d",
        "toggleSpikelines",
        "hoverClosestCartesian",
        "hoverCompareCartesian",
    ],
    "toImageButtonOptions": {"format": "png", "scale": 2},
}
