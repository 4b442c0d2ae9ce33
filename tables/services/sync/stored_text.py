"""The strings of a table's log, bounded before they are stored: a log is untrusted input, so
a value that was cut says so, and how long it was, and nobody takes a cut userMetadata for the
whole of it. The checks are cheap for the common case (almost every commitInfo fits)."""

from __future__ import annotations

import re
from typing import Any

import orjson

from tables.delta.history.columns import MAX_TEXT  # userMetadata's bound, and strings' inside JSON columns
from tables.delta.text_bounds import cut  # the one rule for a cut string (marked with its length)

# Strings of a table's log are untrusted and stored bounded; a value that was cut says so, and
# how long it was, so nobody takes a cut userMetadata for the whole of it.
MAX_JSON_TEXT = 2000  # strings inside the stored commitInfo
MAX_ITEMS = 1000  # entries of a JSON object or array
MAX_KEY = 200  # keys of a JSON object


def fits(value: Any, limit: int = MAX_TEXT) -> bool:
    """Whether cut_json would leave `value` as it is (a walk that builds nothing: almost every
    commitInfo fits, and copying it cost more than reading the commit)."""
    if isinstance(value, str):
        return len(value) <= limit
    if isinstance(value, dict):
        return len(value) <= MAX_ITEMS and all(
            isinstance(k, str) and len(k) <= MAX_KEY and fits(v, limit) for k, v in value.items()
        )
    if isinstance(value, list):
        return len(value) <= MAX_ITEMS and all(fits(v, limit) for v in value)
    return True


# a quoted run longer than MAX_KEY before a colon: where a long key may be (or a false alarm,
# which only costs the full walk)
_LONG_KEY = re.compile(rb'"(?:[^"\\]|\\.){%d,}"\s*:' % (MAX_KEY + 1))


def fits_serialized(value: Any, limit: int) -> bool:
    """`fits`, answered from the value's JSON text when that is short: no string (nor, at
    MAX_ITEMS entries, any object or array) can be longer than the text itself, so only long
    keys are left to look for. Longer values are walked."""
    try:
        text = orjson.dumps(value)
    except TypeError:
        return fits(value, limit)
    return fits_text(value, text, limit)


def fits_text(value: Any, text: bytes, limit: int) -> bool:
    """`fits_serialized` of a value whose JSON text (orjson's) is `text`."""
    # an array or object of more than MAX_ITEMS entries takes at least 2 * MAX_ITEMS + 3 bytes
    if len(text) <= min(limit, 2 * MAX_ITEMS + 2):
        if len(text) <= MAX_KEY:
            return True
        # no run between two quotes longer than MAX_KEY and no escaped quote: no key can be
        # longer (a split is several times cheaper than the pattern's search)
        if b'\\"' not in text and max(map(len, text.split(b'"'))) <= MAX_KEY:
            return True
        return _LONG_KEY.search(text) is None
    return fits(value, limit)


def cut_json(value: Any, limit: int = MAX_TEXT) -> Any:
    """A JSON value with long strings cut (marked) and long objects and arrays shortened, with
    a marker entry saying how many entries were left out."""
    if isinstance(value, str):
        return cut(value, limit)
    if isinstance(value, dict):
        items = list(value.items())
        out = {cut(str(k), MAX_KEY): cut_json(v, limit) for k, v in items[:MAX_ITEMS]}
        if len(items) > MAX_ITEMS:
            out["…"] = f"[truncated, {len(items)} entries]"
        return out
    if isinstance(value, list):
        out_list = [cut_json(v, limit) for v in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            out_list.append(f"…[truncated, {len(value)} items]")
        return out_list
    return value


def _text(value: Any, limit: int) -> str:
    return cut(str(value or ""), limit)


def text_of(value: Any, limit: int) -> str:
    """A value as bounded text (`_text`), with the common cases first (a field left out, a short string: no copy)."""
    if value is None:
        return ""
    if type(value) is str and len(value) <= limit:
        return value
    return _text(value, limit)
