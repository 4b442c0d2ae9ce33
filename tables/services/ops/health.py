"""Readiness: whether this process can serve, part by part, each check short and bounded.

- database: one `SELECT 1`;
- cache: a write and a read of the shared cache (Redis with DELTAWEB_CACHE_URL, else its database table);
- broker: the task queue answers (a connection, 2 s at most);
- workers: at least one Celery worker answers a ping (1 s);
- spark: the Spark Connect server (DELTAWEB_SPARK_REMOTE, `sc://host:port`) or a cluster master
  (`spark://host:port`) accepts a connection; a local master needs none;
- roots: every local allowed root exists and can be read.

Answers name what is down, never a password, a path or a host.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from urllib.parse import urlsplit

from celery import current_app
from django.conf import settings
from django.core.cache import caches
from django.db import connection

from tables.delta.storage.api import is_uri


def _database() -> str:
    with connection.cursor() as cur:
        cur.execute("SELECT 1")
        cur.fetchone()
    return "ok"


def _cache() -> str:
    key, value = f"readyz:{uuid.uuid4().hex}", "1"
    cache = caches["shared"]
    cache.set(key, value, 10)
    if cache.get(key) != value:
        raise RuntimeError("the cache did not keep a value")
    cache.delete(key)
    return "ok"


def _broker() -> str:
    app = current_app  # the project's Celery app, as jobs.send uses it (no import of the project)
    if app.conf.task_always_eager:
        return "eager"
    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)
    return "ok"


def _workers() -> str:
    app = current_app
    if app.conf.task_always_eager:
        return "eager"
    answers = app.control.ping(timeout=1.0)
    if not answers:
        raise RuntimeError("no worker answered")
    return f"{len(answers)} answering"


def _spark() -> str:
    remote = str(getattr(settings, "DELTAWEB_SPARK_REMOTE", "") or "")
    if remote:
        # sc://host:port/;params: the address only (a token may be among the parameters)
        parts = urlsplit("http://" + remote.split("://", 1)[-1].split("/", 1)[0].split(";", 1)[0])
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 15002), timeout=1.0):
            return "connect"
    master = str(getattr(settings, "SPARK_MASTER", "local[*]"))
    if not master.startswith("spark://"):
        return "local"
    parts = urlsplit(master)
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 7077), timeout=1.0):
        return "ok"


def _roots() -> str:
    for root in getattr(settings, "DELTAWEB_ALLOWED_ROOTS", []):
        if not is_uri(str(root)) and not os.access(str(root), os.R_OK | os.X_OK):
            raise RuntimeError("an allowed root is missing or unreadable")
    return "ok"


CHECKS: dict[str, Callable[[], str]] = {
    "database": _database,
    "cache": _cache,
    "broker": _broker,
    "workers": _workers,
    "spark": _spark,
    "roots": _roots,
}


def readiness() -> tuple[bool, dict[str, dict[str, object]]]:
    """(all up, each check's status, detail and milliseconds)."""
    out: dict[str, dict[str, object]] = {}
    for name, check in CHECKS.items():
        t0 = time.perf_counter()
        try:
            detail, ok = check(), True
        except RuntimeError as exc:  # our own words
            detail, ok = str(exc), False
        except Exception as exc:  # a library's, which may name a host: its kind only
            detail, ok = type(exc).__name__, False
        out[name] = {"ok": ok, "detail": detail, "ms": round((time.perf_counter() - t0) * 1000, 1)}
    return all(c["ok"] for c in out.values()), out
