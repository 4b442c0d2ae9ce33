"""Values as text in a template (`{% load formatting %}`): `{{ value|compact_json }}`,
`{{ value|pretty_json }}`, `{{ values|partition_text }}`, `{{ n|human_count }}`,
`{{ n|human_bytes }}`, `{{ ms|human_ms }}`, `{{ source|source_label }}`, `{{ ms|ms_time }}`
(an epoch-milliseconds time as ISO 8601, for `|when`), `{{ value|property_text:key }}` and
`{{ value|property_title:key }}` (a table property, a time as a date with the raw value in the
title), `{{ field|field_text }}` (a schema field's type), `{% with c=value|chips:column.shown %}`
(a JSON object as chips for tables/_chips.html) and `{% with x=entry|reach_text %}` (a version's
reachability in words). The functions are the pages' own (tables/web/base/formatting.py,
metadata.py), so a value reads the same whether Python or a template formats it. Every filter
returns plain text, or a dict of plain text, which the template escapes like any other value;
none marks anything safe. Each is a plain function call: the History tab calls a few per row."""

from __future__ import annotations

from typing import Any

from django import template

from tables.delta.history.timestamps import format_ms
from tables.web.base import formatting
from tables.web.base.metadata import field_text

register = template.Library()

for _name in (
    "compact_json",
    "pretty_json",
    "partition_text",
    "human_count",
    "human_bytes",
    "human_ms",
    "source_label",
):
    register.filter(_name, getattr(formatting, _name))
register.filter("field_text", field_text)


@register.filter
def ms_time(ms: Any) -> str:
    """Epoch milliseconds (a commit's time, a file's modificationTime) as ISO 8601 in UTC with
    milliseconds, for `|when`; "" for none, and a value that is not a whole number as given."""
    if ms is None or ms == "":
        return ""
    if isinstance(ms, bool) or not isinstance(ms, int | float):
        return formatting.compact_json(ms)
    return format_ms(ms) or ""


@register.filter
def property_text(value: Any, key: str) -> str:
    """A table property's (or protocol field's) value as text; a time in epoch milliseconds
    under a key naming a time as its UTC date."""
    return formatting.epoch_title(str(key), value)[0]


@register.filter
def property_title(value: Any, key: str) -> str:
    """The title of property_text: the raw epoch milliseconds when the text is a date, else ""."""
    return formatting.epoch_title(str(key), value)[1]


@register.filter
def chips(values: Any, shown: str = "chips") -> dict[str, Any]:
    """A JSON object as chips (formatting.chips); a column shown as "metrics" gives its numbers
    their units (rows, bytes, durations)."""
    return formatting.chips(values, units=shown == "metrics")


@register.filter(name="reach_text")
def reach_words(entry: Any) -> dict[str, Any] | None:
    """A version's reachability entry in words (formatting.reach_text: ok, text, title, pin);
    None for no entry (a row the answer does not cover, or while it is computed)."""
    return formatting.reach_text(entry) if isinstance(entry, dict) else None
