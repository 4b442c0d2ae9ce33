"""Single sign-on with OpenID Connect (mozilla-django-oidc), on when DELTAWEB_OIDC_ISSUER is set.

The provider's endpoints come from its discovery document (`<issuer>/.well-known/openid-
configuration`, read once per process), unless a setting names them. Roles come from a
groups claim (DELTAWEB_OIDC_GROUPS_CLAIM, `groups` by default) through DELTAWEB_OIDC_ROLE_MAP
(`provider-group=role,...`; roles: analyst, approver, admin): at every sign-in a user gets
exactly the roles its groups give (granted and revoked in the provider, seen at the next
sign-in), and someone in no mapped group is refused. DELTAWEB_LOCAL_LOGIN=0 turns the
password form off.

Who someone is: the ID token's issuer and `sub`, verified (signature, audience = our client id,
issuer = the configured one, nonce), and kept on an `SsoIdentity` row. A name or e-mail never
picks an account: a new identity gets a new account, under a username no one has yet. A local
account is reached only through a link an administrator made in the admin console, and then
its flags and password are its own: groups decide only whether it may sign in this way.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import unicodedata
import urllib.request
from typing import Any

import jwt
from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from django.db import IntegrityError, transaction
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from tables.models import SsoIdentity
from tables.services.access import roles
from tables.services.access.hot_queries import user_row
from tables.services.access.signin_throttle import normalized_username

logger = logging.getLogger("tables.oidc")

# setting -> the discovery document's key
DISCOVERED = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
    "OIDC_OP_LOGOUT_ENDPOINT": "end_session_endpoint",
}
ADMIN = "admin"
_NOT_A_NAME = re.compile(r"[^\w.@+-]+")  # what Django's usernames may not hold
_discovery: dict[str, Any] = {}
_lock = threading.Lock()


def enabled() -> bool:
    return bool(getattr(settings, "DELTAWEB_OIDC_ISSUER", ""))


def discovery() -> dict[str, Any]:
    """The provider's discovery document, fetched once per process."""
    with _lock:
        if not _discovery:
            url = settings.DELTAWEB_OIDC_ISSUER.rstrip("/") + "/.well-known/openid-configuration"
            with urllib.request.urlopen(url, timeout=10) as answer:
                _discovery.update(json.load(answer))
        return _discovery


def setting(attr: str, *default: Any) -> Any:
    """A mozilla-django-oidc setting: the project's, else the provider's discovery document."""
    value = getattr(settings, attr, None)
    if value:
        return value
    if attr in DISCOVERED and enabled():
        found = discovery().get(DISCOVERED[attr])
        if found:
            return found
    if default:
        return default[0]
    raise ImproperlyConfigured(f"{attr} is not set and the provider's discovery document does not name it")


def role_map() -> dict[str, str]:
    """Provider group -> deltaweb role, from DELTAWEB_OIDC_ROLE_MAP (`group=role,...`)."""
    out = {}
    for pair in getattr(settings, "DELTAWEB_OIDC_ROLE_MAP", []):
        group, _, role = pair.partition("=")
        if group.strip() and role.strip() in (roles.ANALYST, roles.APPROVER, ADMIN):
            out[group.strip()] = role.strip()
    return out


def roles_of(claims: dict[str, Any]) -> set[str]:
    groups = claims.get(getattr(settings, "DELTAWEB_OIDC_GROUPS_CLAIM", "groups")) or []
    if isinstance(groups, str):
        groups = [groups]
    mapping = role_map()
    return {mapping[g] for g in groups if isinstance(g, str) and g in mapping}


def issuer() -> str:
    """The issuer ID tokens must name: the discovery document's (OpenID Connect Discovery says
    it equals the configured URL), else the configured URL itself."""
    configured = settings.DELTAWEB_OIDC_ISSUER.rstrip("/")
    try:
        return str(discovery().get("issuer") or configured).rstrip("/")
    except (OSError, ValueError):
        return configured


