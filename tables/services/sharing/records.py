"""The record of every recipient query: who, which table, which versions, how many files and
bytes were served (or the error code of a refusal); the table's page shows the latest, and
/metrics counts them."""

from __future__ import annotations

from django.db.models import QuerySet

from tables.models import Recipient, RecipientQuery, SharedTable, Table

SHOWN = 20


def record(
    recipient: Recipient,
    shared: SharedTable,
    kind: str,
    version: int | None = None,
    start: int | None = None,
    end: int | None = None,
    files: int = 0,
    size: int = 0,
    refused: str = "",
) -> RecipientQuery:
    return RecipientQuery.objects.create(
        recipient=recipient,
        table_id=shared.table_id,
        shared_as=str(shared)[:800],
        kind=kind,
        version=version,
        start_version=start,
        end_version=end,
        files=files,
        bytes=size,
        refused=refused[:64],
    )


def shared_as(table: Table) -> list[str]:
    """The names the table is shared under (share.schema.table)."""
    return [str(s) for s in SharedTable.objects.filter(table=table).select_related("share")]


def recent(table: Table, limit: int = SHOWN) -> QuerySet[RecipientQuery]:
    return RecipientQuery.objects.filter(table=table).select_related("recipient").order_by("-at", "-id")[:limit]
