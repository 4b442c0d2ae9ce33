"""A version checksum file that disagrees with the log, as the app shows it: a synced table's
tampered `.crc` is a finding on the version page, in the API and on the History tab, and one
`checksum_mismatch` alert; a checksum that agrees answers the version's summary without a
replay (the same answer the replay gives)."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group

from alerts.models import Alert
from tables.delta.snapshot.state import load_snapshot
from tables.models import VersionChecksum
from tables.services.access import roles
from tables.services.sync import store as sync
from tests.alerts.conftest import bring_back, hold_back, register_and_sync
from tests.alerts.test_rules import sync_and_scan

TABLE = "commit-info-containing-arbitrary-operationParams-types"  # versions 0-2, each with a .crc


@pytest.fixture
def analyst(client, django_user_model):
    user = django_user_model.objects.create_user("ana", password="secret-pass-1")
    user.groups.add(Group.objects.get_or_create(name=roles.ANALYST)[0])
    client.force_login(user)
    return user


@pytest.mark.django_db
def test_a_tampered_checksum_is_a_finding_and_one_alert(roots, golden_copy, client, analyst) -> None:
    path = golden_copy(TABLE)
    log = path / "_delta_log"
    (log / f"{0:020d}.crc").unlink()  # version 0: no checksum file
    aside = hold_back(path, 2)
    table = register_and_sync("crc", path)
    assert dict(VersionChecksum.objects.filter(table=table).values_list("version", "ok")) == {1: True}

    crc = aside / f"{2:020d}.crc"
    body = json.loads(crc.read_text())
    body["numFiles"] = 7
    crc.write_text(json.dumps(body))
    bring_back(path, aside)
    sync_and_scan(table)

    (alert,) = Alert.objects.filter(table=table, rule="checksum_mismatch")
    assert alert.version == 2 and alert.severity == "critical"
    assert "numFiles: 7 in the checksum, 2 in the log" in alert.explanation

    api = client.get(f"/api/tables/{table.pk}/versions/2/").json()
    assert api["checksum"]["state"] == "mismatch" and api["summaryFrom"] == "replay"
    assert api["checksum"]["mismatches"] == [{"field": "numFiles", "expected": 7, "found": 2}]
    assert api["numFiles"] == 2  # the log's answer, not the checksum's

    page = client.get(f"/t/{table.slug}/v/2/").content.decode()
    assert 'id="checksum-mismatches"' in page and "<code>numFiles</code>" in page
    assert "<td><code>7</code></td><td><code>2</code></td>" in page
    assert "✓ verified" in client.get(f"/t/{table.slug}/v/1/").content.decode()
    assert "no checksum file checked" in client.get(f"/t/{table.slug}/v/0/").content.decode()
    history = client.get(f"/t/{table.slug}/history/").content.decode()
    assert history.count("checksum mismatch</a>") == 1

    # version 1's checksum agreed: its summary comes from it, and says what the replay says
    fast = client.get(f"/api/tables/{table.pk}/versions/1/").json()
    assert fast["summaryFrom"] == "checksum" and fast["checksum"]["state"] == "ok"
    replayed = load_snapshot(path, 1).summary(files=False)
    assert {k: fast[k] for k in replayed} == replayed

    # a sync with nothing new, and the scan run again, raise nothing more
    sync.sync_table(table.pk)
    from alerts.detect import evaluate

    assert evaluate.evaluate(table, [2]) == []
    assert Alert.objects.filter(table=table, rule="checksum_mismatch").count() == 1


@pytest.mark.django_db
def test_older_versions_of_a_long_catch_up_are_checked_on_their_counts(roots, golden_copy, monkeypatch) -> None:
    """Beyond the newest FULL_CHECKS_PER_SYNC versions of one sync, a checksum is compared
    with the growth pass's counts only: its other fields are not read."""
    from tables.services.sync import checksums

    monkeypatch.setattr(checksums, "FULL_CHECKS_PER_SYNC", 1)
    path = golden_copy(TABLE)
    crc = path / "_delta_log" / f"{1:020d}.crc"
    body = json.loads(crc.read_text())
    body["tableSizeBytes"] = 1
    body["metadata"]["schemaString"] = '{"type":"struct","fields":[]}'
    crc.write_text(json.dumps(body))
    table = register_and_sync("catch-up", path)
    rows = {r.version: r for r in VersionChecksum.objects.filter(table=table)}
    assert {v: (r.ok, r.full) for v, r in rows.items()} == {0: (True, False), 1: (False, False), 2: (True, True)}
    assert rows[1].mismatches == [{"field": "tableSizeBytes", "expected": 1, "found": 904}]


@pytest.mark.django_db
def test_an_older_writers_checksums_raise_no_alarm(roots, golden_copy, client, analyst) -> None:
    """Checksum files holding only the five counts older Delta writers wrote, all right: every
    version is checked ok, no `checksum_mismatch` alert, the version page says verified."""
    from tests.core.test_checksums import old_writer_checksums

    path = golden_copy(TABLE)
    old_writer_checksums(path)
    aside = hold_back(path, 1)
    table = register_and_sync("old-crc", path)
    bring_back(path, aside)
    sync_and_scan(table)

    rows = {r.version: r for r in VersionChecksum.objects.filter(table=table)}
    assert {v: (r.ok, r.mismatches, r.error) for v, r in rows.items()} == {v: (True, [], "") for v in (0, 1, 2)}
    assert not Alert.objects.filter(table=table, rule="checksum_mismatch").exists()
    api = client.get(f"/api/tables/{table.pk}/versions/2/").json()
    assert api["checksum"]["state"] == "ok" and api["summaryFrom"] == "replay"  # no metadata to answer from
    page = client.get(f"/t/{table.slug}/v/2/").content.decode()
    assert "✓ verified" in page and 'id="checksum-mismatches"' not in page
    assert "checksum mismatch</a>" not in client.get(f"/t/{table.slug}/history/").content.decode()
