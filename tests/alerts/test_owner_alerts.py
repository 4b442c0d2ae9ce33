"""Rules on commits deltaweb's owner ratified: a DELETE of every row committed through the
owner API (RestOwnerClient against the live server) is evaluated when the next sync stores
it, before it is backfilled to `_delta_log/`, with its actions read through the owner."""

from __future__ import annotations

import time

import pytest

from alerts.detect import evaluate
from alerts.models import Alert, Scan
from tables.delta.snapshot.state import load_snapshot
from tables.delta.write.managed import commit_via_owner
from tables.services.catalog import registration
from tables.services.managed import use_cases as owner_services
from tables.services.sync import store as sync
from tests.web.owner.test_owner import client, log_versions, roots  # noqa: F401 (fixtures)
from tests.web.pages.test_api import write_table

pytest.importorskip("deltalake")
pytestmark = pytest.mark.django_db(transaction=True)


def test_a_ratified_delete_of_every_row_fires(roots, client) -> None:  # noqa: F811
    path = write_table(roots / "events")
    table = registration.register_table("events", str(path))
    owner_services.take_over(table)  # version 4
    sync.sync_table(table.pk)  # the first sync: the past, no scan
    assert not Scan.objects.filter(table=table).exists()

    files = load_snapshot(path, owner=client).file_paths()
    now = int(time.time() * 1000)
    removes = [{"remove": {"path": p, "deletionTimestamp": now, "dataChange": True}} for p in files]
    result = commit_via_owner(path, client, removes, "DELETE", {})
    assert result.version == 5 and log_versions(path)[-1] == 4  # ratified, not backfilled

    sync.sync_table(table.pk)
    scan = Scan.objects.get(table=table)
    evaluate.run_scan(scan.pk)
    rules = set(Alert.objects.filter(table=table, version=5).values_list("rule", flat=True))
    assert {"overwrite", "large_removal"} <= rules
    assert "DELETE without a predicate" in Alert.objects.get(table=table, rule="overwrite").explanation
