// The site's times in the viewer's own zone, on request.
// Every time on a page is a <time datetime="...Z"> whose text is ISO 8601 in UTC
// (tables/templatetags/times.py). The footer's button switches the page (and, remembered in
// localStorage, every later page) to the browser's zone: the text becomes ISO 8601 with the
// zone's offset (2026-11-28T18:36:28+01:00), the UTC time in its title; the button switches
// back. Times added later (a job's fragment) follow the choice. Without this script the
// button stays hidden and times are in UTC.
(function () {
  "use strict";
  var KEY = "deltaweb.times";
  var button = document.getElementById("tz-toggle");
  function pad(n, w) { n = String(Math.abs(n)); while (n.length < (w || 2)) { n = "0" + n; } return n; }
  function local(iso, shown) {
    var d = new Date(iso);
    if (isNaN(d.getTime())) { return null; }
    var off = -d.getTimezoneOffset();
    // the fraction as shown in UTC (milliseconds, or a row value's microseconds): zones are whole minutes
    var fraction = /\.(\d+)Z$/.exec(shown || "");
    var ms = fraction ? "." + fraction[1] : "";
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + "T" + pad(d.getHours()) + ":" +
      pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + ms + (off < 0 ? "-" : "+") + pad(Math.floor(Math.abs(off) / 60)) +
      ":" + pad(Math.abs(off) % 60);
  }
  function mine() { try { return localStorage.getItem(KEY) === "local"; } catch (e) { return false; } }
  function show(root) {
    var on = mine();
    var els = (root.querySelectorAll ? root : document).querySelectorAll("time[datetime$='Z']");
    for (var i = 0; i < els.length; i++) {
      var el = els[i], utc = el.getAttribute("datetime");
      if (!el.hasAttribute("data-utc")) { el.setAttribute("data-utc", el.textContent); }
      var text = on ? local(utc, el.getAttribute("data-utc")) : el.getAttribute("data-utc");
      if (text && el.textContent !== text) { el.textContent = text; }
      if (on) { el.title = utc + " (UTC)"; } else { el.removeAttribute("title"); }
    }
  }
  function label() {
    if (!button) { return; }
    var zone = "";
    try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { zone = ""; }
    button.textContent = mine() ? "Use UTC" : "Use my time zone" + (zone ? " (" + zone + ")" : "");
    var note = document.getElementById("tz-now");
    if (note) { note.textContent = mine() ? "your zone" + (zone ? ", " + zone : "") : "UTC"; }
  }
  if (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      try { localStorage.setItem(KEY, mine() ? "utc" : "local"); } catch (e) { return; }
      label();
      show(document);
    });
  }
  label();
  show(document);
  new MutationObserver(function (records) {
    if (!mine()) { return; }
    for (var i = 0; i < records.length; i++) {
      for (var j = 0; j < records[i].addedNodes.length; j++) {
        var n = records[i].addedNodes[j];
        if (n.nodeType === 1) { show(n.matches && n.matches("time") ? n.parentNode : n); }
      }
    }
  }).observe(document.body, {childList: true, subtree: true});
})();
