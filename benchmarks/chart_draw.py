"""The Timeline & growth tab of a 10,000-version table drawn in headless Chromium under the
app's real Content-Security-Policy: how long each way of drawing dense traces takes.

Usage: .venv/bin/python benchmarks/chart_draw.py [--workdir DIR] [--versions 10000] [--reps 5]
                                                 [--variants svg webgl-strict ...] [--json FILE]

A private deployment (everything under --workdir, default /tmp/deltaweb-bench/chart_draw: its
own SQLite database, allowed root and gunicorn on a free loopback port; Celery tasks run in
the request) holds one table whose cached history has --versions commits (the rows a sync
stores; ICT from version 1,200 on, as tests/e2e/test_charts_browser.py builds them, with
irregular times and growth). A signed-in Chromium (no `bypass_csp`: the page keeps its CSP
header; WebGL in software, --enable-unsafe-swiftshader, as on a machine without a GPU) opens
the charts page once per variant and repetition, in a fresh browser context. The figures the
app serves are rewritten in flight (playwright's routing, which leaves the page's CSP alone)
to each variant ("dense": a trace over 1,000 points; the ICT and file-time traces are the
timeline's two marker traces):

  served         the figures, charts.js and the plotly bundle exactly as the app serves them
  svg            every trace SVG (`scatter`), the range slider under a long timeline, the
                 dense ICT and file-time traces a small marker per version (4 and 3 px)
  svg-no-slider  the same without the range slider (the slider draws every trace again)
  svg-lines      every trace SVG, the range slider, every dense trace a line only (one path,
                 no marker per version): what the app serves since WebGL was dropped
  webgl-strict   dense traces on WebGL (`scattergl`, markers as in svg, no slider: plotly
                 draws no WebGL trace in a slider), drawn by plotly's CSP-safe "strict" bundle
                 (npm plotly.js-strict-dist-min of the same plotly.js version as the python
                 package's plotly.min.js, installed under --workdir's parent)
  webgl          the same figures with the standard bundle: what the app did before; plotly's
                 WebGL code needs 'unsafe-eval', so the page shows "WebGL is not supported"

The webgl variants also get charts.js without its conversion of WebGL traces to SVG.

Measured in the page (performance.now(), medians of --reps):
  draw    from the first Plotly.newPlot call to the last chart's promise and two animation
          frames (painted): plotly's own work for the three charts
  ready   from the navigation's start to the same moment: what the user waits (HTML, the
          bundle's download and parse, the figures' JSON, the draw)
  zoom    Plotly.relayout of the timeline to versions 6,000-7,000 (and the refit the page
          makes of the time axis), then two animation frames
and whether it drew: no "WebGL is not supported" text, no CSP violation (securitypolicyviolation
events and console messages), every chart drawn, and the points the SVG paths hold.
Prints a table and, last, one JSON line; writes benchmarks/results/chart_draw.json
(benchmarks/report.py's record: command, time, load averages).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV_BIN = Path(sys.executable).parent
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--enable-unsafe-swiftshader"]
T0 = 1_700_000_000_000
DENSE = 1_000  # tables/web/base/charts.py
RANGESLIDER_FROM = 50
VARIANTS = ("served", "svg", "svg-no-slider", "svg-lines", "webgl-strict", "webgl")

# before any page script: CSP violations, and a timer around every Plotly.newPlot (plotly's
# own exports are getters, so the page gets a proxy of the library that times the calls)
INIT = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push(e.violatedDirective + " " + (e.blockedURI || "inline"));
});
window.__plots = [];
(() => {
  let lib;
  Object.defineProperty(window, "Plotly", {
    configurable: true,
    get() { return lib; },
    set(value) {
      lib = new Proxy(value, { get(target, key) {
        const v = target[key];
        if (key !== "newPlot") { return v; }
        return function () {
          const start = performance.now();
          const out = v.apply(target, arguments);
          window.__plots.push(Promise.resolve(out).then(() => new Promise((ok) =>
            requestAnimationFrame(() => requestAnimationFrame(() => ok({ start, end: performance.now() }))))));
          return out;
        };
      } });
    },
  });
})();
"""

