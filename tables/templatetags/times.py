"""The site's one time format, as a template filter every template has (a builtin, see
settings.TEMPLATES): `{{ moment|when }}` is a `<time>` element whose text is ISO 8601 in UTC
with its zone (2026-11-28T17:36:28Z; a commit time keeps its milliseconds as
tables.delta.history.timestamps.format_ms writes it; a data job's row value to the millisecond
when its microseconds are zeros), and whose `datetime` attribute static/tables/time.js reads
to show it in the viewer's zone when they ask for it. Every time a page or the admin shows goes
through it: commit file bytes, sharing queries, change data, tokens."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from django import template
from django.utils.html import format_html

register = template.Library()


def iso(moment: datetime) -> str:
    """An aware (or UTC-naive) datetime as ISO 8601 in UTC to the second: 2026-11-28T17:36:28Z."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@register.filter
def when(moment: datetime | str | None, precision: str = "") -> str:
    """`<time datetime="…">…</time>` for a datetime or an ISO string (format_ms's); an empty
    string for None, and a string that is not a time (a log's out-of-range number) as text.
    `when:"s"` shows a commit time to the second (a list where width counts), the
    milliseconds kept in `datetime`."""
    if moment is None or moment == "":
        return ""
    if isinstance(moment, datetime):
        text = iso(moment)
    else:
        text = str(moment)
        if not _ISO_UTC.fullmatch(text):
            return format_html("{}", text)
    shown = text[:19] + "Z" if precision == "s" and len(text) > 20 else _milliseconds(text)
    return format_html('<time datetime="{}">{}</time>', text, shown)


# ISO 8601 in UTC as the site and the data jobs write it: to the second, or with a fraction
_ISO_UTC = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z")


def _milliseconds(text: str) -> str:
    """A time with a longer fraction than milliseconds, shown to the millisecond when the
    rest is zeros (a Spark timestamp's 13.880000Z reads 13.880Z, as a commit time); a fraction
    that says more keeps it."""
    head, dot, fraction = text[:-1].partition(".")
    if dot and len(fraction) > 3 and not fraction[3:].strip("0"):
        return f"{head}.{fraction[:3]}Z"
    return text


@register.filter(name="iso")
def iso_text(moment: datetime | None) -> str:
    """The same time as plain text, for an attribute (a title) where no element can go."""
    return iso(moment) if isinstance(moment, datetime) else ""
