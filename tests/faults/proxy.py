"""A fault-injecting HTTP proxy for tests: a real threaded HTTP server on a free loopback port
that forwards every request to an upstream server (moto's S3) and relays its answer, except
where a test's rules tell it to misbehave.

Requests are forwarded byte for byte with their own Host header, so a client that signed them
for the proxy's address (AWS SigV4 signs the host) is verified upstream as if it had talked to
the server directly. Each request is matched against the rules in order; the first that fires
decides its fate:

- ``status500``, ``status503``, ``slowdown``: answered here with that error (SlowDown is S3's
  503 with the XML code), never forwarded;
- ``reset``: the connection is reset (RST) before anything is forwarded;
- ``reset_after``: forwarded, then the connection is reset instead of relaying the answer (the
  write landed, the client never heard);
- ``error_after``: forwarded, then answered 500 (the write landed, the server said it failed);
- ``latency``: forwarded after the rule's delay;
- ``truncate``: forwarded, then the answer's headers (its true Content-Length) and only half
  of its body are sent before the connection closes.

Every request is recorded (method, path, query, the status given or None for a reset, the
fault) so a test can count what the client tried.
"""

from __future__ import annotations

import http.client
import random
import socket
import struct
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

FAULTS = ("status500", "status503", "slowdown", "reset", "reset_after", "error_after", "latency", "truncate")

# headers of one connection, not of the message: never forwarded either way
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "upgrade", "expect"}

_ERROR_BODIES = {
    500: ("InternalError", "We encountered an internal error. Please try again."),
    503: ("ServiceUnavailable", "Service is unable to handle request."),
}


@dataclass
class Rule:
    """When a fault fires: requests whose method is `method` (any when None) and whose path
    contains `path`; the first `skip` such requests pass (skip=2 hits the third), then it fires
    `times` times (None: for ever), each with `probability` (drawn from the proxy's seeded
    random)."""

    fault: str
    method: str | None = None
    path: str = ""
    skip: int = 0
    times: int | None = 1
    probability: float = 1.0
    delay: float = 0.0  # seconds, for latency
    cut: int | None = None  # body bytes a truncate sends (None: half)
    seen: int = 0
    fired: int = 0

    def __post_init__(self) -> None:
        if self.fault not in FAULTS:
            raise ValueError(f"unknown fault {self.fault!r}; one of {', '.join(FAULTS)}")

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and self.path in path


@dataclass(frozen=True)
class Seen:
    """One request as the proxy handled it."""

    method: str
    path: str
    query: str
    status: int | None  # what the client was answered; None when the connection was reset
    fault: str | None


class _Reset(Exception):
    """Raised inside a handler to drop the connection with a reset."""


class FaultProxy:
    """The proxy in front of `upstream` (``http://host:port``); `url` is its own address."""

    def __init__(self, upstream: str, seed: int = 0) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.seed = seed
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._seen: list[Seen] = []
        self._random = random.Random(seed)
        self._server = _Server(("127.0.0.1", 0), _handler_for(self))
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True)

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the test's side

    def add(self, fault: str, **kwargs: object) -> Rule:
        """Add a rule (see Rule for its fields); rules are tried in the order they were added."""
        rule = Rule(fault, **kwargs)  # type: ignore[arg-type]
        with self._lock:
            self._rules.append(rule)
        return rule

    def reset(self, seed: int | None = None) -> None:
        """No rules, no record, the random sequence from `seed` (else the proxy's own) again."""
        with self._lock:
            self._rules.clear()
            self._seen.clear()
            self._random = random.Random(self.seed if seed is None else seed)

    def clear_record(self) -> None:
        with self._lock:
            self._seen.clear()

    def seen(self, method: str | None = None, path: str = "") -> list[Seen]:
        """The requests recorded (of `method`, whose path contains `path`), in order."""
        with self._lock:
            return [s for s in self._seen if (method is None or s.method == method) and path in s.path]

    def faults(self) -> list[Seen]:
        return [s for s in self.seen() if s.fault is not None]

    # -- the handler's side

    def _decide(self, method: str, path: str) -> Rule | None:
        with self._lock:
            for rule in self._rules:
                if not rule.matches(method, path):
                    continue
                rule.seen += 1
                if rule.seen <= rule.skip or (rule.times is not None and rule.fired >= rule.times):
                    continue
                if rule.probability < 1.0 and self._random.random() >= rule.probability:
                    continue
                rule.fired += 1
                return rule
        return None

    def _record(self, seen: Seen) -> None:
        with self._lock:
            self._seen.append(seen)


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a client's idle kept-alive connection must not hold the test run
    request_queue_size = 128  # read_many opens up to 32 connections at once