WAIT_DRAWN = """async () => {
  const deadline = performance.now() + 120000;
  while (window.__plots.length < 3 && performance.now() < deadline) {
    await new Promise((ok) => setTimeout(ok, 20));
  }
  const done = await Promise.all(window.__plots);
  const start = Math.min(...done.map((d) => d.start)), end = Math.max(...done.map((d) => d.end));
  return { draw: end - start, ready: end, plots: done.length };
}"""

ZOOM = """async () => {
  const start = performance.now();
  await window.Plotly.relayout("chart-timeline", { "xaxis.range": [6000, 7000] });
  await new Promise((ok) => setTimeout(ok, 0)); // the page's refit of the time axis (its own relayout)
  await new Promise((ok) => requestAnimationFrame(() => requestAnimationFrame(ok)));
  return performance.now() - start;
}"""

# what is on the screen: error text, canvases, and the points the SVG traces hold
# (a line's path: its vertices; markers: one path each)
DRAWN = """() => {
  const out = { text: document.body.innerText.includes("WebGL is not supported"), charts: {} };
  for (const el of document.querySelectorAll("[data-figure]")) {
    let vertices = 0, markers = 0;
    el.querySelectorAll(".cartesianlayer .scatterlayer .trace").forEach((t) => {
      t.querySelectorAll("path.js-line").forEach((p) => {
        vertices += ((p.getAttribute("d") || "").match(/[MLHV]/g) || []).length;
      });
      markers += t.querySelectorAll(".points path.point").length;
    });
    out.charts[el.id] = {
      plotted: el.classList.contains("js-plotly-plot"),
      types: (el.data || []).map((t) => t.type),
      canvases: el.querySelectorAll("canvas").length,
      vertices, markers,
    };
  }
  return out;
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def plotly_version() -> str:
    from tables.web.base.staticfiles import plotly_file

    path = plotly_file()
    head = path.read_text(errors="replace")[:400] if path else ""
    found = re.search(r"plotly\.js v(\d+\.\d+\.\d+)", head)
    if not found:
        raise SystemExit("cannot read the plotly.js version of the installed plotly package")
    return found[1]


def strict_bundle(workdir: Path, version: str) -> bytes:
    """plotly.js-strict-dist-min@version from the npm registry, installed under workdir once."""
    prefix = workdir.parent / "chart_draw_npm" / version
    path = prefix / "node_modules" / "plotly.js-strict-dist-min" / "plotly-strict.min.js"
    if not path.exists():
        prefix.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "-s", "--no-audit", "--no-fund", "--prefix", str(prefix),
             f"plotly.js-strict-dist-min@{version}"],
            check=True, timeout=600,
        )  # fmt: skip
    return path.read_bytes()


def history(versions: int) -> list[dict[str, int]]:
    """Irregular commit times, file times and growth (seeded): plotly simplifies a straight
    line to a few vertices, which would make the SVG look cheaper than a real table's."""
    rnd = random.Random(7)
    rows, t, files, size = [], T0, 1, 1000
    for v in range(versions):
        t += rnd.randint(1_000, 120_000)
        files = max(1, files + rnd.randint(-3, 5))
        size = max(1000, size + rnd.randint(-40_000, 60_000))
        rows.append({"version": v, "time": t, "file_time": t + rnd.randint(0, 3_000), "files": files, "size": size})
    return rows


def setup(workdir: Path, versions: int) -> str:
    """The database, the user and the table (its slug); the environment for the server."""
    env = {
        "DATABASE_URL": f"sqlite:///{workdir / 'charts.sqlite3'}",
        "DELTAWEB_ALLOWED_ROOTS": str(workdir),
        "DJANGO_SETTINGS_MODULE": "deltaweb.settings",
        "DELTAWEB_SECRET_KEY": "benchmark-only-secret-key-0123456789",
        "CELERY_TASK_ALWAYS_EAGER": "1",
        "DELTAWEB_LOGIN_RATE": "1000/minute",
        "DELTAWEB_LOG_LEVEL": "WARNING",
    }
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from tables.models import Commit, SyncState, Table
    from tables.services.catalog import registration
    from tests.web.ui_tables import ict_table

    call_command("migrate", verbosity=0)
    call_command("create_roles", verbosity=0)
    get_user_model().objects.create_superuser("bench", password="bench-password-1")
    table = registration.register_table("Long", str(ict_table(workdir / "long")))
    Commit.objects.bulk_create(
        [
            Commit(
                table=table,
                version=r["version"],
                timestamp=r["time"],
                timestamp_source="ict" if r["version"] >= 1_200 else "file",
                in_commit_timestamp=r["time"] if r["version"] >= 1_200 else None,
                file_modification_time=r["file_time"],
                num_files=r["files"],
                size_bytes=r["size"],
                operation="WRITE",
            )
            for r in history(versions)
        ],
        batch_size=2000,
    )
    Table.objects.filter(pk=table.pk).update(
        sync_state=SyncState.OK, last_synced_version=versions - 1, earliest_version=0
    )
    return table.slug


