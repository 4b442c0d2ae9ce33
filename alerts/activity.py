"""The live activity feed: recent commits and alerts across tables, filtered; one query
function for the feed page, its API and the table page's polling script.

Polling answers conditional requests: the ETag is the newest commit and alert the filters
select (their ids), so an unchanged feed costs two indexed MAX queries and a 304.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from django.db.models import Max, QuerySet

from alerts.models import Alert, Severity
from tables.delta.history.timestamps import format_ms
from tables.models import Commit, Table
from tables.services.catalog.lookup import parse_int64, table_by_key
from tables.services.errors import ServiceError, printable

KINDS = ("all", "commits", "alerts")
MAX_LIMIT = 200


@dataclass(frozen=True)
class FeedFilter:
    table: Table | None = None
    kind: str = "all"
    severity: str | None = None
    operation: str | None = None
    after_version: int | None = None  # commits (and alerts) of versions after this one
    limit: int = 50

    @classmethod
    def parse(cls, params: Any) -> FeedFilter:
        """From query parameters (table, kind, severity, operation, afterVersion, limit); a bad
        one is a clear 400 (or 404 for an unknown table), never ignored."""
        table = None
        key = (params.get("table") or "").strip()
        if key:
            table = table_by_key(key)
            if table is None:
                raise ServiceError(f"No table '{printable(key)}'.", "not_found", 404)
        kind = params.get("kind") or "all"
        if kind not in KINDS:
            raise ServiceError(f"kind must be one of {', '.join(KINDS)}.", "invalid")
        severity = params.get("severity") or None
        if severity is not None and severity not in Severity.values:
            raise ServiceError(f"severity must be one of {', '.join(Severity.values)}.", "invalid")
        after = None
        if params.get("afterVersion") not in (None, ""):
            after = parse_int64(params.get("afterVersion"))
            if after is None:
                raise ServiceError("afterVersion is a version number (0 or more).", "invalid")
        limit = 50
        if params.get("limit") not in (None, ""):
            n = parse_int64(params.get("limit"))
            if n is None or not 1 <= n <= MAX_LIMIT:
                raise ServiceError(f"limit must be 1..{MAX_LIMIT}.", "invalid")
            limit = n
        operation = (params.get("operation") or "").strip()[:200] or None
        return cls(table, kind, severity, operation, after, limit)

    def key(self) -> str:
        return f"{self.table.pk if self.table else ''}|{self.kind}|{self.severity}|{self.operation}|{self.after_version}|{self.limit}"


def commits_of(f: FeedFilter) -> QuerySet[Commit]:
    qs = Commit.objects.select_related("table")
    if f.table is not None:
        qs = qs.filter(table=f.table)
    if f.operation:
        qs = qs.filter(operation__iexact=f.operation)
    if f.after_version is not None:
        qs = qs.filter(version__gt=f.after_version)
    return qs


def alerts_of(f: FeedFilter) -> QuerySet[Alert]:
    qs = Alert.objects.select_related("table", "commit")
    if f.table is not None:
        qs = qs.filter(table=f.table)
    if f.severity:
        qs = qs.filter(severity__in=Severity.at_least(f.severity))
    if f.operation:
        qs = qs.filter(operation__iexact=f.operation)
    if f.after_version is not None:
        qs = qs.filter(version__gt=f.after_version)
    return qs


def etag(f: FeedFilter) -> str:
    """Changes whenever a commit or alert the filter selects is added (or the filter changes),
    and, with a table, when its sync moves on: a first sync stores its last commit row before it
    marks the table synced, and a page waiting for that mark must not be told "nothing new"."""
    c = commits_of(f).aggregate(m=Max("pk"))["m"] if f.kind in ("all", "commits") else 0
    a = alerts_of(f).aggregate(m=Max("pk"))["m"] if f.kind in ("all", "alerts") else 0
    synced = f.table.last_synced_version if f.table is not None else ""
    digest = hashlib.sha256(f"{f.key()}|{c}|{a}|{synced}".encode()).hexdigest()[:24]
    return f'W/"{digest}"'


def commit_item(c: Commit) -> dict[str, Any]:
    return {
        "table": c.table.slug,
        "tableName": c.table.name,
        "version": c.version,
        "timestamp": c.timestamp,
        "timestampIso": format_ms(c.timestamp),
        "timestampSource": c.timestamp_source,
        "operation": c.operation,
        "userName": c.user_name or c.user_id,
        "numFiles": c.num_files,
        "sizeBytes": c.size_bytes,
    }


def alert_item(a: Alert) -> dict[str, Any]:
    return {
        "id": a.pk,
        "table": a.table.slug,
        "tableName": a.table.name,
        "version": a.version,
        "timestamp": a.commit.timestamp if a.commit_id else None,
        "operation": a.operation,
        "rule": a.rule,
        "ruleName": a.rule_name,
        "severity": a.severity,
        "explanation": a.explanation,
        "createdAt": a.created_at.isoformat(),
    }


def feed(f: FeedFilter) -> dict[str, Any]:
    """The newest commits (by when they were stored) and alerts the filter selects; with a
    table, also the version its last finished sync reached (None before its first): a page
    opened before the first sync counts as new only the commits after it."""
    out: dict[str, Any] = {"commits": [], "alerts": []}
    if f.table is not None:
        out["syncedVersion"] = f.table.last_synced_version
    if f.kind in ("all", "commits"):
        out["commits"] = [commit_item(c) for c in commits_of(f).order_by("-pk")[: f.limit]]
    if f.kind in ("all", "alerts"):
        out["alerts"] = [alert_item(a) for a in alerts_of(f).order_by("-pk")[: f.limit]]
    return out
