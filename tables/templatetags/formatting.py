"""Values as text in a template (`{% load formatting %}`): `{{ value|compact_json }}`,
`{{ value|pretty_json }}`, `{{ values|partition_text }}`, `{{ n|human_count }}`,
`{{ n|human_bytes }}`, `{{ ms|human_ms }}`, `{{ source|source_label }}`. The functions are the pages' own
(tables/web/base/formatting.py), so a value reads the same whether a view or a template
formats it; the output is plain text, escaped like any other."""

from __future__ import annotations

from django import template

from tables.web.base import formatting

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