MARKER_TRACES = {"inCommitTimestamp": 4, "file modification time": 3}  # their dense marker size before


def rewrite(fig: dict[str, Any] | None, variant: str) -> None:
    """The figure as the variant draws it (in place)."""
    if not fig:
        return
    dense = False
    for trace in fig["data"]:
        n = len(trace.get("x") or [])
        webgl = variant.startswith("webgl") and n > DENSE
        dense = dense or n > DENSE
        trace["type"] = "scattergl" if webgl else "scatter"
        if n > DENSE and trace.get("name") in MARKER_TRACES:
            if variant == "svg-lines":
                trace["mode"] = "lines"
            else:
                trace["mode"] = "markers"
                trace["marker"] = {**trace.get("marker", {}), "size": MARKER_TRACES[trace["name"]]}
        elif n > DENSE:
            trace["mode"] = "lines"
    xaxis = fig["layout"].get("xaxis", {})
    is_timeline = fig["layout"].get("yaxis", {}).get("type") == "date"
    if (variant.startswith("webgl") and dense) or variant == "svg-no-slider":
        if xaxis.pop("rangeslider", None):
            fig["layout"]["height"] = 360
    elif variant in ("svg", "svg-lines") and is_timeline and len(fig["data"][0]["x"]) > RANGESLIDER_FROM:
        xaxis["rangeslider"] = {"visible": True, "thickness": 0.08}
        fig["layout"]["height"] = 420


