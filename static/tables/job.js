// Polls a job's JSON (/jobs/<id>.json) and updates the progress fragment until the job
// reaches a terminal state: often at first (an interactive job on a warm Spark ends within a
// second, and a poll a second late doubled the wait for its rows), then less often, up to
// once a second. Plain DOM, textContent only. When a sync ends, the
// page's labels of its table's sync state ([data-sync-badge="<slug>"]) take the state the
// table is in now, so they never say "syncing" beside a finished job; then a job without a
// results page of its own (a sync) loads the page again, without its ?job=, so the page shows
// the state the job left (never "reload the page").
(function () {
  "use strict";
  var box = document.getElementById("job-progress");
  if (!box) { return; }
  var url = box.getAttribute("data-url");
  var TERMINAL = { succeeded: true, failed: true, skipped: true };
  // ms before the next poll: every 150 ms for the first 2 seconds (a warm interactive job
  // ends within them, and each poll costs the server a few ms), then 1.5x longer each time,
  // up to once a second
  var delay = 150, polls = 0;
  function later() {
    setTimeout(poll, delay);
    polls += 1;
    if (polls >= 13) { delay = Math.min(1000, Math.round(delay * 1.5)); }
  }
  function field(name) { return box.querySelector('[data-field="' + name + '"]'); }
  function show(job) {
    var status = field("status");
    status.textContent = job.status;
    status.className = "badge state-" + job.status;
    // a finished job's stage only when it says more than its badge ("failed", "done"), and
    // no count (the badge and the error say how it ended): as tables/_job.html renders it
    var stage = job.stage || "", ended = TERMINAL[job.status];
    var same = stage.toLowerCase() === String(job.status).toLowerCase() || stage === "done";
    field("stage").textContent = ended && same ? "" : stage;
    field("count").textContent = job.total && !ended ? job.done + "/" + job.total : "";
    var bar = field("bar");
    if (job.total) { bar.max = job.total; bar.value = job.done; }
    else if (TERMINAL[job.status]) { bar.max = 1; bar.value = 1; }
    else { bar.removeAttribute("value"); }
    var err = field("error");
    err.textContent = job.error || "";
    err.hidden = !job.error;
    field("done").hidden = job.status !== "succeeded";
    var cancel = field("cancel");
    if (cancel && TERMINAL[job.status]) { cancel.hidden = true; }
    box.setAttribute("data-status", job.status);
    if (job.terminal && job.tableSync) { showSyncState(job.table, job.tableSync); }
  }
  function showSyncState(slug, sync) {
    Array.prototype.forEach.call(document.querySelectorAll("[data-sync-badge]"), function (badge) {
      if (badge.getAttribute("data-sync-badge") !== slug) { return; }
      badge.textContent = sync.label;
      badge.className = "badge state-" + sync.state;
    });
    Array.prototype.forEach.call(document.querySelectorAll("[data-sync-note]"), function (note) {
      if (note.getAttribute("data-sync-note") === slug && sync.state === "ok") {
        note.textContent = "The first sync finished: loading the table's history…";
      }
    });
  }
  // the finished job's rows: a page of its own URL (only the #fragment differs) is reloaded,
  // since assigning it would only scroll
  function showResults(target) {
    var here = window.location;
    if (target.pathname === here.pathname && target.search === here.search) {
      if (target.hash) { history.replaceState(null, "", target.hash); }
      here.reload();
    } else {
      here.assign(target.href);
    }
  }
  function poll() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (job) {
        show(job);
        if (!job.terminal) { later(); }
        else if (job.status === "succeeded" && box.getAttribute("data-reload")) {
          showResults(new URL(box.getAttribute("data-reload"), window.location.href));
        } else if (job.status === "succeeded") {
          var here = new URL(window.location.href);
          here.searchParams.delete("job");
          window.location.replace(here.href);
        }
      })
      .catch(function () { setTimeout(poll, 3000); });
  }
  if (!TERMINAL[box.getAttribute("data-status")]) { later(); }
})();
