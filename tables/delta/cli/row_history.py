"""`delta row-history`: one row's inserts, updates and deletes over a range of versions, by its key."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tables.delta.cli.base import compact, text_table


def key_pairs(given: Sequence[str]) -> list[tuple[str, str]]:
    """`--key COLUMN=VALUE` options as (column, value text) pairs, split at the first `=`."""
    pairs = []
    for text in given:
        name, sep, value = text.partition("=")
        if not sep or not name:
            raise ValueError(f"--key {text[:80]!r} is not COLUMN=VALUE")
        pairs.append((name, value))
    return pairs


def row_history_payload(path: str, opts: Mapping[str, Any]) -> Any:
    """The events of the row --key names, from --from to --to."""
    from tables.delta.history.row_history import row_history

    pairs = key_pairs(opts.get("key") or ())
    return row_history(path, pairs, opts.get("from_version"), opts.get("to_version")).to_dict()


def row_history_text(p: dict[str, Any]) -> str:
    """One line per event: the changed columns with their values before -> after."""
    key = ", ".join(f"{k}={compact(v)}" for k, v in p["key"].items())
    rows = []
    for e in p["events"]:
        if e["change"] == "update":
            values = "; ".join(
                f"{c}: {compact(e['before'].get(c))} -> {compact(e['after'].get(c))}" for c in e["changed"]
            )
        else:
            values = compact(e["after"] if e["change"] == "insert" else e["before"])
        rows.append([e["version"], e["change"], e["timestamp"], e["user"], values])
    text = f"key {key}: {len(p['events'])} event{'' if len(p['events']) == 1 else 's'}\n\n"
    text += text_table(["version", "change", "timestamp", "user", "values"], rows) if rows else "(no events)\n"
    files = p["files"]
    return text + f"\nfiles: {files['read']} read, {files['skipped']} skipped (partition values and statistics)\n"
