"""The compose deployment's one Redis (DELTAWEB_CACHE_URL, both caches, and the task queue)
stopped: the pages still answer from the database with the "background work is paused"
banner, and once Redis is back they are cached in it again. A real redis-server of the test's
own, configured as deltaweb/settings.py configures it."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
import redis

from tables.services.catalog import registration
from tables.services.jobs import broker
from tables.services.sync import store as sync
from tests.faults.test_broker_restart import Redis
from tests.web.ui_tables import history_table

pytest.importorskip("deltalake")
pytestmark = pytest.mark.django_db

BANNER = "Background work is paused"
SETTINGS = Path(__file__).resolve().parents[3] / "deltaweb" / "settings.py"


@pytest.fixture
def cache_redis(redis_url, settings, monkeypatch):
    """redis_url first: the session's server is not this one, but the fixture skips without it."""
    r = Redis()
    r.start()
    monkeypatch.setenv("DELTAWEB_CACHE_URL", r.url)
    settings.CACHES = runpy.run_path(str(SETTINGS))["CACHES"]  # the deployment's caches
    settings.CELERY_BROKER_URL = r.url
    settings.CELERY_TASK_ALWAYS_EAGER = False
    broker.forget()
    yield r
    r.stop()
    broker.forget()


def keys(r: Redis) -> int:
    return redis.Redis.from_url(r.url).dbsize()


def test_pages_answer_from_the_database_while_redis_is_down_and_cache_again_after(cache_redis, roots, browser) -> None:
    table = registration.register_table("Sales", str(history_table(roots / "sales")), "orders")
    sync.sync_table(table.pk)
    page = browser.get("/t/sales/history/")
    assert page.status_code == 200 and keys(cache_redis) > 0  # the page went through Redis

    cache_redis.stop()
    broker.forget()
    for _ in range(2):  # the second request too: nothing is left half-done by the first
        history = browser.get("/t/sales/history/")
        assert history.status_code == 200
        body = history.content.decode()
        assert BANNER in body
        assert {r["version"] for r in history.context["rows"]} == {0, 1, 2, 3}
        assert "DELETE" in body and "WRITE" in body
    listing = browser.get("/")
    assert listing.status_code == 200
    assert BANNER in listing.content.decode() and "Sales" in listing.content.decode()

    cache_redis.start()  # empty: started without persistence, as the compose file runs it
    broker.forget()
    again = browser.get("/t/sales/history/")
    assert again.status_code == 200 and BANNER not in again.content.decode()
    assert keys(cache_redis) > 0  # caching resumed
