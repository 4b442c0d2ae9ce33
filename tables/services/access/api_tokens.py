"""API tokens: one per user, expiring after DELTAWEB_TOKEN_DAYS, shown once when issued,
rotated or revoked by its owner from the account page (or by signing in through the token
endpoint again once it has expired). The authentication refuses an expired token in the same
query that finds its user (tables.services.access.hot_queries)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from rest_framework.authtoken.models import Token

from tables.models import TokenExpiry

CHOICES_DAYS = (7, 30, 90, 365)


def default_days() -> int:
    return int(getattr(settings, "DELTAWEB_TOKEN_DAYS", 90))


def issue(user, days: int | None = None) -> tuple[Token, datetime]:
    """A new token for `user` (the old one stops working at once), valid for `days`."""
    days = days if days in CHOICES_DAYS else default_days()
    expires = timezone.now() + timedelta(days=days)
    with transaction.atomic():
        Token.objects.filter(user=user).delete()
        token = Token.objects.create(user=user)
        TokenExpiry.objects.create(token=token, expires_at=expires)
    return token, expires


def for_sign_in(user) -> Token:
    """The token the token endpoint answers: the user's own while it is valid, else a new one."""
    token = Token.objects.filter(user=user).select_related("expiry").first()
    if token is not None and not _expired(token):
        return token
    return issue(user)[0]


def revoke(user) -> bool:
    return Token.objects.filter(user=user).delete()[0] > 0


def describe(user) -> dict[str, Any] | None:
    """What the account page shows of a user's token (never the key itself)."""
    token = Token.objects.filter(user=user).select_related("expiry").first()
    if token is None:
        return None
    expires = getattr(getattr(token, "expiry", None), "expires_at", None)
    return {"created": token.created, "expires": expires, "expired": _expired(token), "hint": token.key[:4]}


def _expired(token: Token) -> bool:
    expiry = getattr(token, "expiry", None)
    return expiry is not None and expiry.expires_at is not None and expiry.expires_at <= timezone.now()
