// A page that shows something still being computed by a worker (a long log's reachability, a
// row count: [data-pending]) updates itself when it is ready, never "reload the page": it asks
// for itself again every few seconds (at most for 10 minutes) and loads again once the answer
// no longer holds a pending mark. Without this script the note stays until the next visit.
(function () {
  "use strict";
  if (!document.querySelector("[data-pending]")) { return; }
  var tries = 0, delay = 2000;
  function look() {
    tries += 1;
    fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        if (html.indexOf("data-pending") === -1) { window.location.reload(); return; }
        if (tries < 200) { setTimeout(look, Math.min(5000, delay += 500)); }
      })
      .catch(function () { if (tries < 200) { setTimeout(look, 5000); } });
  }
  setTimeout(look, delay);
})();
