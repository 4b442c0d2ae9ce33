// The Query tab: Ctrl+Enter (Cmd+Enter) in the statement runs it, and the result's and the
// comparison's charts are drawn with plotly from their JSON data islands (json_script), which
// the server escaped; no inline script or style.
(function () {
  "use strict";
  var sql = document.getElementById("query-sql");
  if (sql) {
    sql.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey) && !ev.altKey && !ev.shiftKey) {
        ev.preventDefault();
        var form = sql.form;
        if (form.requestSubmit) { form.requestSubmit(); } else { form.submit(); }
      }
    });
  }
  function draw() {
    document.querySelectorAll("[data-figure]").forEach(function (el) {
      var island = document.getElementById(el.getAttribute("data-figure"));
      if (!island) { return; }
      if (!window.Plotly) {
        el.textContent = "The chart library could not be loaded.";
        return;
      }
      var fig = JSON.parse(island.textContent);
      el.textContent = "";
      window.Plotly.newPlot(el, fig.data, fig.layout, { displaylogo: false, responsive: true });
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
