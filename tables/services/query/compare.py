"""The same query at two versions, compared: "what did this report say then, and what does it
say now?"

`start_compare(table, text, a, b, user)` starts (or reuses) the query twice, the page's table
named without a version read at `a` and then at `b`. `compare(job_a, job_b, keys)` matches the
two results' rows on the key columns (the query's GROUP BY columns by default, or columns the
user names) and answers the rows only at one side, only at the other, and those whose other
columns changed (each changed column with its value before and after), with counts and, for
each numeric column, the per-group change. Both results are at most DELTAWEB_QUERY_MAX_ROWS
rows, read with pyarrow in the web process.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from tables.models import Job, JobKind, JobStatus, Table
from tables.services.errors import ServiceError
from tables.services.query.run import at_version, start_query
from tables.spark.results import part_files, table_to_json

MAX_SHOWN = 1000  # rows of each kind the answer lists (the counts cover them all)
NUMERIC_TYPES = ("byte", "short", "integer", "long", "float", "double", "decimal")  # by Delta's names


def start_compare(table: Table, text: str, a: str, b: str, user: Any) -> tuple[Job, Job]:
    """The query at `a` and at `b` (a version number or a time each)."""
    first = start_query(table, text, user, at_version(a))
    second = start_query(table, text, user, at_version(b))
    return first, second


def _result(job: Job) -> dict[str, Any]:
    if job.kind != JobKind.QUERY:
        raise ServiceError(f"Job {job.pk} is not a query.", "invalid", 400)
    if job.status != JobStatus.SUCCEEDED:
        raise ServiceError(f"Query job {job.pk} is {job.status}; compare once both have succeeded.", "not_ready", 409)
    path = (job.result or {}).get("path")
    if not path or not Path(path).exists():
        raise ServiceError(f"The result of query job {job.pk} is gone; run it again.", "results_gone", 410)
    files = part_files(path)
    table = pq.read_table(files[0]) if len(files) == 1 else pq.ParquetDataset([str(f) for f in files]).read()
    return table_to_json(table)


def _key(row: dict[str, Any], keys: list[str]) -> str:
    return json.dumps([row.get(k) for k in keys], sort_keys=True, default=str)


def number(value: Any) -> float | None:
    """A result's value as a number (a decimal comes as its text); None for anything else."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(value) if isinstance(value, str) else None
    except ValueError:
        return None


def compare(job_a: Job, job_b: Job, keys: list[str] | None = None) -> dict[str, Any]:
    """Rows only at a, only at b, and changed, matched on `keys` (module docstring)."""
    if (job_a.params or {}).get("text") != (job_b.params or {}).get("text"):
        raise ServiceError("The two jobs ran different statements; compare one query at two versions.", "invalid")
    a, b = _result(job_a), _result(job_b)
    names_a = [c["name"] for c in a["columns"]]
    names_b = [c["name"] for c in b["columns"]]
    keys = [k for k in (keys or (job_a.params or {}).get("groupKeys") or []) if k]
    if not keys:
        raise ServiceError(
            "Name the key columns to match rows on (the query has no GROUP BY to take them from).", "invalid_keys"
        )
    missing = [k for k in keys if k not in names_a or k not in names_b]
    if missing:
        raise ServiceError(f"Key column(s) {', '.join(missing)} are not in both results.", "invalid_keys")
    rows_a = {_key(r, keys): r for r in a["rows"]}
    rows_b = {_key(r, keys): r for r in b["rows"]}
    if len(rows_a) < len(a["rows"]) or len(rows_b) < len(b["rows"]):
        raise ServiceError(
            f"The key column(s) {', '.join(keys)} do not identify a row: a result repeats a key. Name others.",
            "invalid_keys",
        )
    values = [n for n in names_b if n not in keys and n in names_a]
    numeric = [c["name"] for c in b["columns"] if c["name"] in values and is_numeric(c["type"])]
    only_a = [rows_a[k] for k in rows_a if k not in rows_b]
    only_b = [rows_b[k] for k in rows_b if k not in rows_a]
    changed = []
    for k, before in rows_a.items():
        after = rows_b.get(k)
        if after is None:
            continue
        diffs = [
            {"column": n, "before": before.get(n), "after": after.get(n), "delta": _delta(before.get(n), after.get(n))}
            for n in values
            if before.get(n) != after.get(n)
        ]
        if diffs:
            changed.append({"key": {c: after.get(c) for c in keys}, "changes": diffs})
    return {
        "keys": keys,
        "columns": values,
        "numeric": numeric,
        "from": _side(job_a),
        "to": _side(job_b),
        "counts": {
            "onlyFrom": len(only_a),
            "onlyTo": len(only_b),
            "changed": len(changed),
            "same": _same(rows_a, rows_b, changed),
        },
        "onlyFrom": only_a[:MAX_SHOWN],
        "onlyTo": only_b[:MAX_SHOWN],
        "changed": changed[:MAX_SHOWN],
        "cut": bool((job_a.result or {}).get("cut") or (job_b.result or {}).get("cut")),
    }


def _same(rows_a: dict, rows_b: dict, changed: list) -> int:
    return sum(1 for k in rows_a if k in rows_b) - len(changed)


def _delta(before: Any, after: Any) -> float | None:
    x, y = number(before), number(after)
    return None if x is None or y is None else y - x


def is_numeric(type_name: str) -> bool:
    return type_name.split("(")[0] in NUMERIC_TYPES


def _side(job: Job) -> dict[str, Any]:
    return {"job": job.pk, "references": (job.params or {}).get("references", [])}
