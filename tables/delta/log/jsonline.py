"""Decoding one line of a log file (commit, compaction, JSON checkpoint), the one way every
reader of the core does it: a line that is not JSON, or that nests deeper than anything the
rest of the code can carry, is a corrupt log naming its file and line.

Kept apart from actions.py (pyarrow, numpy) so that readers of a commit's commitInfo alone (a
sync's reader processes, the history) stay as light to import as they were.
"""

from __future__ import annotations

from typing import Any

import orjson

from tables.delta.errors import CorruptLogError

# Deepest nesting of one line of a log (the line's object is level 1). Real actions are a few
# levels deep (a schema is a string); delta-rs refuses beyond 128 too (serde_json's limit).
# Everything past the decoder walks values recursively (bounding stored strings, writing JSON:
# orjson writes at most 254 levels), so a deeper line must stop here, as a named corrupt log,
# not as a RecursionError or an encoder's error far from the file that caused it.
MAX_NESTING = 128


def deeper_than(value: Any, limit: int) -> bool:
    """Whether a decoded JSON value nests containers more than `limit` levels (iterative: the
    value may be as deep as the decoder allows). The API's JSON parser bounds bodies with it too."""
    stack = [(value, 1)] if isinstance(value, (dict, list)) else []
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def _too_deep(line: bytes, value: Any) -> bool:
    # a line with fewer brackets than the limit cannot nest deeper: counting them is all almost
    # every line costs; only a line with many (a wide schema's escaped text) is walked
    if line.count(b"{") + line.count(b"[") <= MAX_NESTING:
        return False
    return deeper_than(value, MAX_NESTING)


def _decoder_too_deep(exc: BaseException) -> bool:
    """A decoder's failure that is about depth (orjson stops at 1024 levels; the standard
    library's json raises RecursionError)."""
    text = str(exc).lower()
    return isinstance(exc, RecursionError) or "depth" in text or "recursion" in text


def _too_deep_error(name: str, lineno: int | None, error: type[CorruptLogError] = CorruptLogError) -> CorruptLogError:
    where = f"{name}: line {lineno}" if lineno is not None else name
    return error(
        f"{where}: the JSON is nested too deep (more than {MAX_NESTING} levels)",
        file=name,
        line=lineno,
        reason="nested_too_deep",
    )


def loads_line(
    line: bytes, name: str, lineno: int | None = None, error: type[CorruptLogError] = CorruptLogError
) -> Any:
    """One line of a log file (commit, compaction, JSON checkpoint) decoded. A line that is not
    JSON, or nests deeper than MAX_NESTING, raises `error` naming the file `name` and the line,
    the one place every reader of log lines decodes them, so none fails without naming both."""
    try:
        value = orjson.loads(line)
    except (orjson.JSONDecodeError, RecursionError) as exc:
        if _decoder_too_deep(exc):
            raise _too_deep_error(name, lineno, error) from exc
        where = f"{name}: line {lineno}" if lineno is not None else f"{name}: a line"
        raise error(f"{where} is not valid JSON ({exc})", file=name, line=lineno) from exc
    if _too_deep(line, value):
        raise _too_deep_error(name, lineno, error)
    return value
