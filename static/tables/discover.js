// Discovery's "Tick all" / "Tick none": tick or untick every offered table without reloading
// the preview (the links work without this script: ?tick=all reloads it with all ticked).
(function () {
  "use strict";
  document.addEventListener("click", function (ev) {
    var link = ev.target.closest ? ev.target.closest("a[data-tick]") : null;
    if (!link) {
      return;
    }
    ev.preventDefault();
    var on = link.getAttribute("data-tick") === "all";
    var boxes = document.querySelectorAll('#discover-form input[type="checkbox"][name="location"]');
    for (var i = 0; i < boxes.length; i++) {
      boxes[i].checked = on;
    }
    var said = document.getElementById("discover-ticked");
    if (said) {
      said.textContent = on ? boxes.length + " ticked" : "none ticked";
    }
  });
})();
