// Draws the plotly figures whose JSON the page holds in <script type="application/json">
// elements (Django's json_script); the data never passes through HTML.
(function () {
  "use strict";
  function readJson(id) {
    var el = document.getElementById(id);
    return el ? JSON.parse(el.textContent) : null;
  }
  function draw() {
    if (!window.Plotly) {
      document.querySelectorAll("[data-figure]").forEach(function (el) {
        el.textContent = "The chart library could not be loaded.";
      });
      return;
    }
    var config = readJson("chart-config") || {};
    document.querySelectorAll("[data-figure]").forEach(function (el) {
      var fig = readJson(el.getAttribute("data-figure"));
      if (fig) {
        window.Plotly.newPlot(el, fig.data, fig.layout, config);
      }
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
