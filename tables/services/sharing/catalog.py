"""What a recipient may see: its shares, their schemas and tables, a page at a time (the
protocol's maxResults and pageToken), and the one shared table a request names (names are
case-insensitive). A share not given to the recipient is answered as one that does not exist."""

from __future__ import annotations

import base64
from typing import Any

from tables.models import Recipient, Share, SharedTable
from tables.services.sharing.errors import INVALID, MISSING, SharingError
from tables.services.sharing.window import int_param

MAX_RESULTS = 500


def _page(items: list[dict[str, Any]], max_results: Any, page_token: Any) -> dict[str, Any]:
    size = int_param(max_results, "maxResults")
    size = MAX_RESULTS if size is None else min(size, MAX_RESULTS)
    offset = 0
    if page_token:
        try:
            offset = int(base64.urlsafe_b64decode(str(page_token)[:40] + "==").decode())
        except (ValueError, UnicodeDecodeError):
            raise SharingError(INVALID, "pageToken is not one this server gave") from None
        if offset < 0:
            raise SharingError(INVALID, "pageToken is not one this server gave")
    out: dict[str, Any] = {"items": items[offset : offset + size]}
    if offset + size < len(items):
        out["nextPageToken"] = base64.urlsafe_b64encode(str(offset + size).encode()).decode().rstrip("=")
    return out


def share_of(recipient: Recipient, name: str) -> Share:
    share = recipient.shares.filter(name__iexact=name).first()
    if share is None:
        raise SharingError(MISSING, f"Share {name[:255]!r} does not exist or is not shared with you.")
    return share


def list_shares(recipient: Recipient, max_results: Any = None, page_token: Any = None) -> dict[str, Any]:
    items = [{"name": s.name, "id": f"share-{s.pk}"} for s in recipient.shares.order_by("name")]
    return _page(items, max_results, page_token)


def get_share(recipient: Recipient, name: str) -> dict[str, Any]:
    share = share_of(recipient, name)
    return {"share": {"name": share.name, "id": f"share-{share.pk}"}}


def list_schemas(recipient: Recipient, share: str, max_results: Any = None, page_token: Any = None) -> dict[str, Any]:
    found = share_of(recipient, share)
    names = sorted({t.schema for t in found.tables.all()}, key=str.lower)
    return _page([{"name": n, "share": found.name} for n in names], max_results, page_token)


def _table_item(t: SharedTable) -> dict[str, Any]:
    return {
        "name": t.name,
        "schema": t.schema,
        "share": t.share.name,
        "shareId": f"share-{t.share_id}",
        "id": f"table-{t.pk}",
    }


def list_tables(
    recipient: Recipient, share: str, schema: str, max_results: Any = None, page_token: Any = None
) -> dict[str, Any]:
    found = share_of(recipient, share)
    tables = list(found.tables.filter(schema__iexact=schema).select_related("share").order_by("name"))
    if not tables:
        raise SharingError(MISSING, f"Schema {schema[:255]!r} does not exist in share {found.name!r}.")
    return _page([_table_item(t) for t in tables], max_results, page_token)


def list_all_tables(
    recipient: Recipient, share: str, max_results: Any = None, page_token: Any = None
) -> dict[str, Any]:
    found = share_of(recipient, share)
    tables = found.tables.select_related("share").order_by("schema", "name")
    return _page([_table_item(t) for t in tables], max_results, page_token)


def shared_table(recipient: Recipient, share: str, schema: str, table: str) -> SharedTable:
    found = share_of(recipient, share)
    hit = found.tables.filter(schema__iexact=schema, name__iexact=table).select_related("table", "share").first()
    if hit is None:
        raise SharingError(MISSING, f"Table {share[:255]}.{schema[:255]}.{table[:255]} does not exist.")
    return hit
