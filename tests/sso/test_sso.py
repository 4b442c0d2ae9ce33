"""Single sign-on in Chromium against a real OpenID provider (django-oidc-provider in its own
process, tests/sso/provider/): signing in and out, the roles its groups give, a role granted
then revoked in the provider and seen at the next sign-in, and someone in no mapped group
refused; with local accounts off, the password form is gone and a password post is refused."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.contrib.auth.models import User

from tables.services.access import oidc, roles
from tests.conftest import REPO, free_port, stop_process, wait_until_answering
from tests.e2e.test_browser import ARGS, CHROMIUM, SHOTS

pytest.importorskip("oidc_provider", reason="django-oidc-provider is not installed")
playwright_sync = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM}"),
]
PASSWORD = "provider-pass-123"


@pytest.fixture
def provider(live_server, tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.sso.provider.settings",
        "OIDC_PROVIDER_DB": str(tmp_path / "provider.sqlite3"),
        "OIDC_PROVIDER_URL": url,
        "PYTHONPATH": str(REPO),
    }
    setup = [sys.executable, "-m", "tests.sso.provider.setup"]
    done = subprocess.run(
        [*setup, f"{live_server.url}/oidc/callback/"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    log = open(tmp_path / "provider.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "django", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    wait_until_answering(f"{url}/.well-known/openid-configuration", proc, "the OpenID provider", 120)

    def groups(username: str, names: list[str]) -> None:
        out = subprocess.run(
            [*setup, "groups", username, ",".join(names)], cwd=REPO, env=env, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr[-2000:]

    yield url, groups
    stop_process(proc)
    log.close()


@pytest.fixture
def sso(provider, settings, monkeypatch):
    url, groups = provider
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    oidc._discovery.clear()
    settings.DELTAWEB_OIDC_ISSUER = url
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = "deltaweb", "deltaweb-client-secret"
    settings.DELTAWEB_OIDC_ROLE_MAP = ["data-analysts=analyst", "data-approvers=approver", "platform-admins=admin"]
    settings.AUTHENTICATION_BACKENDS = ["tables.services.access.oidc.Backend", *settings.AUTHENTICATION_BACKENDS]
    SHOTS.mkdir(parents=True, exist_ok=True)
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield browser, groups
        browser.close()
    oidc._discovery.clear()


def sign_in(browser, base: str, username: str, shot: str = ""):
    """A fresh browser (no session at either end) through the provider's form; the page after."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(f"{base}/accounts/login/")
    page.click("#sso-sign-in")
    page.wait_for_selector("#provider-sign-in")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("#provider-sign-in")
    page.wait_for_url(lambda u: u.startswith(base), timeout=30_000)
    page.wait_for_load_state()
    if shot:
        page.screenshot(path=str(SHOTS / shot), full_page=True)
    return context, page


def roles_of(username: str) -> tuple[set[str], bool, bool]:
    user = User.objects.get(username=username)
    return set(user.groups.values_list("name", flat=True)), user.is_staff, user.is_superuser


def test_roles_come_from_the_providers_groups(sso, live_server) -> None:
    browser, _groups = sso
    ctx, page = sign_in(browser, live_server.url, "dana", "sso-analyst.png")
    assert page.url.rstrip("/") == live_server.url and "Tables" in page.content()
    assert roles_of("dana") == ({roles.ANALYST}, False, False)
    assert not User.objects.get(username="dana").has_usable_password()
    ctx.close()

    ctx, page = sign_in(browser, live_server.url, "pete")
    assert roles_of("pete") == ({roles.APPROVER}, True, False)
    assert page.goto(f"{live_server.url}/admin/").status == 200  # approvers work in the admin console
    ctx.close()

    ctx, page = sign_in(browser, live_server.url, "root")
    assert roles_of("root") == ({roles.ANALYST, roles.APPROVER}, True, True)
    ctx.close()


def test_a_role_granted_then_revoked_in_the_provider(sso, live_server) -> None:
    browser, groups = sso
    ctx, _ = sign_in(browser, live_server.url, "dana")
    ctx.close()
    groups("dana", ["data-analysts", "data-approvers"])
    ctx, _ = sign_in(browser, live_server.url, "dana")
    assert roles_of("dana") == ({roles.ANALYST, roles.APPROVER}, True, False)
    ctx.close()
    groups("dana", ["marketing"])  # every mapped group taken away
    ctx, page = sign_in(browser, live_server.url, "dana", "sso-refused.png")
    assert "/accounts/login/" in page.url and page.locator("#sso-refused").is_visible()
    assert roles_of("dana") == (set(), False, False)  # what the earlier sign-in gave is taken back
    ctx.close()


