// Follows a restore request on its page: polls /restores/<id>.json (every second while it is
// approved, queued or running; every 3 s while it waits for approval) and updates the status
// box; when the request finishes or goes back to waiting for approval, the page reloads to
// show the result or the new plan. Plain DOM, textContent only.
(function () {
  "use strict";
  var box = document.getElementById("restore-progress");
  if (!box) { return; }
  var url = box.getAttribute("data-url");
  var TERMINAL = { succeeded: true, failed: true, conflict: true, rejected: true, withdrawn: true };
  var WAITING = { pending: true, stale: true };
  var shown = box.getAttribute("data-status");
  function field(name) { return box.querySelector('[data-field="' + name + '"]'); }
  function show(r) {
    var status = field("status");
    status.textContent = r.statusLabel;
    status.className = "badge state-" + r.status;
    var heading = document.getElementById("restore-status");
    if (heading) { heading.textContent = r.statusLabel; heading.className = "badge state-" + r.status; }
    field("stage").textContent = r.stage || "";
    field("count").textContent = r.total ? r.done + "/" + r.total : "";
    var bar = field("bar");
    if (r.total) { bar.max = r.total; bar.value = r.done; }
    else if (TERMINAL[r.status]) { bar.max = 1; bar.value = 1; }
    else { bar.removeAttribute("value"); }
    var err = field("error");
    err.textContent = r.error || "";
    err.hidden = !r.error;
    box.setAttribute("data-status", r.status);
  }
  function poll() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (resp) { return resp.ok ? resp.json() : Promise.reject(resp.status); })
      .then(function (r) {
        var changed = r.status !== shown;
        var settled = TERMINAL[r.status] || (WAITING[r.status] && !WAITING[shown]);
        if (changed && settled) { window.location.reload(); return; }
        if (changed && WAITING[shown] && !WAITING[r.status]) {
          var decision = document.getElementById("decision");
          if (decision) { decision.hidden = true; }  // decided elsewhere (the admin console)
        }
        show(r);
        shown = r.status;
        if (!TERMINAL[r.status]) { setTimeout(poll, WAITING[r.status] ? 3000 : 1000); }
      })
      .catch(function () { setTimeout(poll, 3000); });
  }
  if (!TERMINAL[shown]) { setTimeout(poll, WAITING[shown] ? 3000 : 1000); }
})();
