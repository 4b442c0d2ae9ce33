// "Copy" buttons: copy the text of the element named by data-copy, and say so in the button
// (a polite live region), so keyboard and screen-reader users learn it worked.
(function () {
  "use strict";
  function done(button, text) {
    var before = button.getAttribute("data-label") || button.textContent;
    button.setAttribute("data-label", before);
    button.textContent = text;
    window.setTimeout(function () {
      button.textContent = before;
    }, 2000);
  }
  document.addEventListener("click", function (ev) {
    var button = ev.target.closest ? ev.target.closest("button[data-copy]") : null;
    if (!button) {
      return;
    }
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source) {
      return;
    }
    var text = source.textContent;
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(
        function () { done(button, "Copied"); },
        function () { done(button, "Select and copy"); }
      );
    } else {
      var range = document.createRange();
      range.selectNodeContents(source);
      var sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      done(button, document.execCommand && document.execCommand("copy") ? "Copied" : "Selected: press Ctrl+C");
    }
  });
})();
