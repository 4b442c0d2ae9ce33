"""API authentication: tokens (the token's user and its roles from one query,
tables.services.access.hot_queries) and the browser's session, whose CSRF refusal has its own
code (`csrf_failed`), as Django's own CSRF refusal under /api/ has.

DRF's own TokenAuthentication compiles an ORM query for the token and its user, and every
role check after it asks the database again; together they were a third of an API request.
"""

from __future__ import annotations

from drf_spectacular.authentication import SessionScheme
from rest_framework import exceptions
from rest_framework.authentication import SessionAuthentication, TokenAuthentication

from tables.services.access.hot_queries import token_user


class RoleTokenAuthentication(TokenAuthentication):
    """`Authorization: Token <key>`: the app's API tokens, with the user's roles known."""

    def authenticate_credentials(self, key: str):
        user = token_user(key)
        if user is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if not user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        return user, key


CSRF_MESSAGE = (
    "CSRF check failed: a request signed in with the session cookie needs the X-CSRFToken header "
    "(or use token authentication: Authorization: Token ...)."
)


class CsrfFailed(exceptions.PermissionDenied):
    default_code = "csrf_failed"


class CsrfSessionAuthentication(SessionAuthentication):
    """DRF's session authentication, its CSRF refusal told apart from a missing role."""

    def enforce_csrf(self, request) -> None:
        try:
            super().enforce_csrf(request)
        except exceptions.PermissionDenied as exc:
            raise CsrfFailed(CSRF_MESSAGE) from exc


class CsrfSessionScheme(SessionScheme):
    """The schema's `cookieAuth` for the session authentication above (drf-spectacular matches
    Django REST framework's class only, not subclasses)."""

    target_class = "tables.api.base.tokens.CsrfSessionAuthentication"
