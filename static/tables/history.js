// The History tab: "pick two rows → compare", and long cells opened with a click.
// Each row's version cell has a checkbox; with two ticked, the "Compare these two" link points
// at the Compare tab with from = the older version and to = the newer. A third tick drops the
// first of the two, so two stay ticked. Without this script the boxes and the link stay hidden
// (the Compare tab's own form still compares any two versions).
(function () {
  "use strict";
  // a long cell shows its first line (history.css); one that hides more is marked and opens
  // its row on a click
  var clips = document.querySelectorAll("table.history .cell-clip");
  for (var c = 0; c < clips.length; c++) {
    if (clips[c].scrollHeight > clips[c].clientHeight + 1) {
      clips[c].classList.add("cut");
      clips[c].title = "Click to show all";
    }
  }
  document.addEventListener("click", function (ev) {
    var clip = ev.target.closest ? ev.target.closest(".cell-clip.cut") : null;
    if (clip && !ev.target.closest("summary, a")) { clip.closest("tr").classList.toggle("open"); }
  });
  var bar = document.getElementById("compare-two");
  var table = document.getElementById("commits");
  if (!bar || !table) { return; }
  var link = document.getElementById("compare-link");
  var said = document.getElementById("compare-picked");
  var picked = [];
  function update() {
    if (picked.length === 2) {
      var a = Number(picked[0].value), b = Number(picked[1].value);
      link.href = bar.getAttribute("data-diff") + "?from=" + Math.min(a, b) + "&to=" + Math.max(a, b);
      link.removeAttribute("aria-disabled");
      said.textContent = "Versions " + Math.min(a, b) + " and " + Math.max(a, b) + " picked.";
    } else {
      link.removeAttribute("href");
      link.setAttribute("aria-disabled", "true");
      said.textContent = picked.length === 1 ? "Version " + picked[0].value + " picked: pick one more." : "Tick two rows to compare them.";
    }
  }
  var boxes = table.querySelectorAll("input.pick");
  for (var i = 0; i < boxes.length; i++) {
    boxes[i].hidden = false;
    boxes[i].checked = false; // a reload keeps ticks the list above does not know of
  }
  table.addEventListener("change", function (ev) {
    var box = ev.target;
    if (!box.classList || !box.classList.contains("pick")) { return; }
    picked = picked.filter(function (b) { return b !== box; });
    if (box.checked) {
      picked.push(box);
      if (picked.length > 2) { picked.shift().checked = false; }
    }
    update();
  });
  bar.hidden = false;
  update();
})();
