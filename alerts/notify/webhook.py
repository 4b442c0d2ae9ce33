"""Sending one webhook: the JSON payload, its HMAC-SHA256 signature, the POST to the checked
address with a timeout, and what the receiver answered.

Signature: header `X-Deltaweb-Signature: sha256=<hex>` where hex is
HMAC-SHA256(secret, "<X-Deltaweb-Timestamp>.<body>"); a receiver recomputes it and refuses
old timestamps (replays). `Idempotency-Key` (also `X-Deltaweb-Delivery`) is the same on every
retry and redelivery of one delivery.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from alerts.notify.urlcheck import Target, check

MAX_RESPONSE = 64 * 1024


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """`sha256=<hex>` of "<timestamp>.<body>" under `secret`."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def bounded_body(payload: dict[str, Any], limit: int) -> bytes:
    """The payload as JSON in at most `limit` bytes: operationParameters and metrics (from the
    table's log, unbounded) are dropped first, with `truncated: true` saying so."""
    body = json.dumps(payload, separators=(",", ":"), default=str).encode()
    if len(body) <= limit:
        return body
    slim = {**payload, "operationParameters": None, "metrics": None, "truncated": True}
    slim["alert"] = {**slim["alert"], "explanation": str(slim["alert"].get("explanation", ""))[:200]}
    return json.dumps(slim, separators=(",", ":"), default=str).encode()[:limit]


class _Pinned(http.client.HTTPSConnection):
    """An HTTP(S) connection to an address checked beforehand, with the host's name in the
    Host header and (for https) in SNI and certificate checks."""

    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout, context=ssl.create_default_context())
        self._target = target

    def connect(self) -> None:
        sock = socket.create_connection((self._target.address, self._target.port), self.timeout)
        if self._target.scheme == "https":
            sock = self._context.wrap_socket(sock, server_hostname=self._target.host)
        self.sock = sock


@dataclass(frozen=True)
class Outcome:
    ok: bool
    status_code: int | None
    error: str


def post(url: str, secret: str, key: str, body: bytes) -> Outcome:
    """POST `body` to `url` (checked again now), signed; never raises for the receiver's faults."""
    target = check(url)
    timeout = float(getattr(settings, "DELTAWEB_WEBHOOK_TIMEOUT_SECONDS", 10))
    stamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "deltaweb-alerts",
        "X-Deltaweb-Event": "alert",
        "X-Deltaweb-Delivery": key,
        "Idempotency-Key": key,
        "X-Deltaweb-Timestamp": stamp,
        "X-Deltaweb-Signature": signature(secret, stamp, body),
    }
    conn = _Pinned(target, timeout)
    try:
        conn.request("POST", target.path, body=body, headers=headers)
        resp = conn.getresponse()
        resp.read(MAX_RESPONSE)  # redirects are not followed: a 3xx is a failed delivery
        code = resp.status
        return Outcome(200 <= code < 300, code, "" if 200 <= code < 300 else f"HTTP {code} {resp.reason}"[:500])
    except TimeoutError:
        return Outcome(False, None, f"no answer within {timeout:g} s")
    except (OSError, http.client.HTTPException) as exc:
        return Outcome(False, None, f"{type(exc).__name__}: {exc}"[:500])
    finally:
        conn.close()
