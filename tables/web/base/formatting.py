"""Values as a page shows them: JSON compact or pretty, partition values, counts, bytes and
durations, a Delta metric with its unit, a JSON object as chips, an epoch-milliseconds property
as a date, a version's reachability in words. Pure text from plain values; templates escape what
they print. Each is a template filter too (tables/templatetags/formatting.py): pages format in
their templates; Python callers (exports, the admin) call these functions."""

from __future__ import annotations

import json
from typing import Any

from tables.delta.history.timestamps import format_ms


def compact_json(value: Any) -> str:
    if value is None or value == "" or value == {}:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=False, separators=(", ", ": "), default=str)


def partition_text(values: Any) -> str:
    """Partition values as people write them, `region=apac, day=2024-05-01` (null for a null
    value), not as JSON; anything but a mapping as compact JSON."""
    if not isinstance(values, dict):
        return compact_json(values)
    return ", ".join(f"{k}={'null' if v is None else v}" for k, v in values.items())


def pretty_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def source_label(source: str) -> str:
    return "ICT" if source == "ict" else "file"


def human_count(n: int) -> str:
    return f"{n:,}"


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(size) < 1024 or unit == "TB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # unreachable: TB above ends the loop


def human_ms(ms: int) -> str:
    if abs(ms) < 1000:
        return f"{ms} ms"
    s = ms / 1000
    if s < 60:
        return f"{s:.1f} s"
    m, s = divmod(int(s), 60)
    if m < 60:
        return f"{m} min {s} s"
    h, m = divmod(m, 60)
    return f"{h} h {m} min"


def metric_unit(key: str) -> str | None:
    """Which human unit a Delta metric is in, from its name (Delta and delta-rs name them
    consistently): bytes, ms, rows, files, or None for a plain value."""
    k = key.lower()
    if k.endswith("bytes") or k.endswith("size") or "filessize" in k or k.endswith("sizeafterrestore"):
        return "bytes"
    if k.endswith("timems") or k.endswith("durationms") or k.endswith("_ms") or k.endswith("timeinms"):
        return "ms"
    if k.endswith("rows") or ("rows" in k and k.startswith("num")):
        return "rows"
    if k.endswith("files") or (k.startswith("num") and "files" in k):
        return "files"
    return None


def metric_text(key: str, value: Any) -> str:
    """A metric's value with its unit, e.g. 12,345 rows, 1.2 MB, 3.4 s; text as given."""
    raw = value if isinstance(value, str) else compact_json(value)
    if isinstance(value, bool):
        return raw
    try:
        n = int(value)
    except (TypeError, ValueError):
        return raw
    if str(n) != str(value).strip():  # "1.5", "007": not a plain integer, shown as given
        return raw
    unit = metric_unit(key)
    if unit == "bytes":
        return human_bytes(n)
    if unit == "ms":
        return human_ms(n)
    if unit in ("rows", "files"):
        return f"{human_count(n)} {unit[:-1] if n == 1 else unit}"
    return human_count(n)


CHIPS_SHOWN = 4  # the rest behind "n more" (a <details>), so a MERGE row stays one line high


def chips(values: Any, units: bool) -> dict[str, Any]:
    """A JSON object as chips (key, text, raw value for the title), the first CHIPS_SHOWN
    visible and the rest hidden; units turn metric numbers into rows, bytes and durations."""
    if not isinstance(values, dict):
        text = compact_json(values)
        return {"shown": [{"key": "", "text": text, "raw": text}] if text else [], "more": []}
    out = []
    for key, value in values.items():
        raw = value if isinstance(value, str) else compact_json(value)
        text = metric_text(str(key), value) if units else raw
        out.append({"key": str(key), "text": text, "raw": raw if text != raw else ""})
    return {"shown": out[:CHIPS_SHOWN], "more": out[CHIPS_SHOWN:]}


_EPOCH_KEYS = ("timestamp", "time", "ms")


def epoch_title(key: str, value: Any) -> tuple[str, str]:
    """(text, title) of a property value: a key naming a time (…Timestamp, …Time) whose value
    is epoch milliseconds reads as a UTC date, the raw value in the title; else as given."""
    text = compact_json(value) if value is not None else ""
    if key.lower().endswith(_EPOCH_KEYS) and text.isdigit() and 9 <= len(text) <= 16:
        return format_ms(int(text)) or text, f"{text} (epoch milliseconds)"
    return text, ""


def reach_text(entry: dict[str, Any] | None) -> dict[str, Any] | None:
    """A version's reachability (the core's entry) in words for the history's "readable"
    column: ok, the words and a longer title; None when unknown."""
    if entry is None:
        return None
    reason = entry.get("reason")
    pin = entry.get("pin")
    if pin:  # the table lost it; the pin that keeps it answers (tables.services.versions.pinned.mark_pin)
        lost = {
            "files_missing": "its data files were removed from the table (VACUUM)",
            "log_expired": "log cleanup removed its commits from the table",
        }.get(reason or "", "the table alone cannot give it whole")
        return {
            "ok": True,
            "text": f"kept by pin {pin.name}",
            "title": f"{lost}; it is read from pin {pin.name}, which keeps it whole",
            "pin": pin,
        }
    if entry.get("readable"):
        if reason == "beyond_retention":
            return {"ok": True, "text": "beyond retention", "title": "readable, but VACUUM may delete its files now"}
        return {"ok": True, "text": "", "title": "its state and every file it needs are there"}
    if reason == "files_missing":
        n = entry["missingFiles"]["count"]
        restore = "; a restore to it is still possible" if entry.get("restorable") else ""
        return {
            "ok": False,
            "text": f"{n} file{'' if n == 1 else 's'} vacuumed",
            "title": f"data files deleted{restore}",
        }
    if reason == "log_expired":
        return {"ok": False, "text": "log expired", "title": "log cleanup removed the commits needed to rebuild it"}
    if reason == "checkpoint_mismatch":
        return {
            "ok": False,
            "text": "checkpoint disagrees",
            "title": "it is read from a checkpoint that is not the state its commits give (another table's, or rewritten)",
        }
    return {"ok": False, "text": "not reproducible", "title": "its state cannot be rebuilt from the log"}