def test_someone_in_no_mapped_group_is_refused_and_sign_out_ends_the_session(sso, live_server) -> None:
    browser, _groups = sso
    ctx, page = sign_in(browser, live_server.url, "olga")
    assert "/accounts/login/" in page.url and "none of your groups gives a role" in page.content()
    assert not User.objects.filter(username="olga").exists()
    ctx.close()

    ctx, page = sign_in(browser, live_server.url, "dana")
    assert page.goto(f"{live_server.url}/").status == 200
    page.evaluate(
        """() => { const f = document.createElement('form'); f.method = 'post'; f.action = '/oidc/logout/';
        const t = document.querySelector('input[name=csrfmiddlewaretoken]') || document.createElement('input');
        const c = document.createElement('input'); c.name = 'csrfmiddlewaretoken';
        c.value = (document.cookie.match(/csrftoken=([^;]+)/) || [])[1] || t.value; f.appendChild(c);
        document.body.appendChild(f); f.submit(); }"""
    )
    page.wait_for_url(lambda u: "/accounts/login/" in u)
    page.goto(f"{live_server.url}/")
    assert "/accounts/login/" in page.url  # signed out
    ctx.close()


def test_with_local_accounts_off_the_password_form_is_gone(sso, live_server, settings, client) -> None:
    settings.DELTAWEB_LOCAL_LOGIN = False
    User.objects.create_user("local", password="local-pass-123")
    page = client.get("/accounts/login/").content.decode()
    assert 'id="sso-sign-in"' in page and 'name="password"' not in page
    refused = client.post("/accounts/login/", {"username": "local", "password": "local-pass-123"})
    assert refused.status_code == 403 and "_auth_user_id" not in client.session


def test_a_provider_user_named_like_a_local_superuser_gets_an_account_of_its_own(sso, live_server) -> None:
    """The provider's `admin` has the local superuser's username and e-mail: signing in must
    neither take that account over nor touch it."""
    browser, _groups = sso
    local = User.objects.create_superuser("admin", "admin@example.com", "local-admin-pass-123")
    ctx, page = sign_in(browser, live_server.url, "admin", "sso-name-clash.png")
    assert page.url.rstrip("/") == live_server.url and "Tables" in page.content()
    signed_in = page.inner_text("a.who")
    ctx.close()

    local.refresh_from_db()
    assert local.is_superuser and local.is_staff and local.check_password("local-admin-pass-123")
    assert local.email == "admin@example.com" and not local.sso_identities.exists()
    new = User.objects.get(sso_identities__subject__isnull=False)
    assert new.pk != local.pk and new.username == "admin.sso" and signed_in == "admin.sso"
    assert roles_of("admin.sso") == ({roles.ANALYST}, False, False)

    # the local superuser still signs in with its password, with its rights
    ctx = browser.new_context()
    page = ctx.new_page()
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "local-admin-pass-123")
    page.click("form:has(#id_password) button[type=submit]")
    page.wait_for_load_state()
    assert page.goto(f"{live_server.url}/admin/auth/user/").status == 200  # only a superuser sees users
    ctx.close()

    # the same provider identity signs in again to its own account, not to a third one
    ctx, page = sign_in(browser, live_server.url, "admin")
    ctx.close()
    assert User.objects.filter(username__startswith="admin").count() == 2


def test_a_provider_user_named_like_a_local_account_in_capitals_gets_a_name_of_its_own(sso, live_server) -> None:
    """The provider's `ADMIN` is another person than deltaweb's `admin`, and must not get a
    username the sign-in (its throttle counts `ADMIN` as `admin`) or a reader of the audit trail
    would take for it: a new account's username is unique case-insensitively, after NFKC."""
    from tables.services.access.signin_throttle import normalized_username

    browser, _groups = sso
    local = User.objects.create_superuser("admin", "admin@example.com", "local-admin-pass-123")
    ctx, page = sign_in(browser, live_server.url, "ADMIN")
    assert page.url.rstrip("/") == live_server.url and "Tables" in page.content()
    signed_in = page.inner_text("a.who")
    ctx.close()
    new = User.objects.get(sso_identities__subject__isnull=False)
    assert new.pk != local.pk and normalized_username(new.username) != "admin"
    assert new.username == "ADMIN.sso" and signed_in == "ADMIN.sso"
    # the provider's `admin` then: its name is neither `admin` nor a spelling of `ADMIN.sso`
    ctx, page = sign_in(browser, live_server.url, "admin")
    ctx.close()
    names = [normalized_username(u) for u in User.objects.values_list("username", flat=True)]
    assert len(names) == 3 and len(set(names)) == 3, names
    local.refresh_from_db()
    assert local.is_superuser and local.check_password("local-admin-pass-123")
