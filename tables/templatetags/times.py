"""The site's one time format, as a template filter every template has (a builtin, see
settings.TEMPLATES): `{{ moment|when }}` is a `<time>` element whose text is ISO 8601 in UTC
with its zone (2026-11-28T17:36:28Z; a commit time keeps its milliseconds as
tables.delta.history.timestamps.format_ms writes it), and whose `datetime` attribute
static/tables/time.js reads to show it in the viewer's zone when they ask for it."""

from __future__ import annotations

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
        if not (len(text) >= 20 and text[4] == "-" and text[10] == "T" and text.endswith("Z")):
            return format_html("{}", text)
    shown = text[:19] + "Z" if precision == "s" and len(text) == 24 else text
    return format_html('<time datetime="{}">{}</time>', text, shown)


@register.filter(name="iso")
def iso_text(moment: datetime | None) -> str:
    """The same time as plain text, for an attribute (a title) where no element can go."""
    return iso(moment) if isinstance(moment, datetime) else ""
