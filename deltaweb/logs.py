"""Structured logs: one JSON object per line (DELTAWEB_LOG_FORMAT=json) carrying the request id,
the user, the table and the job a line is about, in web processes and in Celery tasks alike.

The request id comes from the request's `X-Request-ID` (when it is a short token) or is made
here; it is sent back in the response's `X-Request-ID`, and travels with every task the
request sends (a message header), so a worker's lines name the request that started them.
Django's own lines about a request (`Not Found: ...`, written after the middleware is done)
take it from the request they carry. Each request ends with one access line (logger
`deltaweb.access`): method, path, status, duration, user.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import orjson

from tables.services.errors import printable
from tables.services.ops.http_labels import method_label

request_id: ContextVar[str] = ContextVar("request_id", default="")
user: ContextVar[str] = ContextVar("user", default="")
table: ContextVar[str] = ContextVar("table", default="")
job: ContextVar[str] = ContextVar("job", default="")

HEADER = "deltaweb_request_id"  # the Celery message header
_GIVEN_ID = re.compile(r"[A-Za-z0-9._-]{8,64}")


class JsonFormatter(logging.Formatter):
    """A log record as one JSON line: time, level, logger, message, the context, any exception."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        about = getattr(record, "request", None)  # django.request's lines carry their request
        for name, var in (("request_id", request_id), ("user", user), ("table", table), ("job", job)):
            value = var.get() or getattr(about, f"log_{name}", "")
            if value:
                out[name] = value
        http = getattr(record, "http", None)
        if http:
            out["http"] = http
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


class RequestContextMiddleware:
    """Sets the request id (and, once known, the user and the table) for the request's lines."""

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        given = request.headers.get("X-Request-ID", "")
        rid = given if _GIVEN_ID.fullmatch(given) else uuid.uuid4().hex
        request.log_request_id = rid  # for the lines Django writes once this middleware is done
        tokens = [request_id.set(rid), user.set(""), table.set(""), job.set("")]
        t0 = time.perf_counter()
        try:
            response = self.get_response(request)
            _access(request, response.status_code, time.perf_counter() - t0)
        finally:
            request.log_user, request.log_table = user.get(), table.get()
            for var, token in zip((request_id, user, table, job), tokens, strict=True):
                var.reset(token)
        response["X-Request-ID"] = rid
        return response

    def process_view(self, request: Any, view_func: Any, view_args: Any, view_kwargs: dict[str, Any]) -> None:
        who = getattr(request, "user", None)
        if who is not None and getattr(who, "is_authenticated", False):
            user.set(who.get_username())
        named = view_kwargs.get("slug") or view_kwargs.get("id")
        if named:
            table.set(str(named)[:200])


access_log = logging.getLogger("deltaweb.access")


def _access(request: Any, status: int, seconds: float) -> None:
    """One line per request; the path bounded and escaped (a client chooses it)."""
    if not access_log.isEnabledFor(logging.INFO):
        return
    path = printable(request.path, 300)
    method = method_label(request.method)
    ms = round(seconds * 1000, 1)
    http = {"method": method, "path": path, "status": status, "ms": ms}
    access_log.info("%s %s %s %.1f ms", method, path, status, ms, extra={"http": http})


def connect_celery() -> None:
    """The request id into every task message sent, and out of it in the worker (with the job)."""
    from celery.signals import before_task_publish, task_postrun, task_prerun

    @before_task_publish.connect(weak=False)
    def _send_request_id(headers: dict[str, Any] | None = None, **_: Any) -> None:
        if headers is not None and request_id.get():
            headers[HEADER] = request_id.get()

    tokens: dict[str, list[Any]] = {}

    @task_prerun.connect(weak=False)
    def _take_request_id(task_id: str = "", task: Any = None, args: Any = None, **_: Any) -> None:
        request = getattr(task, "request", None)
        sent = getattr(request, HEADER, None) or (getattr(request, "headers", None) or {}).get(HEADER)
        # an eager task runs inside the request that sent it: its id stays
        mine = [job.set(f"{task.name}:{args[0]}" if args else str(getattr(task, "name", "")))]
        if sent:
            mine.append(request_id.set(str(sent)[:64]))
        tokens[task_id] = mine

    @task_postrun.connect(weak=False)
    def _restore(task_id: str = "", **_: Any) -> None:
        for token in reversed(tokens.pop(task_id, [])):
            token.var.reset(token)
