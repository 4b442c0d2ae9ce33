"""Single sign-on as an attacker tries it, without a browser: ID tokens for another client or
from another issuer, a forged or replayed state, a provider that does not answer, and claims
that name a local account. Each ends on the sign-in page with its own message, never a 500,
and no local account is reached or changed."""

from __future__ import annotations

import time

import jwt
import pytest
from django.contrib.auth.models import User
from django.core.exceptions import SuspiciousOperation

from tables.models import SsoIdentity
from tables.services.access import oidc, roles
from tables.web.account.sso import MESSAGES
from tests.conftest import free_port

pytestmark = pytest.mark.django_db
SECRET = "client-secret-for-hs256-tokens-0123456789"


@pytest.fixture
def sso_settings(settings):
    """Single sign-on on, towards a provider that is not running (a closed loopback port)."""
    issuer = f"http://127.0.0.1:{free_port()}/openid"
    oidc._discovery.clear()
    settings.DELTAWEB_OIDC_ISSUER = issuer
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = "deltaweb", SECRET
    settings.OIDC_RP_SIGN_ALGO = "HS256"
    for name in ("AUTHORIZATION", "TOKEN", "USER", "JWKS"):
        setattr(settings, f"OIDC_OP_{name}_ENDPOINT", f"{issuer}/{name.lower()}")
    settings.DELTAWEB_OIDC_ROLE_MAP = ["data-analysts=analyst", "platform-admins=admin"]
    settings.AUTHENTICATION_BACKENDS = ["tables.services.access.oidc.Backend", *settings.AUTHENTICATION_BACKENDS]
    yield issuer
    oidc._discovery.clear()


def token(issuer: str, **claims) -> str:
    now = int(time.time())
    body = {"iss": issuer, "sub": "s-1", "aud": "deltaweb", "exp": now + 300, "iat": now, "nonce": "n", **claims}
    return jwt.encode(body, SECRET, algorithm="HS256")


def test_an_id_token_for_another_client_or_from_another_issuer_is_refused(sso_settings) -> None:
    backend = oidc.Backend()
    assert backend.verify_token(token(sso_settings), nonce="n")["sub"] == "s-1"
    for bad in (
        token(sso_settings, aud="another-app"),
        token("http://evil.example/openid"),
        token(sso_settings, nonce="replayed"),
        token(sso_settings, exp=int(time.time()) - 10),
        jwt.encode({"iss": sso_settings, "aud": "deltaweb", "exp": int(time.time()) + 60}, SECRET, "HS256"),  # no sub
        jwt.encode({"iss": sso_settings, "sub": "s-1", "aud": "deltaweb", "exp": 9999999999}, "wrong-key", "HS256"),
    ):
        with pytest.raises(SuspiciousOperation):
            backend.verify_token(bad, nonce="n")


def test_claims_naming_local_accounts_reach_none_of_them(sso_settings) -> None:
    """By preferred_username, by e-mail used as a name, or by e-mail: each clash gets a new,
    distinct account; the local ones keep their flags, password and e-mail."""
    admin = User.objects.create_superuser("admin", "admin@example.com", "admin-pass-123")
    analyst = User.objects.create_user("analyst", "analyst@example.com", "analyst-pass-123")
    backend = oidc.Backend()
    attacks = [
        {"preferred_username": "admin", "email": "x@evil.example", "groups": ["data-analysts"]},
        {"email": "analyst", "groups": ["platform-admins"]},
        {"email": "admin@example.com", "groups": ["platform-admins"]},
    ]
    made = []
    for n, claims in enumerate(attacks):
        claims = {**claims, "iss": sso_settings, "sub": f"attacker-{n}"}
        assert backend.filter_users_by_claims(claims) == []
        made.append(backend.create_user(claims))
    assert [u.username for u in made] == ["admin.sso", "analyst.sso", "admin@example.com"]
    admin.refresh_from_db()
    analyst.refresh_from_db()
    assert admin.is_superuser and admin.check_password("admin-pass-123") and admin.email == "admin@example.com"
    assert not analyst.is_superuser and analyst.check_password("analyst-pass-123")
    assert made[1].is_superuser  # the provider made its own account an admin: that is its right
    # the same identity again reaches its own account
    again = {**attacks[0], "iss": sso_settings, "sub": "attacker-0"}
    assert backend.filter_users_by_claims(again) == [made[0]]