class Backend(OIDCAuthenticationBackend):
    """Users from the provider's verified identity, with exactly the roles their groups give."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Django builds every backend for each sign-in, the password form's too: a provider that
        # does not answer its discovery must not fail those (it refuses its own sign-ins below).
        self.unavailable: Exception | None = None
        try:
            super().__init__(*args, **kwargs)
        except Exception as exc:
            self.unavailable = exc

    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        return setting(attr, *args)

    def authenticate(self, request: Any, **kwargs: Any) -> Any:
        if self.unavailable is not None:
            if request is not None and "code" in request.GET:
                logger.error("single sign-on is unavailable: %s", self.unavailable)
            return None
        return super().authenticate(request, **kwargs)

    def _verify_jws(self, payload: Any, key: Any) -> dict[str, Any]:
        # The library decodes with verify_aud off and no issuer: a token minted for another
        # client of the same provider, or by another provider with a key we fetched, would pass.
        try:
            claims = jwt.decode(
                payload,
                key,
                algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=self.OIDC_RP_CLIENT_ID,
                options={"require": ["iss", "sub", "aud", "exp"], "verify_iss": False},
            )
        except jwt.InvalidTokenError as exc:
            raise SuspiciousOperation(f"the ID token was refused: {exc}") from exc
        expected = issuer()
        if str(claims.get("iss", "")).rstrip("/") != expected:
            raise SuspiciousOperation(f"the ID token's issuer is not {expected}")
        return claims

    def get_userinfo(self, access_token: str, id_token: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The userinfo endpoint's claims, checked to be about the ID token's subject (OpenID
        Connect Core 5.3.2), with the verified `iss` and `sub` of the token itself."""
        info = super().get_userinfo(access_token, id_token, payload)
        if not isinstance(info, dict) or str(info.get("sub", "")) != str(payload["sub"]):
            raise SuspiciousOperation("the userinfo answer is about another subject than the ID token")
        return {**info, "iss": str(payload["iss"]).rstrip("/"), "sub": str(payload["sub"])}

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        if not roles_of(claims):
            # refused, and whatever roles an earlier sign-in gave are taken back now
            link = self._link(claims)
            if link is not None and link.created:
                self.update_user(link.user, claims)
            logger.warning("sign-in refused: %s is in no group mapped to a role", _describe(claims))
            if getattr(self, "request", None) is not None:
                self.request.sso_failure = "refused"  # the page says why (tables/web/account/sso.py)
            return False
        return super().verify_claims(claims)

    def filter_users_by_claims(self, claims: dict[str, Any]):
        link = self._link(claims)
        return [link.user] if link is not None else []

    def create_user(self, claims: dict[str, Any]):
        # two first sign-ins of one identity at once: the second finds the first's link
        for _ in range(5):
            try:
                with transaction.atomic():
                    user = self.UserModel.objects.create_user(free_username(claims), email=_email(claims))
                    SsoIdentity.objects.create(issuer=claims["iss"], subject=claims["sub"], user=user)
                break
            except IntegrityError:
                link = self._link(claims)
                if link is not None:
                    return self.update_user(link.user, claims)
        else:
            raise SuspiciousOperation("no free username for a new single sign-on account")
        logger.info("new account %s for %s", user.username, _describe(claims))
        return self.update_user(user, claims)

    def update_user(self, user, claims: dict[str, Any]):
        link = self._link(claims)
        if link is None or not link.created:
            # a local account an administrator linked: its flags, password and e-mail are its own
            logger.info("signed in to the linked local account %s as %s", user.username, _describe(claims))
            return user
        granted = roles_of(claims)
        user.email = _email(claims) or user.email
        user.is_staff = bool(granted & {roles.APPROVER, ADMIN})  # approvers work in the admin console
        user.is_superuser = ADMIN in granted
        user.set_unusable_password()
        user.save()
        for role in (roles.ANALYST, roles.APPROVER):
            group, _ = Group.objects.get_or_create(name=role)
            (user.groups.add if role in granted or ADMIN in granted else user.groups.remove)(group)
        logger.info("roles from the provider for %s: %s", user.username, sorted(granted))
        return user

    def get_user(self, user_id):
        user = user_row(user_id)  # the user and its roles in one query, as the password backend
        return user if user is not None and self.user_can_authenticate(user) else None

    @staticmethod
    def _link(claims: dict[str, Any]) -> SsoIdentity | None:
        if not claims.get("iss") or not claims.get("sub"):
            return None
        return (
            SsoIdentity.objects.select_related("user")
            .filter(issuer=str(claims["iss"])[:500], subject=str(claims["sub"])[:255])
            .first()
        )


def _email(claims: dict[str, Any]) -> str:
    email = claims.get("email")
    return email[:254] if isinstance(email, str) and "@" in email else ""


def _describe(claims: dict[str, Any]) -> str:
    return f"subject {str(claims.get('sub', ''))[:80]!r} of {str(claims.get('iss', ''))[:200]}"


def free_username(claims: dict[str, Any]) -> str:
    """A username for a new account: the provider's preferred name (else the e-mail, else the
    subject), NFKC-normalised and cleaned to what Django accepts, and made distinct when an
    account has it already (`name.sso`, `name.sso2`, ...) - a clash never means "the same
    person". Distinct as the sign-in compares names (NFKC, case-folded: its throttle counts
    `ADMIN` and `ａｄｍｉｎ` as `admin`), not merely byte for byte."""
    from django.contrib.auth import get_user_model

    raw = claims.get("preferred_username") or claims.get("email") or claims.get("sub") or "user"
    base = _NOT_A_NAME.sub("", unicodedata.normalize("NFKC", str(raw)))[:140] or "user"
    # every name compared as the sign-in compares it: once per new account, so one pass is cheap
    taken = {normalized_username(name) for name in get_user_model().objects.values_list("username", flat=True)}
    for candidate in [base, f"{base}.sso", *(f"{base}.sso{n}" for n in range(2, 1000))]:
        if normalized_username(candidate) not in taken:
            return candidate
    raise SuspiciousOperation("no free username for a new single sign-on account")
