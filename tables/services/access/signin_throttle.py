"""The sign-in throttle both doors share, the form (tables.web.account.security) and the API's token
endpoint: failed passwords counted per client address (X-Forwarded-For only from
DELTAWEB_TRUSTED_PROXIES proxies) and normalised username, in the cache every process shares
(settings.CACHES["shared"])."""

from __future__ import annotations

import hashlib
import unicodedata

from django.conf import settings
from django.core.cache import caches
from django.http import HttpRequest

PERIODS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """'10/minute' -> (10, 60): the number of requests and the window in seconds (DRF's syntax)."""
    count, _, period = (rate or "").partition("/")
    try:
        n = int(count)
    except ValueError as exc:
        raise ValueError(f"a rate is 'N/second|minute|hour|day', not {rate!r}") from exc
    seconds = PERIODS.get(period.strip().lower())
    if seconds is None or n < 1:
        raise ValueError(f"a rate is 'N/second|minute|hour|day', not {rate!r}")
    return n, seconds


def client_address(request: HttpRequest) -> str:
    """The client's address for throttling: REMOTE_ADDR, unless DELTAWEB_TRUSTED_PROXIES says
    that many proxies of ours append to X-Forwarded-For; then the address the outermost of them
    saw. Without trusted proxies the header is the client's own to forge, and is ignored."""
    hops = int(getattr(settings, "DELTAWEB_TRUSTED_PROXIES", 0) or 0)
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if hops > 0 and forwarded:
        addresses = [a.strip() for a in forwarded.split(",") if a.strip()]
        if addresses:
            return addresses[-min(hops, len(addresses))][:64]
    return request.META.get("REMOTE_ADDR", "") or "unknown"


def normalized_username(username: str) -> str:
    """The username as the sign-in compares it (NFKC, as Django's form normalises it:
    'ａpprover' and '𝐚pprover' are 'approver'), case-folded, so every spelling shares a count."""
    return unicodedata.normalize("NFKC", str(username or "")).strip().casefold()[:150]


def login_key(request: HttpRequest, username: str) -> str:
    # hashed: the address and the name are the client's own text (a NUL is refused by
    # PostgreSQL, the shared cache's table may be there), and a key has a bounded length
    who = f"{client_address(request)}\0{normalized_username(username)}"
    return f"login-fail:{hashlib.sha256(who.encode('utf-8', 'surrogatepass')).hexdigest()[:40]}"


def login_refused_for(request: HttpRequest, username: str) -> int | None:
    """The window in seconds if this address and username have reached DELTAWEB_LOGIN_RATE
    failures (the password is then not checked at all), else None."""
    limit, window = parse_rate(getattr(settings, "DELTAWEB_LOGIN_RATE", "10/minute"))
    return window if (caches["shared"].get(login_key(request, username)) or 0) >= limit else None


def record_login(request: HttpRequest, username: str, succeeded: bool) -> None:
    """A success clears the count; a failure adds one. The window starts at the first failure
    and is not extended by later ones."""
    cache = caches["shared"]
    key = login_key(request, username)
    if succeeded:
        cache.delete(key)
        return
    _, window = parse_rate(getattr(settings, "DELTAWEB_LOGIN_RATE", "10/minute"))
    if not cache.add(key, 1, window):
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.add(key, 1, window)


# --- password reset requests --------------------------------------------------------------
# Every request counts (there is no failure to tell apart), per client address and per address
# asked for: neither one client walking through addresses nor many clients mailing one person.


def _reset_keys(request: HttpRequest, email: str) -> list[str]:
    whom = normalized_username(email)
    parts = [f"from\0{client_address(request)}", f"to\0{whom}"]
    return [f"reset:{hashlib.sha256(p.encode('utf-8', 'surrogatepass')).hexdigest()[:40]}" for p in parts]


def reset_refused_for(request: HttpRequest, email: str) -> int | None:
    """The window in seconds if this client or this address has made DELTAWEB_PASSWORD_RESET_RATE
    requests already, else None."""
    limit, window = parse_rate(getattr(settings, "DELTAWEB_PASSWORD_RESET_RATE", "5/hour"))
    counts = caches["shared"].get_many(_reset_keys(request, email))
    return window if any((n or 0) >= limit for n in counts.values()) else None


def record_reset(request: HttpRequest, email: str) -> None:
    cache = caches["shared"]
    _, window = parse_rate(getattr(settings, "DELTAWEB_PASSWORD_RESET_RATE", "5/hour"))
    for key in _reset_keys(request, email):
        if not cache.add(key, 1, window):
            try:
                cache.incr(key)
            except ValueError:  # expired between add and incr
                cache.add(key, 1, window)