def test_a_local_account_an_admin_linked_keeps_its_rights(sso_settings) -> None:
    admin = User.objects.create_superuser("admin", "admin@example.com", "admin-pass-123")
    SsoIdentity.objects.create(issuer=sso_settings, subject="the-admin", user=admin, created=False)
    claims = {"iss": sso_settings, "sub": "the-admin", "email": "new@example.com", "groups": ["data-analysts"]}
    backend = oidc.Backend()
    [user] = backend.filter_users_by_claims(claims)
    backend.update_user(user, claims)
    admin.refresh_from_db()
    assert admin.is_superuser and admin.is_staff and admin.check_password("admin-pass-123")
    assert admin.email == "admin@example.com"
    assert not admin.groups.filter(name=roles.ANALYST).exists()


def test_only_superusers_link_identities_in_the_admin_console(sso_settings, client) -> None:
    from tests.web.pages.test_api import make_user

    approver = make_user("appr", group=roles.APPROVER)
    approver.is_staff = True
    approver.save()
    client.force_login(approver)
    assert client.get("/admin/tables/ssoidentity/add/").status_code == 403
    admin = User.objects.create_superuser("root", "root@example.com", "root-pass-123")
    client.force_login(admin)
    target = User.objects.create_user("local", password="local-pass-123")
    r = client.post(
        "/admin/tables/ssoidentity/add/", {"issuer": sso_settings + "/", "subject": "sub-9", "user": target.pk}
    )
    assert r.status_code == 302
    link = SsoIdentity.objects.get(subject="sub-9")
    assert link.user == target and not link.created and link.issuer == sso_settings


def reason(response) -> str:
    assert response.status_code == 302, response.status_code
    return response["Location"].rsplit("sso=", 1)[-1]


def test_a_forged_or_replayed_state_gets_its_own_message(sso_settings, client, caplog) -> None:
    r = client.get("/oidc/callback/", {"code": "c", "state": "forged"})
    assert reason(r) == "lost"
    session = client.session
    session["oidc_states"] = {"real": {"nonce": "n", "code_verifier": None, "added_on": time.time()}}
    session.save()
    assert reason(client.get("/oidc/callback/", {"code": "c", "state": "other"})) == "lost"
    # the right state, but the provider's token endpoint does not answer
    assert reason(client.get("/oidc/callback/", {"code": "c", "state": "real"})) == "failed"
    # replayed: that state was used up
    assert reason(client.get("/oidc/callback/", {"code": "c", "state": "real"})) == "lost"
    page = client.get("/accounts/login/?sso=lost").content.decode()
    assert "did not start in this browser session" in page
    assert any("state was not issued" in m for m in caplog.messages)
    assert any("single sign-on failed" in m for m in caplog.messages)


def test_a_provider_that_cannot_be_reached_is_said_so(sso_settings, settings, client) -> None:
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = ""  # so it must come from the (unreachable) discovery document
    settings.OIDC_OP_TOKEN_ENDPOINT = ""
    r = client.get("/oidc/authenticate/")
    assert reason(r) == "unavailable"
    assert MESSAGES["unavailable"].split(";")[0] in client.get(r["Location"]).content.decode()
    # the password form still works while the provider is down
    User.objects.create_user("local", password="local-pass-123")
    r = client.post("/accounts/login/", {"username": "local", "password": "local-pass-123"})
    assert r.status_code == 302 and "_auth_user_id" in client.session


def test_new_accounts_take_names_no_account_has_in_any_case_or_unicode_spelling(sso_settings) -> None:
    """`ADMIN`, fullwidth `ａｄｍｉｎ`, `STRAßE`: each a new account whose name, NFKC-normalised
    and case-folded (as the sign-in and its throttle compare names), is no other account's."""
    from tables.services.access.signin_throttle import normalized_username

    for name in ("admin", "strasse", "Dana"):
        User.objects.create_user(name, password=f"{name}-pass-123")
    backend = oidc.Backend()
    for n, name in enumerate(["ADMIN", "ａｄｍｉｎ", "Admin", "STRAßE", "dana", "DANA.SSO", "admin.sso"]):
        claims = {"preferred_username": name, "groups": ["data-analysts"], "iss": sso_settings, "sub": f"s-{n}"}
        user = backend.create_user(claims)
        assert user.sso_identities.get().subject == f"s-{n}"
    names = [normalized_username(u) for u in User.objects.values_list("username", flat=True)]
    assert len(names) == 10 and len(set(names)) == 10, sorted(names)
    assert User.objects.get(sso_identities__subject="s-0").username == "ADMIN.sso"
