"""What the table page and the API show of a managed table's owner state (`summary`)."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Max
from django.utils import timezone

from tables.models import ManagedTable, OwnerRefusal, OwnerState, RatifiedCommit


def summary(mt: ManagedTable, refusals: int = 10, versions: int = 50, clients_window: int = 1000) -> dict[str, Any]:
    """What the table page and the API show of a managed table's owner state: staged (ratified,
    not yet published) against published versions, the publish lag in versions and in time (the
    oldest unpublished commit's age), refusals, and which clients committed (the API user and
    commitInfo.engineInfo) among the latest `clients_window` versions."""
    unpublished = RatifiedCommit.objects.filter(
        table_id=mt.table_id, version__gt=mt.backfilled_version, backfilled=False
    )
    ratified = list(unpublished.order_by("version").values_list("version", flat=True)[:versions])
    oldest = unpublished.order_by("version").values_list("created_at", flat=True).first()
    clients = list(
        RatifiedCommit.objects.filter(table_id=mt.table_id, version__gt=mt.latest_version - clients_window)
        .values("committed_by", "engine_info")
        .annotate(commits=Count("id"), lastVersion=Max("version"))
        .order_by("-lastVersion")[:20]
    )
    return {
        "tableId": mt.owner_table_id,
        "state": mt.state,
        "stateLabel": OwnerState(mt.state).label,
        "feature": mt.feature,
        "catalogName": f"{mt.uc_catalog}.{mt.uc_schema}.{mt.uc_name}" if mt.uc_name else None,
        "latestRatifiedVersion": mt.latest_version,
        "backfilledVersion": mt.backfilled_version,
        "stagedVersions": mt.backfill_lag,
        "unbackfilledVersions": ratified,
        "backfillLag": mt.backfill_lag,
        "publishLagSeconds": round((timezone.now() - oldest).total_seconds(), 1) if oldest else 0.0,
        "frozen": mt.frozen,
        "frozenBy": mt.frozen_by.get_username() if mt.frozen_by else None,
        "frozenReason": mt.frozen_reason,
        "frozenAt": mt.frozen_at,
        "refusalCount": OwnerRefusal.objects.filter(table_id=mt.table_id).count(),
        "refusals": list(
            OwnerRefusal.objects.filter(table_id=mt.table_id).values("version", "code", "reason", "operation", "at")[
                :refusals
            ]
        ),
        "clients": [
            {
                "user": c["committed_by"] or None,
                "engine": c["engine_info"] or None,
                "commits": c["commits"],
                "lastVersion": c["lastVersion"],
            }
            for c in clients
        ],
        "clientsWindow": clients_window,
    }
