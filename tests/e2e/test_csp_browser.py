"""The browser tests' CSP watch (tests/e2e/csp.py) in Debian's Chromium: a page keeps the app's
Content-Security-Policy header, axe-core loads as a same-origin script under it, and a
violation is seen, even after the page that met it is left; a context cannot be opened with
playwright's bypass_csp."""

from __future__ import annotations

import pytest

from tests.e2e import csp
from tests.e2e.test_browser import ARGS, CHROMIUM
from tests.e2e.test_workbench_browser import axe_source

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (install Debian's chromium package)"),
    pytest.mark.slow,
]
playwright_sync = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

INLINE = """() => {
  const s = document.createElement("script");
  s.textContent = "window.__inlineRan = true";
  document.head.appendChild(s);
}"""


def test_the_watch_sees_a_violation_and_axe_runs_under_the_policy(live_server, transactional_db) -> None:
    login = live_server.url + "/accounts/login/"
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            with pytest.raises(ValueError, match="bypass_csp"):
                csp.new_context(browser, bypass_csp=True)
            context = csp.new_context(browser)
            page = context.new_page()
            response = page.goto(login)
            policy = response.headers.get("content-security-policy", "")
            assert "script-src 'self'" in policy and "unsafe-eval" not in policy, policy
            # the watch's init script runs (the driver injects it; the policy does not apply)
            assert page.evaluate("() => window.__cspViolations") == []

            # axe-core from a same-origin URL: allowed, and it runs
            csp.inject_axe(page, axe_source())
            assert page.evaluate("async () => (await axe.run(document)).testEngine.name") == "axe-core"
            assert csp.violations(context) == []

            # an inline script: refused by the policy, and seen
            page.evaluate(INLINE)
            page.wait_for_function("() => window.__cspViolations.length > 0")
            assert page.evaluate("() => window.__inlineRan") is None
            found = csp.violations(context)
            assert found and all("script-src" in v for v in found), found
            # still counted once the page is left (the console kept it)
            page.goto(login)
            assert page.evaluate("() => window.__cspViolations") == []
            assert any("script-src" in v for v in csp.violations(context))
            with pytest.raises(AssertionError, match="Content-Security-Policy violations"):
                csp.assert_no_violations(context)
            context.close()
        finally:
            browser.close()
