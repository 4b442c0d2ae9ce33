// The page's layout on a narrow screen.
// 1. The main navigation: a "Menu" button shows and hides the links and the sign-out form.
//    Without this script the button stays hidden and the links wrap (the CSS lays them out on
//    several lines), so nothing is out of reach. The button is a real <button>: Enter and
//    Space toggle it, Escape closes the menu and gives the focus back to it.
// 2. A box that scrolls sideways (a wide table in .scroll or in a card on a phone) and holds
//    nothing focusable gets tabindex=0, so the keyboard can reach it and scroll it with the
//    arrow keys.
(function () {
  "use strict";
  function menu() {
    var button = document.getElementById("menu-toggle");
    var panel = document.getElementById("nav-panel");
    if (!button || !panel) { return; }
    var bar = button.parentNode;
    function setOpen(open) {
      button.setAttribute("aria-expanded", open ? "true" : "false");
      bar.classList.toggle("menu-open", open);
    }
    bar.classList.add("has-menu");
    button.hidden = false;
    setOpen(false);
    button.addEventListener("click", function () {
      setOpen(button.getAttribute("aria-expanded") !== "true");
    });
    bar.addEventListener("keydown", function (event) {
      if (event.key === "Escape" && button.getAttribute("aria-expanded") === "true") {
        setOpen(false);
        button.focus();
      }
    });
  }
  var FOCUSABLE = "a[href], button, input, select, textarea, summary, [tabindex]";
  function scrollers() {
    var boxes = document.querySelectorAll("main .scroll, main .card");
    Array.prototype.forEach.call(boxes, function (box) {
      var scrolls = box.scrollWidth > box.clientWidth + 1;
      var own = box.getAttribute("data-scroll-focus") === "1";
      if (scrolls && !own && !box.hasAttribute("tabindex") && !box.querySelector(FOCUSABLE)) {
        box.setAttribute("tabindex", "0");
        box.setAttribute("data-scroll-focus", "1");
      } else if (!scrolls && own) {
        box.removeAttribute("tabindex");
        box.removeAttribute("data-scroll-focus");
      }
    });
  }
  menu();
  scrollers();
  var pending = null;
  window.addEventListener("resize", function () {
    clearTimeout(pending);
    pending = setTimeout(scrollers, 150);
  });
})();