def measure(browser: Any, base: str, slug: str, state: dict, variant: str, strict: bytes | None) -> dict:
    context = browser.new_context(viewport={"width": 1280, "height": 1000}, storage_state=state)
    try:
        context.add_init_script(INIT)
        page = context.new_page()
        page.set_default_timeout(120_000)
        console: list[str] = []
        errors: list[str] = []
        page.on("console", lambda m: console.append(m.text) if "Content Security Policy" in m.text else None)
        page.on("pageerror", lambda exc: errors.append(str(exc)[:200]))
        if variant != "served":

            def figures(route: Any) -> None:
                resp = route.fetch()
                data = resp.json()
                for name in ("timeline", "files", "size"):
                    rewrite(data.get(name), variant)
                route.fulfill(response=resp, body=json.dumps(data))

            page.route(f"**/t/{slug}/charts.json", figures)
        if variant.startswith("webgl"):

            def scripts(route: Any) -> None:
                resp = route.fetch()
                text = resp.text()
                assert "svgOnly(fig.data)" in text, "charts.js no longer converts WebGL traces as it did"
                route.fulfill(response=resp, body=text.replace("svgOnly(fig.data)", "fig.data"))

            page.route("**/tables/charts*.js", scripts)
        if variant == "webgl-strict":
            page.route(
                "**/vendor/plotly*.js",
                lambda route: route.fulfill(status=200, content_type="text/javascript", body=strict),
            )
        resp = page.goto(f"{base}/t/{slug}/charts/")
        csp_header = resp.headers.get("content-security-policy", "") if resp else ""
        timing = page.evaluate(WAIT_DRAWN)
        drawn = page.evaluate(DRAWN)
        zoom = page.evaluate(ZOOM)
        violations = page.evaluate("() => window.__csp") + console
        ok = (
            not drawn["text"]
            and not violations
            and not errors
            and timing["plots"] == 3
            and all(c["plotted"] and (c["canvases"] or c["vertices"] or c["markers"]) for c in drawn["charts"].values())
        )
        return {
            **timing,
            "zoom": zoom,
            "ok": ok,
            "csp": violations[:3],
            "errors": errors[:3],
            "webglNotSupported": drawn["text"],
            "charts": drawn["charts"],
            "cspHeader": "script-src 'self'" in csp_header and "unsafe-eval" not in csp_header,
        }
    finally:
        context.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", default="/tmp/deltaweb-bench/chart_draw")
    ap.add_argument("--versions", type=int, default=10_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    ap.add_argument("--json", help="also write the result (the last line printed) to this file")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    load_before = os.getloadavg()
    workdir = Path(args.workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    slug = setup(workdir, args.versions)
    version = plotly_version()
    strict = strict_bundle(workdir, version) if "webgl-strict" in args.variants else None

    port = free_port()
    server = subprocess.Popen(
        [str(VENV_BIN / "gunicorn"), "deltaweb.wsgi", "-w", "2", "-b", f"127.0.0.1:{port}", "--log-level", "warning"],
        cwd=ROOT, env=os.environ.copy(), start_new_session=True,
    )  # fmt: skip
    atexit.register(lambda: os.kill(server.pid, signal.SIGTERM) if server.poll() is None else None)
    base = f"http://127.0.0.1:{port}"
    for _ in range(150):
        try:
            urllib.request.urlopen(base + "/accounts/login/", timeout=2)
            break
        except OSError:
            time.sleep(0.2)
    results: dict[str, Any] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context()
        page = context.new_page()
        page.goto(base + "/accounts/login/")
        page.get_by_label("Username").fill("bench")
        page.get_by_label("Password").fill("bench-password-1")
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(base + "/")
        page.goto(f"{base}/t/{slug}/charts.json")  # computes and caches the figures once
        state = context.storage_state()
        context.close()
        measure(browser, base, slug, state, "served", None)  # warm: the server's first page, the caches
        for variant in args.variants:
            runs = [measure(browser, base, slug, state, variant, strict) for _ in range(args.reps)]
            results[variant] = {
                "draw_ms": round(statistics.median(r["draw"] for r in runs)),
                "ready_ms": round(statistics.median(r["ready"] for r in runs)),
                "zoom_ms": round(statistics.median(r["zoom"] for r in runs)),
                "drawn": all(r["ok"] for r in runs),
                "csp_violations": runs[0]["csp"],
                "page_errors": runs[0]["errors"],
                "webgl_not_supported": runs[0]["webglNotSupported"],
                "csp_header_strict": all(r["cspHeader"] for r in runs),
                "types": {k: sorted(set(c["types"])) for k, c in runs[0]["charts"].items()},
                "svg_vertices": sum(c["vertices"] for c in runs[0]["charts"].values()),
                "svg_markers": sum(c["markers"] for c in runs[0]["charts"].values()),
                "draws": [round(r["draw"]) for r in runs],
            }
        browser.close()
    print(f"{args.versions:,} versions, plotly.js {version}, median of {args.reps}, load {os.getloadavg()[0]:.1f}")
    print(
        f"{'variant':<15} {'drawn':>6} {'draw ms':>8} {'ready ms':>9} {'zoom ms':>8} {'svg vertices':>13} {'markers':>8}"
    )
    for name, r in results.items():
        print(
            f"{name:<15} {'yes' if r['drawn'] else 'NO':>6} {r['draw_ms']:>8,} {r['ready_ms']:>9,} {r['zoom_ms']:>8,}"
            f" {r['svg_vertices']:>13,} {r['svg_markers']:>8,}"
        )
        if not r["drawn"]:
            print(
                f"  not drawn: CSP {r['csp_violations']}, errors {r['page_errors']}, WebGL text {r['webgl_not_supported']}"
            )
    out = {
        # first: the numbers benchmarks/report.py's table shows
        "draw_ms": {name: r["draw_ms"] for name, r in results.items()},
        "zoom_ms": {name: r["zoom_ms"] for name, r in results.items()},
        "versions": args.versions,
        "reps": args.reps,
        "drawn": {name: r["drawn"] for name, r in results.items()},
        "plotly_js": version,
        "loadavg_before": list(load_before),
        "loadavg_after": list(os.getloadavg()),
        "variants": results,
    }
    line = json.dumps(out)
    print(line)
    record = {  # benchmarks/report.py's record
        "name": "chart_draw",
        "command": " ".join([".venv/bin/python", "benchmarks/chart_draw.py", *sys.argv[1:]]),
        "at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "loadavg_before": out["loadavg_before"],
        "loadavg_after": out["loadavg_after"],
        "result": out,
    }
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "chart_draw.json").write_text(json.dumps(record, indent=1) + "\n")
    if args.json:
        Path(args.json).write_text(line)


if __name__ == "__main__":
    main()
