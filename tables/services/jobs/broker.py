"""Whether the task queue (Celery's broker, Redis by default) answers, for the pages' banner:
while it does not, syncs, previews and restores cannot start, and users should hear why
instead of watching jobs fail one by one. Asked at most every CHECK_SECONDS per process."""

from __future__ import annotations

import threading
import time
from typing import Any

from django.conf import settings

CHECK_SECONDS = 10.0
_lock = threading.Lock()
_last: dict[str, Any] = {"at": float("-inf"), "ok": True}


def _answers(url: str) -> bool:
    try:
        if url.startswith(("redis://", "rediss://")):
            import redis

            client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
            try:
                return bool(client.ping())
            finally:
                client.close()
        from kombu import Connection

        with Connection(url, connect_timeout=0.5) as conn:
            conn.ensure_connection(max_retries=0)
        return True
    except Exception:  # any failure to reach it is the answer
        return False


def background_paused() -> bool:
    """True when the broker did not answer the last check (eager Celery has none to ask)."""
    if getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False):
        return False
    now = time.monotonic()
    with _lock:
        if now - _last["at"] < CHECK_SECONDS:
            return not _last["ok"]
        _last["at"] = now  # one request asks; the others use the last answer meanwhile
    ok = _answers(settings.CELERY_BROKER_URL)
    _last["ok"] = ok
    return not ok


def forget() -> None:
    """Ask again on the next page (tests, and after a configuration change)."""
    _last["at"] = float("-inf")
