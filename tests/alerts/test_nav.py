"""The navigation bar's "Activity" link and its unread in-app notification count: a real
alert (a silence) fanned out to an in-app subscription shows as 1, one COUNT query per page, gone once
read; signed-out pages have no navigation at all."""

from __future__ import annotations

import os
import re
import time

import pyarrow as pa
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from alerts import services
from alerts.detect import silence
from alerts.detect.rules import MIN_INTERVALS
from alerts.models import Severity
from tests.alerts.conftest import register_and_sync

deltalake = pytest.importorskip("deltalake")

LINK = re.compile(r'<a href="/activity/" class="nav-activity">Activity(?: <span class="badge"[^>]*>(\d+)<)?')


def nav_count(html: str) -> int | None:
    """None without the link; 0 for the link without a count; else the count shown."""
    m = LINK.search(html)
    if m is None:
        return None
    return int(m.group(1)) if m.group(1) else 0


@pytest.mark.django_db
def test_activity_link_with_the_unread_count(roots, client, django_user_model) -> None:
    user = django_user_model.objects.create_user("ana", password="secret-pass-1")
    path = roots / "orders"
    hour = 3600
    start = int(time.time()) - 30 * 24 * hour
    for i in range(MIN_INTERVALS + 1):  # hourly commits, a month ago
        deltalake.write_deltalake(str(path), pa.table({"id": [i]}), mode="append")
        t = start + i * hour
        os.utime(path / "_delta_log" / f"{i:020d}.json", (t, t))
    table = register_and_sync("orders", path)
    page = reverse("tables:table_list")

    assert nav_count(client.get(page, follow=True).content.decode()) is None  # signed out: the login page
    client.force_login(user)
    assert nav_count(client.get(page).content.decode()) == 0

    services.subscribe(user, table, "in_app", Severity.INFO)
    # silent for 29 days: a real alert, fanned out to the subscription as 1 notification
    assert silence.check_tables()["alerts"] == 1
    with CaptureQueriesContext(connection) as queries:
        html = client.get(page).content.decode()
    assert nav_count(html) == 1
    counts = [q["sql"] for q in queries.captured_queries if "alerts_notification" in q["sql"]]
    assert len(counts) == 1 and "COUNT(" in counts[0].upper()

    client.post(reverse("alerts:mark_read"))
    assert nav_count(client.get(page).content.decode()) == 0
    assert client.get(reverse("alerts:activity")).status_code == 200  # where the link goes
