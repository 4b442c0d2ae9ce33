"""Two web processes (gunicorn, each its own process) share what they must agree on, in Redis
(DELTAWEB_CACHE_URL on a real redis-server) or, without it, in the database's cache table:
failed sign-ins counted by one are refused by the other, and a long log's reachability,
computed by a real Celery worker after the sync, is shown by both without either computing it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User

from tables.services.access.roles import ANALYST
from tests.conftest import REPO, database_url, free_port, stop_process, wait_until_answering
from tests.web.ui_tables import history_table

pytest.importorskip("gunicorn")
pytest.importorskip("deltalake")
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(params=["redis", "database"])
def shared_env(request, redis_url, roots, settings):
    """What the processes share: Redis (DELTAWEB_CACHE_URL), or without it the database's table."""
    cache_url = redis_url.rsplit("/", 1)[0] + "/3" if request.param == "redis" else ""
    settings.DELTAWEB_CACHE_URL = cache_url
    return {
        **os.environ,
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": redis_url,
        "DELTAWEB_CACHE_URL": cache_url,
        "DELTAWEB_ALLOWED_ROOTS": str(roots),
        "DELTAWEB_REACHABILITY_INLINE_VERSIONS": "2",  # every table here is a "long log"
        "DELTAWEB_LOGIN_RATE": "3/minute",
        "DELTAWEB_ALERTS": "0",
        "SPARK_START_WITH_WORKER": "0",
    }


@pytest.fixture
def two_webs(shared_env, tmp_path):
    procs, urls = [], []
    import redis

    if shared_env["DELTAWEB_CACHE_URL"]:
        redis.Redis.from_url(shared_env["DELTAWEB_CACHE_URL"]).flushdb()  # no count left by another test
    else:
        from django.core.cache import caches

        caches["shared"].clear()
    for name in ("a", "b"):
        port = free_port()
        log = open(tmp_path / f"web-{name}.log", "w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "deltaweb.wsgi", "-b", f"127.0.0.1:{port}", "-w", "1"],
            cwd=REPO, env=shared_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        procs.append((proc, log))
        url = f"http://127.0.0.1:{port}"
        wait_until_answering(f"{url}/accounts/login/", proc, f"gunicorn {name}", 120)
        urls.append(url)
    yield urls
    for proc, log in procs:
        stop_process(proc)
        log.close()


def login(base: str, username: str, password: str) -> int:
    import requests

    s = requests.Session()
    page = s.get(f"{base}/accounts/login/", timeout=60)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)[1]
    r = s.post(
        f"{base}/accounts/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": token},
        headers={"Referer": f"{base}/accounts/login/"},
        allow_redirects=False,
        timeout=60,
    )
    return r.status_code


def test_sign_in_throttle_is_shared(two_webs) -> None:
    a, b = two_webs
    User.objects.create_user("ana", password="right-pass-1")
    for _ in range(3):
        assert login(a, "ana", "wrong") == 200  # the form again, with its error
    assert login(b, "ana", "wrong") == 429  # the other process counted them
    assert login(b, "ana", "right-pass-1") == 429  # even the right password waits


def test_a_worker_computes_reachability_and_both_processes_show_it(
    two_webs, roots, celery_worker_factory, shared_env, tmp_path
) -> None:
    import requests

    from tables.models import Table
    from tables.services.catalog.registration import register_table

    celery_worker_factory(
        env={k: shared_env[k] for k in ("DELTAWEB_CACHE_URL", "DELTAWEB_REACHABILITY_INLINE_VERSIONS")}
    )
    user = User.objects.create_user("ana", password="right-pass-1")
    user.groups.add(Group.objects.get_or_create(name=ANALYST)[0])
    table = register_table("events", str(history_table(Path(roots) / "events")))
    from tables.services.sync.store import start_sync

    start_sync(table)  # the worker syncs it, then computes its reachability
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and Table.objects.get(pk=table.pk).last_synced_version != 3:
        time.sleep(0.5)
    pages = []
    for base in two_webs:
        s = requests.Session()
        s.get(f"{base}/accounts/login/", timeout=60)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', s.get(f"{base}/accounts/login/").text)[1]
        s.post(f"{base}/accounts/login/", data={"username": "ana", "password": "right-pass-1",
               "csrfmiddlewaretoken": token}, headers={"Referer": f"{base}/accounts/login/"}, timeout=60)  # fmt: skip
        while time.monotonic() < deadline:
            text = s.get(f"{base}/t/events/history/", timeout=60).text
            if 'id="reach-pending"' not in text:
                break
            time.sleep(0.5)
        pages.append(text)
    for text in pages:
        assert 'id="reach-pending"' not in text and "✓" in text
        cells = re.findall(r'<td class="nowrap reach">(.*?)</td>', text, re.S)
        assert len(cells) == 4 and all(c.strip() for c in cells)
    worker_log = (tmp_path / "worker.log").read_text()
    assert re.search(r"Task tables\.compute_reachability\[[^\]]+\] succeeded", worker_log), worker_log[-2000:]
    for name in ("a", "b"):  # neither web process computed it (no background computation there)
        assert "reachability" not in (tmp_path / f"web-{name}.log").read_text()
    assert re.findall(r'<td class="nowrap reach">(.*?)</td>', pages[0], re.S) == re.findall(
        r'<td class="nowrap reach">(.*?)</td>', pages[1], re.S
    )
