"""API token authentication: the token's user and its roles from one query (tables.services.access.hot_queries).

DRF's own TokenAuthentication compiles an ORM query for the token and its user, and every
role check after it asks the database again; together they were a third of an API request.
"""

from __future__ import annotations

from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

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
