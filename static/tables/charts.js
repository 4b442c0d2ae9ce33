// Fetches the table page's figures (JSON, cached by the server until the next sync) and
// draws them with plotly; log strings never pass through HTML.
(function () {
  "use strict";
  function say(text) {
    document.querySelectorAll("[data-figure]").forEach(function (el) {
      el.textContent = text;
    });
  }
  // a click on a point opens that version's page (x is the version on every chart)
  function versionUrl(template, version) {
    return template.replace(/\/0\/$/, "/" + version + "/");
  }
  function openOnClick(el, template) {
    el.on("plotly_click", function (ev) {
      var p = ev && ev.points && ev.points[0];
      if (!p || typeof p.x !== "number" || !isFinite(p.x) || p.x < 0 || Math.floor(p.x) !== p.x) {
        return;
      }
      window.location.assign(versionUrl(template, p.x));
    });
  }
  // Zooming on versions refits the value axis to the points left in view (plotly keeps the
  // whole history's range, which flattens a zoomed window into a line). Only the traces the
  // server marks meta.fit count when there are any (the timeline's effective times): a copied
  // ICT table's file times, all on the day of the copy, would squash the line again.
  function valueOf(y) {
    return typeof y === "string" ? Date.parse(y.replace(" ", "T") + "Z") : y;
  }
  function refitOnZoom(el) {
    el.on("plotly_relayout", function (ev) {
      if (!ev || ev["yaxis.range[0]"] !== undefined || ev["yaxis.range"] !== undefined) {
        return; // a change of the value axis itself (ours included): nothing to refit
      }
      var lo = ev["xaxis.range[0]"], hi = ev["xaxis.range[1]"];
      if (ev["xaxis.range"]) {
        lo = ev["xaxis.range"][0];
        hi = ev["xaxis.range"][1];
      }
      if (lo === undefined && !ev["xaxis.autorange"]) {
        return;
      }
      var fitted = el.data.filter(function (trace) {
        return trace.meta && trace.meta.fit;
      });
      var best = null;
      (fitted.length ? fitted : el.data).forEach(function (trace) {
        (trace.x || []).forEach(function (x, i) {
          if (lo !== undefined && (x < lo || x > hi)) {
            return;
          }
          var y = trace.y && trace.y[i];
          var v = valueOf(y);
          if (y === null || y === undefined || !isFinite(v)) {
            return;
          }
          if (!best) {
            best = { lo: y, hi: y, vlo: v, vhi: v };
          } else if (v < best.vlo) {
            best.lo = y;
            best.vlo = v;
          } else if (v > best.vhi) {
            best.hi = y;
            best.vhi = v;
          }
        });
      });
      if (!best || (lo === undefined && !fitted.length)) {
        window.Plotly.relayout(el, { "yaxis.autorange": true });
      } else if (best.vlo === best.vhi) {
        window.Plotly.relayout(el, lo === undefined ? { "yaxis.autorange": true } : { "yaxis.autorange": true, "xaxis.range": [lo, hi] });
      } else {
        var pad = (best.vhi - best.vlo) * 0.05;
        var isDate = typeof best.lo === "string";
        var range = isDate
          ? [new Date(best.vlo - pad).toISOString().replace("T", " ").replace("Z", ""),
             new Date(best.vhi + pad).toISOString().replace("T", " ").replace("Z", "")]
          : [best.vlo - pad, best.vhi + pad];
        window.Plotly.relayout(el, { "yaxis.range": range });
      }
    });
  }
  // The keyboard reaches every version: with the chart focused, the arrow keys move from point
  // to point of its first trace (Page keys by a tenth, Home and End to the ends), a live region
  // says where, and Enter opens that version's page.
  function keyboard(el, template) {
    var live = document.createElement("p");
    live.className = "sr chart-cursor";
    live.setAttribute("aria-live", "polite");
    el.parentNode.insertBefore(live, el.nextSibling);
    el.tabIndex = 0;
    el.setAttribute("aria-describedby", (el.getAttribute("aria-describedby") || "") + " " + (live.id = el.id + "-cursor"));
    var at = -1;
    el.addEventListener("keydown", function (ev) {
      var trace = el.data && el.data[0];
      var n = trace && trace.x ? trace.x.length : 0;
      if (!n) {
        return;
      }
      var step = { ArrowRight: 1, ArrowLeft: -1, PageDown: Math.ceil(n / 10), PageUp: -Math.ceil(n / 10) };
      if (ev.key in step) {
        at = Math.max(0, Math.min(n - 1, (at < 0 ? n - 1 : at) + step[ev.key]));
      } else if (ev.key === "Home") {
        at = 0;
      } else if (ev.key === "End") {
        at = n - 1;
      } else if (ev.key === "Enter" && at >= 0 && template) {
        window.location.assign(versionUrl(template, trace.x[at]));
        return;
      } else {
        return;
      }
      ev.preventDefault();
      var y = trace.y[at];
      live.textContent = "version " + trace.x[at] + ": " + (typeof y === "string" ? y + " UTC" : y) + " (" + (at + 1) + " of " + n + ")";
      try {
        window.Plotly.Fx.hover(el, [{ curveNumber: 0, pointNumber: at }]);
      } catch (e) {
        /* plotly refused the hover: the live region still says it */
      }
    });
  }
  // Every trace is SVG: plotly's WebGL traces (scattergl) compile their code at run time,
  // which the page's CSP (script-src 'self', no 'unsafe-eval') forbids, and plotly then shows
  // "WebGL is not supported" instead of the chart. The server sends none; a figure it cached
  // before (until the table's next sync) may still name one, drawn as SVG here.
  function svgOnly(traces) {
    return traces.map(function (t) {
      return t.type === "scattergl" ? Object.assign({}, t, { type: "scatter" }) : t;
    });
  }
  // The legend sits above the plot, in the top margin; the toolbar (plotly's modebar) sits in
  // the top right corner of the same margin. On a phone the legend wraps to several lines and
  // ran under the toolbar: the margin grows until the legend starts below the toolbar's row.
  function clearOfToolbar(el) {
    var legend = el.querySelector(".legend");
    var bar = el.querySelector(".modebar");
    var layout = el._fullLayout;
    if (!legend || !bar || !layout) {
      return;
    }
    var need = Math.ceil(legend.getBBox().height + bar.getBoundingClientRect().height + 8);
    if (layout.margin.t < need) {
      window.Plotly.relayout(el, { "margin.t": need, height: layout.height + need - layout.margin.t });
    }
  }
  function draw(data) {
    var config = data.config || {};
    var drawn = 0;
    var section = document.querySelector("[data-chart-src]");
    var template = section && section.getAttribute("data-version-url");
    document.querySelectorAll("[data-figure]").forEach(function (el) {
      var fig = data[el.getAttribute("data-figure")];
      if (fig) {
        el.textContent = "";
        window.Plotly.newPlot(el, svgOnly(fig.data), fig.layout, config);
        clearOfToolbar(el);
        el.on("plotly_afterplot", function () {
          clearOfToolbar(el); // after a resize (responsive) the legend may wrap again
        });
        if (template) {
          openOnClick(el, template);
        }
        refitOnZoom(el);
        keyboard(el, template);
        drawn += 1;
      } else {
        el.textContent = "No data to chart yet.";
      }
    });
    var note = document.getElementById("charts-note");
    if (note && data.truncated) {
      note.textContent = "The charts show the newest " + data.max_points + " versions.";
      note.hidden = false;
    }
    return drawn;
  }
  function start() {
    var section = document.querySelector("[data-chart-src]");
    if (!section) {
      return;
    }
    if (!window.Plotly) {
      say("The chart library could not be loaded.");
      return;
    }
    fetch(section.getAttribute("data-chart-src"), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (resp) {
        if (!resp.ok) {
          throw new Error("HTTP " + resp.status);
        }
        return resp.json();
      })
      .then(draw)
      .catch(function (err) {
        say("The charts could not be loaded (" + err.message + ").");
      });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
