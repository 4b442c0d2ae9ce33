"""Parsing what a URL or form says about a table: one int64/version parser, one id-or-slug lookup.

The UI, the API, the data views and the management commands all go through these, so a
version or a table key means the same thing everywhere.
"""

from __future__ import annotations

from tables.models import Table
from tables.services.access.hot_queries import table_row

INT64_MAX = 2**63 - 1  # the largest version or id the database can hold


def parse_int64(raw: str) -> int | None:
    """A non-negative decimal integer that fits a BIGINT, or None (never raises)."""
    raw = (raw or "").strip()
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 19:
        return None
    value = int(raw)
    return value if value <= INT64_MAX else None


def table_by_key(key: str) -> Table | None:
    """The table with this numeric id, else with this slug, else None."""
    key = str(key)
    numeric = key.isascii() and key.isdigit() and len(key) <= 18
    return (table_row(pk=int(key)) if numeric else None) or table_row(slug=key)
