"""Readiness: whether this process can serve, part by part, each check short and bounded.

- database: one `SELECT 1`;
- cache: a write and a read of the shared cache (Redis with DELTAWEB_CACHE_URL, else its database table);
- broker: the task queue answers (a connection, 2 s at most);
- workers: at least one Celery worker answers a ping (the first answer ends the wait);
- spark: the Spark Connect server (DELTAWEB_SPARK_REMOTE, `sc://host:port`) or a cluster master
  (`spark://host:port`) accepts a connection; a local master needs none. A local master and a
  Connect server (on a local master, as `make run` starts it) say the driver heap their
  configuration gives (SPARK_DRIVER_MEMORY, else sized from the machine);
- roots: every local allowed root exists and can be read.

Answers name what is down, never a password, a path or a host. The checks run at once, each in
its own thread, and the answer waits for them DEADLINE seconds at most: a probe's usual timeout
is 1 s, and a broker that is down takes 2 s or more to say so. A check still running then is
reported as not answering (it ends by itself, its own timeouts bounding it). On SQLite the
database and its cache table are checked in the request's thread: a local file cannot hang,
and a second connection would wait on the request's own lock.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from urllib.parse import urlsplit

from celery import current_app
from django.conf import settings
from django.core.cache import caches
from django.db import connection, connections

from tables.delta.storage.api import is_uri
from tables.spark.engine.conf import driver_memory


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
    # the first answer is enough (limit=1): waiting out the timeout for others would pass the deadline
    answers = app.control.ping(timeout=DEADLINE, limit=1)
    if not answers:
        raise RuntimeError("no worker answered")
    return f"{len(answers)} answering"


def _spark() -> str:
    remote = str(getattr(settings, "DELTAWEB_SPARK_REMOTE", "") or "")
    if remote:
        # sc://host:port/;params: the address only (a token may be among the parameters)
        parts = urlsplit("http://" + remote.split("://", 1)[-1].split("/", 1)[0].split(";", 1)[0])
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 15002), timeout=1.0):
            return f"connect, driver heap {driver_memory()}"
    master = str(getattr(settings, "SPARK_MASTER", "local[*]"))
    if not master.startswith("spark://"):
        return f"local, driver heap {driver_memory()}"
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


DEADLINE = 0.8  # seconds: under a probe's usual 1 s timeout


def _inline(name: str) -> bool:
    """Checks cheap and local enough for the request's own thread (see the module's docstring)."""
    if connection.vendor != "sqlite":
        return False
    if name == "database":
        return True
    backend = settings.CACHES.get("shared", {}).get("BACKEND", "")
    return name == "cache" and backend.endswith("DatabaseCache")


def _run(check: Callable[[], str]) -> dict[str, object]:
    t0 = time.perf_counter()
    try:
        detail, ok = check(), True
    except RuntimeError as exc:  # our own words
        detail, ok = str(exc), False
    except Exception as exc:  # a library's, which may name a host: its kind only
        detail, ok = type(exc).__name__, False
    return {"ok": ok, "detail": detail, "ms": round((time.perf_counter() - t0) * 1000, 1)}


def _in_thread(check: Callable[[], str], out: dict[str, dict[str, object]], name: str) -> None:
    try:
        out[name] = _run(check)
    finally:
        connections.close_all()  # this thread's own connections, never reused


def readiness(deadline: float = DEADLINE) -> tuple[bool, dict[str, dict[str, object]]]:
    """(all up, each check's status, detail and milliseconds), within `deadline` seconds."""
    out: dict[str, dict[str, object]] = {}
    started = time.monotonic()
    inline = {name for name in CHECKS if _inline(name)}
    threads = []
    for name, check in CHECKS.items():
        if name not in inline:
            thread = threading.Thread(target=_in_thread, args=(check, out, name), name=f"readyz-{name}", daemon=True)
            thread.start()
            threads.append(thread)
    for name in inline:
        out[name] = _run(CHECKS[name])
    for thread in threads:
        thread.join(max(0.0, started + deadline - time.monotonic()))
    answered = dict(out)  # a late thread may still write into `out`
    for name in CHECKS:
        answered.setdefault(name, {"ok": False, "detail": f"no answer within {deadline:g} s", "ms": deadline * 1000})
    checks = {name: answered[name] for name in CHECKS}
    return all(c["ok"] for c in checks.values()), checks
