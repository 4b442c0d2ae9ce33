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
  function draw(data) {
    var config = data.config || {};
    var drawn = 0;
    var section = document.querySelector("[data-chart-src]");
    var template = section && section.getAttribute("data-version-url");
    document.querySelectorAll("[data-figure]").forEach(function (el) {
      var fig = data[el.getAttribute("data-figure")];
      if (fig) {
        el.textContent = "";
        window.Plotly.newPlot(el, fig.data, fig.layout, config);
        if (template) {
          openOnClick(el, template);
        }
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
