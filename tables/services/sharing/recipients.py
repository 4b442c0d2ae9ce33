"""Recipients' bearer tokens: issued (shown once, only the SHA-256 kept), expiring, revocable;
the profile file a recipient downloads; and the authentication of every protocol request."""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from tables.models import Recipient
from tables.services.sharing.errors import UNAUTHENTICATED, SharingError

TOKEN_BYTES = 32
PROFILE_VERSION = 1


def token_days() -> int:
    return int(getattr(settings, "DELTAWEB_SHARING_TOKEN_DAYS", 90))


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def issue_token(recipient: Recipient, days: int | None = None) -> str:
    """A new token for `recipient` (the old one stops working at once), valid for `days`; the
    token is returned once and never stored."""
    token = secrets.token_urlsafe(TOKEN_BYTES)
    recipient.token_hash = digest(token)
    recipient.token_hint = token[:4]
    recipient.expires_at = timezone.now() + timedelta(days=days if days is not None else token_days())
    recipient.revoked_at = None
    recipient.save(update_fields=["token_hash", "token_hint", "expires_at", "revoked_at"])
    return token


def revoke(recipient: Recipient) -> None:
    recipient.revoked_at = timezone.now()
    recipient.save(update_fields=["revoked_at"])


def profile(recipient: Recipient, token: str, endpoint: str) -> dict[str, Any]:
    """The profile file (PROTOCOL.md, "Profile File Format") for a token just issued."""
    out: dict[str, Any] = {"shareCredentialsVersion": PROFILE_VERSION, "endpoint": endpoint, "bearerToken": token}
    if recipient.expires_at is not None:
        out["expirationTime"] = _iso(recipient.expires_at)
    return out


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def authenticate(header: str | None) -> Recipient:
    """The recipient of an `Authorization: Bearer <token>` header, else UNAUTHENTICATED (a
    missing, unknown, expired or revoked token alike: which one is not told)."""
    if not header or not header.startswith("Bearer "):
        raise SharingError(UNAUTHENTICATED, "A bearer token is required: Authorization: Bearer <token>.")
    token = header[len("Bearer ") :].strip()
    if not token or len(token) > 200:
        raise SharingError(UNAUTHENTICATED, "The bearer token is not valid.")
    recipient = Recipient.objects.filter(token_hash=digest(token)).first()
    now = timezone.now()
    if recipient is None or recipient.revoked_at is not None:
        raise SharingError(UNAUTHENTICATED, "The bearer token is not valid.")
    if recipient.expires_at is not None and recipient.expires_at <= now:
        raise SharingError(UNAUTHENTICATED, "The bearer token has expired.")
    return recipient
