// Fetches the table page's figures (JSON, cached by the server until the next sync) and
// draws them with plotly; log strings never pass through HTML.
(function () {
  "use strict";
  function say(text) {
    document.querySelectorAll("[data-figure]").forEach(function (el) {
      el.textContent = text;
    });
  }
  function draw(data) {
    var config = data.config || {};
    var drawn = 0;
    document.querySelectorAll("[data-figure]").forEach(function (el) {
      var fig = data[el.getAttribute("data-figure")];
      if (fig) {
        el.textContent = "";
        window.Plotly.newPlot(el, fig.data, fig.layout, config);
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
