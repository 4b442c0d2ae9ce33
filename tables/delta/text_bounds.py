"""The one rule for a string of a table's log shown back to a user: at most a given length,
and a string that was cut says so and how long it was. A log is untrusted input: a 50 MB add
path must not come back whole from every page and answer that lists files."""

from __future__ import annotations

from typing import Any

MAX_ECHOED_PATH = 4096  # PATH_MAX: longer names no file system holds anyway
MAX_ECHOED_VALUE = 1000  # a partition value, a deletion vector's path or inline bytes


def truncation_marker(total: int) -> str:
    return f"…[truncated, {total} characters]"


def cut(text: str, limit: int) -> str:
    """`text`, or its start and the marker, in at most `limit` characters."""
    if len(text) <= limit:
        return text
    marker = truncation_marker(len(text))
    return text[: max(limit - len(marker), 0)] + marker


def echoed_path(path: str) -> str:
    return cut(path, MAX_ECHOED_PATH)


def echoed_values(values: dict[str, Any] | None) -> dict[str, Any]:
    """Partition values (or a deletion vector's fields) with every string bounded."""
    return {
        cut(str(k), MAX_ECHOED_VALUE): cut(v, MAX_ECHOED_VALUE) if isinstance(v, str) else v
        for k, v in (values or {}).items()
    }


MAX_ECHOED_ITEMS = 50  # entries of a list or object shown back (a checksum's values)
MAX_ECHOED_DEPTH = 6  # levels of nesting shown back; deeper ones come back as bounded JSON text


def echoed_json(value: Any, depth: int = 0) -> Any:
    """A decoded JSON value of a log (or a checksum file) shown back: strings cut to
    MAX_ECHOED_PATH, lists and objects to their first MAX_ECHOED_ITEMS entries (a list that
    was cut ends with a marker string), nesting beyond MAX_ECHOED_DEPTH as cut text."""
    if isinstance(value, str):
        return cut(value, MAX_ECHOED_PATH)
    if not isinstance(value, (dict, list)):
        return value
    if depth >= MAX_ECHOED_DEPTH:
        return cut(repr(value), MAX_ECHOED_VALUE)
    if isinstance(value, list):
        out = [echoed_json(v, depth + 1) for v in value[:MAX_ECHOED_ITEMS]]
        if len(value) > MAX_ECHOED_ITEMS:
            out.append(f"…[{len(value) - MAX_ECHOED_ITEMS} more]")
        return out
    items = list(value.items())[:MAX_ECHOED_ITEMS]
    return {cut(str(k), MAX_ECHOED_VALUE): echoed_json(v, depth + 1) for k, v in items}
