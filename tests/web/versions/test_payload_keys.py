"""The versions concept's API answers keep their keys and their order: a client that reads a
payload by position (or diffs two answers as text) sees the same JSON whichever way the server
builds it. The serializers in tables/api/versions build each answer from the services' data;
these lists are what the answers were before, on a table read from its log, on a version a pin
keeps after a VACUUM (tests/web/versions/test_kept_version_pages.py), and on a table deltaweb
owns (its summary's managed-commit keys)."""

from __future__ import annotations

import pytest

from tables.services.access.roles import ANALYST
from tables.services.sync import store as sync
from tests.web.owner.test_owner import managed, roots  # noqa: F401 (fixtures)
from tests.web.pages.test_api import make_user, token_client
from tests.web.versions.test_kept_version_pages import LOST, PINNED, kept  # noqa: F401 (fixture)

pytest.importorskip("deltalake")

SUMMARY = ["version", "protocol", "metadata", "numFiles", "sizeBytes", "setTransactions", "domainMetadata"]
SUMMARY_TAIL = ["summaryFrom", "readFrom", "checksum", "commitInfo", "timestamp", "timestampSource"]
MANAGED = ["managed", "stalenessWarning", "owner"]
CHECKSUM = ["state", "mismatches", "error", "full", "checkedAt"]
ENTRY = ["version", "readable", "restorable", "recoverable", "reason", "missingFiles", "retention", "readFrom"]
RESOLVE = [
    "version",
    "commitTimestamp",
    "commitTimestampIso",
    "source",
    "searchRange",
    "rule",
    "requestedTimestamp",
    "alternatives",
    "reachability",
]
DIFF = ["from", "to", "schema", "partitionColumns", "properties", "protocol", "filesAdded", "filesRemoved"]
DIFF += ["numFiles", "sizeBytes", "readFrom", "commits"]
DIFF_COMMIT = ["version", "timestamp", "timestampSource", "operation", "userName", "operationMetrics"]
SCHEMA = ["version", "schemaVersion", "commit", "columnMapping", "columns", "columnsTruncated"]
SCHEMA += ["partitionColumns", "properties", "ddl"]
SCHEMA_COMMIT = ["version", "timestamp", "inCommitTimestamp", "operation", "userName", "userId", "engineInfo"]
SCHEMA_COMMIT += ["timestampSource"]
TIMELINE = ["earliestVersion", "latestVersion", "columnMapping", "columns", "tableEvents", "commits", "truncated"]
SCHEMA_DIFF = ["from", "to", "fromSchemaVersion", "toSchemaVersion", "matchedBy", "changes", "partitionColumns"]
SCHEMA_DIFF += ["columnMapping", "readFrom"]


def _get(api, url: str) -> dict:
    r = api.get(url)
    assert r.status_code == 200, r.content
    return r.json()


@pytest.mark.django_db
def test_every_answer_keeps_its_keys_in_order(kept) -> None:  # noqa: F811
    table, _before, pin, latest = kept
    api = token_client(make_user("keys-api", group=ANALYST))
    base = f"/api/tables/{table.pk}"

    summary = _get(api, f"{base}/versions/{latest}/")
    assert list(summary) == SUMMARY + SUMMARY_TAIL and summary["readFrom"] is None
    assert list(summary["checksum"]) == CHECKSUM
    kept_summary = _get(api, f"{base}/versions/{PINNED}/")
    assert list(kept_summary) == SUMMARY + SUMMARY_TAIL
    assert kept_summary["summaryFrom"] == "pin" and list(kept_summary["readFrom"]) == ["pin", "name"]

    entries = {e["version"]: e for e in _get(api, f"{base}/reachability/?limit=100")["results"]}
    assert all(list(e) == ENTRY for e in entries.values())
    assert list(entries[PINNED]["readFrom"]) == ["pin", "name"] and entries[LOST]["readFrom"] is None

    resolved = _get(api, f"{base}/resolve/?timestamp={summary['timestamp']}")
    assert list(resolved) == RESOLVE and list(resolved["reachability"]) == ENTRY

    diff = _get(api, f"{base}/diff/?from={PINNED}&to={latest}")
    assert list(diff) == DIFF and list(diff["readFrom"]) == ["from", "to"]
    assert diff["commits"] and all(list(c) == DIFF_COMMIT for c in diff["commits"])

    schema = _get(api, f"{base}/schema/")
    assert list(schema) == [*SCHEMA, "latestVersion", "earliestVersion", "readFrom"]
    assert list(schema["commit"]) == SCHEMA_COMMIT
    kept_schema = _get(api, f"{base}/schema/?version={PINNED}")
    assert list(kept_schema) == [*SCHEMA, "pinned", "readFrom", "latestVersion", "earliestVersion"]
    assert kept_schema["pinned"] == pin.name and list(kept_schema["readFrom"]) == ["pin", "name"]

    timeline = _get(api, f"{base}/schema/timeline/")
    assert list(timeline) == TIMELINE and all(list(c) == SCHEMA_COMMIT for c in timeline["commits"])
    for url in (f"{base}/schema/diff/?from=0&to={latest}", f"{base}/schema/diff/?from={PINNED}&to={latest}"):
        schema_diff = _get(api, url)
        assert list(schema_diff) == SCHEMA_DIFF and list(schema_diff["readFrom"]) == ["from", "to"]


@pytest.mark.django_db(transaction=True)
def test_a_managed_tables_summary_keeps_its_commit_owner_keys_in_place(managed) -> None:  # noqa: F811
    table, _path = managed
    sync.sync_table(table.pk)
    table.refresh_from_db()
    api = token_client(make_user("keys-api", group=ANALYST))
    summary = _get(api, f"/api/tables/{table.pk}/versions/{table.last_synced_version}/")
    assert list(summary) == SUMMARY + MANAGED + SUMMARY_TAIL
