"""Real receivers on loopback for the delivery tests: an HTTP server that answers a scripted
sequence (status codes, or a hang longer than the sender's timeout) and records every request,
and an SMTP server (aiosmtpd) that records every message."""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from dataclasses import dataclass, field
from email import message_from_bytes
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

HANG = "hang"


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    answered: int | str


@dataclass
class WebhookReceiver:
    """Answers the scripted replies in order (then 200 for ever); HANG sleeps `hang_seconds`.
    With `fail_per_key`, the first that many requests of each idempotency key get 503."""

    script: list[int | str] = field(default_factory=list)
    fail_per_key: int = 0
    hang_seconds: float = 5.0
    requests: list[Received] = field(default_factory=list)

    def start(self) -> str:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                key = self.headers.get("Idempotency-Key", "")
                seen = sum(1 for r in receiver.requests if r.headers.get("idempotency-key") == key)
                if seen < receiver.fail_per_key:
                    reply: int | str = 503
                else:
                    reply = receiver.script.pop(0) if receiver.script else 200
                receiver.requests.append(Received({k.lower(): v for k, v in self.headers.items()}, body, reply))
                if reply == HANG:
                    time.sleep(receiver.hang_seconds)
                    reply = 200
                try:
                    self.send_response(int(reply))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass  # the sender gave up (timeout)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def accepted(self) -> list[Received]:
        return [r for r in self.requests if r.answered == 200]


def verify(secret: str, received: Received) -> bool:
    """What a receiver does: recompute the HMAC over "<timestamp>.<body>" and compare."""
    stamp = received.headers["x-deltaweb-timestamp"]
    mac = hmac.new(secret.encode(), stamp.encode() + b"." + received.body, hashlib.sha256).hexdigest()
    return hmac.compare_digest("sha256=" + mac, received.headers["x-deltaweb-signature"])


class MailSink:
    """aiosmtpd's handler: keeps every message it receives."""

    def __init__(self) -> None:
        self.messages: list = []

    async def handle_DATA(self, server, session, envelope):
        msg = message_from_bytes(envelope.content)
        self.messages.append((envelope.rcpt_tos, msg))
        return "250 OK"


def wait_until(check, timeout: float = 60, every: float = 0.2):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    return check()


@pytest.fixture
def receiver():
    """A started WebhookReceiver with its URL as `.url` (import it into a test module)."""
    r = WebhookReceiver()
    r.url = r.start()
    yield r
    r.stop()
