// The register form checks its location as it is typed (a pause of 400 ms, or leaving the
// field): /tables/register/check/ answers with the words the form would show on submit (not
// allowed, not a directory, not a Delta table, registered already as ...), said under the
// field and marking it invalid; a good location says so. Without this script the form checks
// on submit, as before.
(function () {
  "use strict";
  var form = document.querySelector("form[data-check-url]");
  if (!form) { return; }
  var input = form.querySelector("[name=location]");
  var out = document.getElementById("location-check");
  if (!input || !out) { return; }
  var timer = null, asked = "";
  function say(ok, text, link) {
    out.textContent = text;
    out.className = ok ? "small ok" : "error";
    if (link) {
      var a = document.createElement("a");
      a.href = link.url;
      a.textContent = "Open " + link.name;
      out.appendChild(document.createTextNode(" "));
      out.appendChild(a);
    }
    out.hidden = false;
    input.setAttribute("aria-invalid", ok ? "false" : "true");
    input.closest(".field").classList.toggle("invalid", !ok);
  }
  function check() {
    var value = input.value.trim();
    if (value === asked) { return; }
    asked = value;
    if (!value) { out.hidden = true; input.removeAttribute("aria-invalid"); return; }
    var url = form.getAttribute("data-check-url") + "?location=" + encodeURIComponent(value);
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.json(); })
      .then(function (body) {
        if (input.value.trim() !== value) { return; }  // typed on meanwhile
        if (body.ok) { say(true, "✓ A Delta table: " + body.location); }
        else { say(false, body.message || (body.error && body.error.message) || "This location cannot be registered.", body.table); }
      })
      .catch(function () { asked = ""; });
  }
  input.setAttribute("aria-describedby", ((input.getAttribute("aria-describedby") || "") + " location-check").trim());
  input.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(check, 400); });
  input.addEventListener("change", check);
  input.addEventListener("blur", check);
})();
