"""Single sign-on with OpenID Connect (mozilla-django-oidc), on when DELTAWEB_OIDC_ISSUER is set.

The provider's endpoints come from its discovery document (`<issuer>/.well-known/openid-
configuration`, read once per process), unless a setting names them. Roles come from a
groups claim (DELTAWEB_OIDC_GROUPS_CLAIM, `groups` by default) through DELTAWEB_OIDC_ROLE_MAP
(`provider-group=role,...`; roles: analyst, approver, admin): at every sign-in a user gets
exactly the roles its groups give (granted and revoked in the provider, seen at the next
sign-in), and someone in no mapped group is refused. DELTAWEB_LOCAL_LOGIN=0 turns the
password form off.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.request
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ImproperlyConfigured
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from tables.services.access import roles
from tables.services.access.hot_queries import user_row

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


class Backend(OIDCAuthenticationBackend):
    """Users from the provider's claims, with exactly the roles their groups give."""

    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        return setting(attr, *args)

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        if not roles_of(claims):
            # refused, and whatever roles an earlier sign-in gave are taken back now
            known = self.UserModel.objects.filter(username=self._username(claims)).first()
            if known is not None and not known.has_usable_password():
                self.update_user(known, claims)
            logger.warning("sign-in refused: %s is in no group mapped to a role", self._username(claims))
            return False
        return super().verify_claims(claims)

    def filter_users_by_claims(self, claims: dict[str, Any]):
        return self.UserModel.objects.filter(username=self._username(claims))

    def create_user(self, claims: dict[str, Any]):
        user = self.UserModel.objects.create_user(self._username(claims), email=claims.get("email", ""))
        return self.update_user(user, claims)

    def update_user(self, user, claims: dict[str, Any]):
        granted = roles_of(claims)
        user.email = claims.get("email", user.email) or user.email
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
    def _username(claims: dict[str, Any]) -> str:
        name = claims.get("preferred_username") or claims.get("email") or claims.get("sub") or ""
        return str(name)[:150]
