"""Django's Redis cache, for both caches (default and "shared") when DELTAWEB_CACHE_URL is set,
made to survive Redis being down: the pages read from the database then, as they do without a
cache, instead of answering 500.

While Redis cannot be reached (connection refused, reset or timed out; a server still loading
its data), a read is a miss, a write or a delete does nothing, and a warning is logged at most
once every WARN_SECONDS per process. Each call asks Redis again, so caching resumes by itself
with the first call after Redis is back. Other Redis errors (a wrong command, a full memory)
are still raised: they are bugs or configuration to fix, not an outage to ride out.

What that means for the callers that rely on the shared cache beyond speed:
- `add` answers False, as if the key were already there. `add` serves as a once-only mark
  (tables.services.jobs.lifecycle.send_once: ask a worker for a derived answer once): False
  means "someone already asked", so nothing is sent twice; nothing is lost either, as the
  mark was never written and the next page asks again once Redis is back. (The worker would
  have to keep its answer in this same cache anyway, and in the compose deployment the task
  queue is this same Redis.)
- `incr` raises ValueError, as for a missing key; the counters' callers (sign-in, password
  reset and recipient token throttles) then `add`, which is False: the attempt is not
  counted. Throttles are open while Redis is down (refusing every sign-in would lock everyone
  out for the outage); the warning says so. Passwords are still checked, and slowly.
- readiness (tables.services.ops.health) writes then reads a value: it still reports the cache
  as failing, so the outage is seen where it should be.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

WARN_SECONDS = 60.0
# BusyLoadingError (a restarted server reading its data) is a ConnectionError too
UNREACHABLE = (RedisConnectionError, RedisTimeoutError)
T = TypeVar("T")

_lock = threading.Lock()
_state: dict[str, Any] = {"warned_at": float("-inf"), "down": False}


def _unreachable(exc: Exception, what: str) -> None:
    now = time.monotonic()
    with _lock:
        _state["down"] = True
        if now - _state["warned_at"] < WARN_SECONDS:
            return
        _state["warned_at"] = now
    logger.warning(
        "the cache's Redis is unreachable (%s: %s) during %s: pages read from the database, nothing "
        "is cached, and sign-in throttles do not count until it is back",
        type(exc).__name__,
        exc,
        what,
    )


def _answered() -> None:
    if _state["down"]:
        with _lock:
            was_down, _state["down"] = _state["down"], False
        if was_down:
            logger.warning("the cache's Redis answers again: caching resumes")


def forget() -> None:
    """Warn at the next failure again (tests)."""
    with _lock:
        _state.update(warned_at=float("-inf"), down=False)


class TolerantRedisCache(RedisCache):
    """RedisCache where Redis being unreachable is a miss on reads and a no-op on writes."""

    def _guard(self, what: str, call: Callable[[], T], fallback: T) -> T:
        try:
            out = call()
        except UNREACHABLE as exc:
            _unreachable(exc, what)
            return fallback
        _answered()
        return out

    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        return self._guard("get", lambda: super(TolerantRedisCache, self).get(key, default, version), default)

    def get_many(self, keys: Any, version: int | None = None) -> dict[str, Any]:
        return self._guard("get_many", lambda: super(TolerantRedisCache, self).get_many(keys, version), {})

    def has_key(self, key: Any, version: int | None = None) -> bool:
        return self._guard("has_key", lambda: super(TolerantRedisCache, self).has_key(key, version), False)

    def add(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        # False, "already there": a once-only mark is then never taken twice (module docstring)
        return self._guard("add", lambda: super(TolerantRedisCache, self).add(key, value, timeout, version), False)

    def set(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> None:
        self._guard("set", lambda: super(TolerantRedisCache, self).set(key, value, timeout, version), None)

    def set_many(self, data: dict, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> list:
        # Django's answer for the keys that were not stored: all of them
        return self._guard(
            "set_many", lambda: super(TolerantRedisCache, self).set_many(data, timeout, version), list(data)
        )

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        return self._guard("touch", lambda: super(TolerantRedisCache, self).touch(key, timeout, version), False)

    def delete(self, key: Any, version: int | None = None) -> bool:
        return self._guard("delete", lambda: super(TolerantRedisCache, self).delete(key, version), False)

    def delete_many(self, keys: Any, version: int | None = None) -> None:
        self._guard("delete_many", lambda: super(TolerantRedisCache, self).delete_many(keys, version), None)

    def clear(self) -> bool:
        return self._guard("clear", lambda: super(TolerantRedisCache, self).clear(), False)

    def incr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        try:
            out = super().incr(key, delta, version)
        except UNREACHABLE as exc:
            _unreachable(exc, "incr")
            # as for a key that is not there: the counters' callers then `add`, which is False
            raise ValueError(f"Key '{key}' not found (the cache's Redis is unreachable)") from exc
        _answered()
        return out
