"""The browser tests run under the app's real Content-Security-Policy, and fail on any breach.

Every functional browser test opens its contexts with `new_context()` here: never with
playwright's `bypass_csp` (it hid every CSP breakage: WebGL charts that need 'unsafe-eval'
were blank for real users while the tests passed). Each context gets

- an init script (injected by the browser driver, before any page script: the page's CSP does
  not apply to it) that collects `securitypolicyviolation` events into
  `window.__cspViolations` and says each on the console, so a violation is seen even on a
  page the test has already left;
- a console listener keeping every message that mentions "Content Security Policy" (Chromium's
  own "Refused to ..." lines, and the init script's).

`assert_no_violations(context)` fails a test on any of them (the helpers that close a context
call it); a test may also pass a `sink` list (its page-error list) so its own final
`assert errors == []` names them.

`page.wait_for_function` takes a function ("() => ..."): playwright evaluates an expression
string with eval in the page, which the policy refuses (a violation, and the wait fails).

axe-core is loaded as a same-origin script, as the policy (`script-src 'self'`) allows: a
playwright route fulfils `/__axe.js` with the installed axe-core (routing leaves the page's
response, its CSP header included, untouched), then `add_script_tag(url="/__axe.js")`.
"""

from __future__ import annotations

from typing import Any

MARK = "Content Security Policy"
AXE_PATH = "/__axe.js"

WATCH = """(() => {
  window.__cspViolations = [];
  document.addEventListener("securitypolicyviolation", (e) => {
    const text = e.violatedDirective + " blocked " + (e.blockedURI || "inline") + " at " + e.documentURI
      + (e.sample ? " (" + e.sample.slice(0, 80) + ")" : "");
    window.__cspViolations.push(text);
    console.error("%s violation: " + text);
  });
})();""".replace("%s", MARK)


def watch(context: Any, sink: list[str] | None = None) -> Any:
    """Collects the context's CSP violations (see the module's docstring); returns it."""
    seen: list[str] = []
    context.csp_violations = seen
    context.add_init_script(WATCH)

    def on_console(message: Any) -> None:
        if MARK in message.text:
            line = f"{message.page.url if message.page else '?'}: {message.text[:300]}"
            seen.append(line)
            if sink is not None:
                sink.append(line)

    context.on("console", on_console)
    return context


def new_context(browser: Any, *, sink: list[str] | None = None, **options: Any) -> Any:
    """browser.new_context(**options) under the page's CSP, its violations watched."""
    if "bypass_csp" in options:
        raise ValueError("browser tests run under the app's CSP: no bypass_csp")
    return watch(browser.new_context(**options), sink)


def violations(context: Any) -> list[str]:
    """Every CSP violation the context's pages met: the console's, and those still in an open
    page's `window.__cspViolations` (a message may still be on its way)."""
    found = list(getattr(context, "csp_violations", []))
    for page in context.pages:
        try:
            inpage = page.evaluate("() => window.__cspViolations || []")
        except Exception:  # a page closing, or one without JavaScript
            continue
        found += [f"{page.url}: {v}" for v in inpage if not any(v in seen for seen in found)]
    return found


def assert_no_violations(context: Any) -> None:
    assert hasattr(context, "csp_violations"), "the context was not opened by tests.e2e.csp.new_context"
    found = violations(context)
    assert found == [], "Content-Security-Policy violations:\n" + "\n".join(found)


def inject_axe(page: Any, source: str) -> None:
    """axe-core in the page, as a same-origin script the page's CSP allows."""
    if page.evaluate("() => typeof window.axe !== 'undefined'"):
        return
    if not getattr(page, "_axe_routed", False):
        page.route(
            f"**{AXE_PATH}",
            lambda route: route.fulfill(status=200, content_type="text/javascript; charset=utf-8", body=source),
        )
        page._axe_routed = True
    page.add_script_tag(url=AXE_PATH)
