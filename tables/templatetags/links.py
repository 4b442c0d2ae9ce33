"""`{% link %}`: `{% url %}` for the links every page repeats (the navigation bar, a table's
tabs), reversed once per process instead of on every page: reversing a name is a search of
the URL patterns, and a table's page asked for thirteen of them each time."""

from __future__ import annotations

from functools import lru_cache

from django import template
from django.urls import get_script_prefix, get_urlconf, reverse

register = template.Library()


@lru_cache(maxsize=4096)
def _reversed(prefix: str, urlconf: str | None, name: str, args: tuple[str, ...]) -> str:
    # `prefix` is part of the key only: reverse() prepends the current script prefix itself
    return reverse(name, urlconf=urlconf, args=args)


@register.simple_tag
def link(name: str, *args: object) -> str:
    """The URL of the pattern `name` with `args`, as `{% url name args %}` gives it."""
    return _reversed(get_script_prefix(), get_urlconf(), name, tuple(str(a) for a in args))