def _handler_for(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(_ProxyHandler):
        pass

    Handler.proxy = proxy
    return Handler


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the client's connection pool expects
    proxy: FaultProxy

    def log_message(self, format: str, *args: object) -> None:
        pass  # a test's output is no place for an access log

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except _Reset:
            self._reset()
        except (ConnectionError, TimeoutError, OSError):
            self.close_connection = True

    def _reset(self) -> None:
        # SO_LINGER 0: close() sends RST instead of FIN, what a crashed peer or a middlebox does
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _handle(self) -> None:
        path, _, query = self.path.partition("?")
        body = self._body()
        rule = self.proxy._decide(self.command, path)
        fault = rule.fault if rule else None

        def record(status: int | None) -> None:
            self.proxy._record(Seen(self.command, path, query, status, fault))

        if fault in ("status500", "status503", "slowdown"):
            status = 500 if fault == "status500" else 503
            code, message = (
                ("SlowDown", "Please reduce your request rate.") if fault == "slowdown" else _ERROR_BODIES[status]
            )
            record(status)
            self._answer(status, [("Content-Type", "application/xml")], _error_xml(code, message))
            return
        if fault == "reset":
            record(None)
            raise _Reset
        if fault == "latency" and rule is not None:
            threading.Event().wait(rule.delay)
        status, reason, headers, answer = self._forward(body)
        if fault == "reset_after":
            record(None)
            raise _Reset
        if fault == "error_after":
            record(500)
            self._answer(500, [("Content-Type", "application/xml")], _error_xml(*_ERROR_BODIES[500]))
            return
        record(status)
        if fault == "truncate" and rule is not None:
            cut = len(answer) // 2 if rule.cut is None else min(rule.cut, len(answer) - 1)
            self._answer(status, headers, answer[:cut], length=len(answer), reason=reason)
            self.close_connection = True
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
            return
        self._answer(status, headers, answer, reason=reason)

    def _forward(self, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        """(status, reason, headers, body) of the upstream's answer to this very request."""
        conn = http.client.HTTPConnection(*self.proxy.upstream, timeout=30)
        try:
            # the client's Host header goes upstream unchanged: it is part of the signature
            conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() not in _HOP_BY_HOP:
                    conn.putheader(name, value)
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body or None)
            resp = conn.getresponse()
            answer = resp.read()
            headers = [(k, v) for k, v in resp.getheaders() if k.lower() not in _HOP_BY_HOP]
            return resp.status, resp.reason, headers, answer
        finally:
            conn.close()

    def _answer(
        self,
        status: int,
        headers: list[tuple[str, str]],
        body: bytes,
        length: int | None = None,
        reason: str | None = None,
    ) -> None:
        self.send_response_only(status, reason)
        bodiless = self.command == "HEAD" or status in (204, 304) or 100 <= status < 200
        for name, value in headers:
            # a HEAD's Content-Length is the object's; otherwise the body's own is sent below
            if name.lower() != "content-length" or bodiless:
                self.send_header(name, value)
        if not bodiless:
            self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        if not bodiless:
            self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle


def _error_xml(code: str, message: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
        f"<RequestId>fault-proxy</RequestId></Error>"
    ).encode()
