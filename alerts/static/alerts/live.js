// Live activity without reloading: polls the activity API (/api/activity/) with the ETag of
// the last answer in If-None-Match; the server answers 304 while nothing is new, so an idle
// page costs two indexed queries per poll. Plain DOM, textContent only (log strings are
// untrusted). Works for every element with class "live-feed":
//   data-url      the API URL with its filters
//   data-mode     "feed" (the activity page: replace both lists) or "table" (a table page:
//                 list commits newer than data-after and say how many arrived)
//   data-interval seconds between polls (default 5)
//   data-baseline "sync" (a table page opened before the table's first sync ended): nothing is
//                 new until the answer's syncedVersion says the first sync ended; the commits
//                 up to it are the table's history, only later ones are listed as new
(function () {
  "use strict";
  function text(tag, value, cls) {
    var el = document.createElement(tag);
    el.textContent = value === null || value === undefined ? "—" : String(value);
    if (cls) { el.className = cls; }
    return el;
  }
  function versionLink(item) {
    var a = document.createElement("a");
    a.href = "/t/" + encodeURIComponent(item.table) + "/v/" + item.version + "/";
    a.textContent = "v" + item.version;
    return a;
  }
  function commitRow(c, withTable) {
    var tr = document.createElement("tr");
    if (withTable) { tr.appendChild(text("td", c.tableName)); }
    var td = document.createElement("td"); td.appendChild(versionLink(c)); tr.appendChild(td);
    tr.appendChild(text("td", c.timestampIso));
    tr.appendChild(text("td", c.operation));
    tr.appendChild(text("td", c.userName));
    return tr;
  }
  function alertRow(a) {
    var tr = document.createElement("tr");
    var sev = document.createElement("td");
    sev.appendChild(text("span", a.severity, "badge sev-" + a.severity));
    tr.appendChild(sev);
    tr.appendChild(text("td", a.tableName));
    var td = document.createElement("td"); td.appendChild(versionLink(a)); tr.appendChild(td);
    tr.appendChild(text("td", a.ruleName));
    tr.appendChild(text("td", a.explanation));
    return tr;
  }
  function fill(body, rows) {
    if (!body) { return; }
    while (body.firstChild) { body.removeChild(body.firstChild); }
    rows.forEach(function (r) { body.appendChild(r); });
  }
  function start(box) {
    var url = box.getAttribute("data-url");
    var mode = box.getAttribute("data-mode") || "feed";
    var every = (parseFloat(box.getAttribute("data-interval")) || 5) * 1000;
    var tag = null;
    var waitForSync = mode === "table" && box.getAttribute("data-baseline") === "sync";
    // the first sync ended: from now on only commits after the version it reached are new
    function startAfter(version) {
      var u = new URL(url, window.location.href);
      u.searchParams.set("afterVersion", String(version));
      u.searchParams.delete("limit");
      url = u.pathname + u.search;
      tag = null;
      waitForSync = false;
      box.setAttribute("data-after", String(version));
    }
    function show(data) {
      if (waitForSync) {
        if (data.syncedVersion !== null && data.syncedVersion !== undefined) { startAfter(data.syncedVersion); }
      } else if (mode === "table") {
        var commits = data.commits || [];
        var count = box.querySelector("[data-field=count]");
        if (count) { count.textContent = String(commits.length); }
        box.hidden = commits.length === 0;
        fill(box.querySelector("tbody[data-list=commits]"), commits.map(function (c) { return commitRow(c, false); }));
      } else {
        fill(box.querySelector("tbody[data-list=commits]"), (data.commits || []).map(function (c) { return commitRow(c, true); }));
        fill(box.querySelector("tbody[data-list=alerts]"), (data.alerts || []).map(alertRow));
      }
      box.setAttribute("data-updated", String(Date.now()));
    }
    function poll() {
      var headers = { Accept: "application/json" };
      if (tag) { headers["If-None-Match"] = tag; }
      fetch(url, { credentials: "same-origin", cache: "no-store", headers: headers })
        .then(function (r) {
          if (r.status === 304) { return null; }
          if (!r.ok) { return Promise.reject(r.status); }
          tag = r.headers.get("ETag");
          return r.json();
        })
        .then(function (data) { if (data) { show(data); } setTimeout(poll, every); })
        .catch(function () { setTimeout(poll, every * 3); });
    }
    setTimeout(poll, mode === "table" ? 0 : every);
  }
  Array.prototype.forEach.call(document.querySelectorAll(".live-feed"), start);
})();
