"""The beat's scheduler: Celery's own, leaving a heartbeat at each tick, so that a liveness
check (the heartbeat file's age) and /metrics (`deltaweb_beat_last_tick_timestamp_seconds`)
can tell a beat that still ticks from one that hangs."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from celery.beat import PersistentScheduler

logger = logging.getLogger("tables.beat")

CACHE_KEY = "deltaweb:beat:last_tick"
EVERY = 10.0  # seconds between two heartbeats: a tick can come many times a second


class Scheduler(PersistentScheduler):
    _beat_at = 0.0

    def tick(self, *args: Any, **kwargs: Any) -> float:
        interval = super().tick(*args, **kwargs)
        now = time.time()
        if now - self._beat_at >= EVERY:
            self._beat_at = now
            heartbeat(now)
        return interval


def heartbeat(now: float) -> None:
    """The tick's time in the shared cache and, when set, the heartbeat file's modification time."""
    from django.conf import settings
    from django.core.cache import caches

    try:
        caches["shared"].set(CACHE_KEY, now, None)
    except Exception as exc:  # the cache is down: the file still says the beat lives
        logger.warning("could not record the beat's tick: %s", type(exc).__name__)
    path = getattr(settings, "DELTAWEB_BEAT_HEARTBEAT_FILE", "")
    if path:
        try:
            Path(path).touch()
        except OSError as exc:
            logger.warning("could not touch the beat's heartbeat file: %s", exc.strerror)


def last_tick() -> float | None:
    from django.core.cache import caches

    try:
        value = caches["shared"].get(CACHE_KEY)
    except Exception:
        return None
    return float(value) if isinstance(value, (int, float)) else None
