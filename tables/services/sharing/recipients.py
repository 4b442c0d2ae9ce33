"""Recipients' bearer tokens: issued (shown once, only the SHA-256 kept), expiring, revocable;
the profile file a recipient downloads; and the authentication of every protocol request, with
failed tokens counted per client address (DELTAWEB_SHARING_TOKEN_RATE, as the sign-in throttle
counts failed passwords) and refused alike whether unknown, expired or revoked."""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.http import HttpRequest
from django.utils import timezone

from tables.models import Recipient
from tables.services.access.signin_throttle import client_address, parse_rate
from tables.services.sharing.errors import THROTTLED, UNAUTHENTICATED, SharingError

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


def _failures_key(request: HttpRequest) -> str:
    address = client_address(request)
    return f"sharing-token-fail:{hashlib.sha256(address.encode('utf-8', 'surrogatepass')).hexdigest()[:40]}"


def _rate() -> tuple[int, int]:
    return parse_rate(getattr(settings, "DELTAWEB_SHARING_TOKEN_RATE", "20/minute"))


def _count_failure(request: HttpRequest) -> None:
    """One more wrong token from this address; the window starts at the first and is not
    extended by later ones."""
    cache, key = caches["shared"], _failures_key(request)
    _, window = _rate()
    if not cache.add(key, 1, window):
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.add(key, 1, window)


def authenticate(request: HttpRequest) -> Recipient:
    """The recipient of the request's `Authorization: Bearer <token>`, else UNAUTHENTICATED (a
    missing, unknown, expired or revoked token alike: which one is not told). An address that
    sent DELTAWEB_SHARING_TOKEN_RATE wrong tokens is refused (429) before any token is looked at
    until its window ends."""
    header = request.headers.get("Authorization")
    if not header or not header.startswith("Bearer "):
        raise SharingError(UNAUTHENTICATED, "A bearer token is required: Authorization: Bearer <token>.")
    limit, window = _rate()
    if (caches["shared"].get(_failures_key(request)) or 0) >= limit:
        raise SharingError(
            THROTTLED, f"Too many wrong bearer tokens from this address: try again in {window} s.", retry_after=window
        )
    token = header[len("Bearer ") :].strip()
    recipient = Recipient.objects.filter(token_hash=digest(token)).first() if 0 < len(token) <= 200 else None
    if (
        recipient is None
        or recipient.revoked_at is not None
        or (recipient.expires_at is not None and recipient.expires_at <= timezone.now())
    ):
        _count_failure(request)
        raise SharingError(UNAUTHENTICATED, "The bearer token is not valid.")
    return recipient
