"""One vocabulary for operationMetrics: writers spell the same metric differently (Spark
`numDeletedRows`, delta-rs `num_deleted_rows`); rules and pages see Spark's camelCase names,
which the Delta protocol's documentation uses."""

from __future__ import annotations

import re
from typing import Any

_SNAKE = re.compile(r"_([a-z0-9])")

# names that differ beyond their case: delta-rs -> Spark
RENAMED = {"num_added_rows": "numOutputRows", "execution_time_ms": "executionTimeMs"}


def canonical(name: str) -> str:
    """The camelCase name of a metric (Spark's), whatever the writer called it."""
    if name in RENAMED:
        return RENAMED[name]
    return _SNAKE.sub(lambda m: m.group(1).upper(), name) if "_" in name else name


def normalized(metrics: dict[str, Any]) -> dict[str, Any]:
    """The metrics under their camelCase names; where a writer gave both, its camelCase one."""
    out = {canonical(k): v for k, v in metrics.items() if isinstance(k, str) and "_" in k}
    out.update({k: v for k, v in metrics.items() if isinstance(k, str) and "_" not in k})
    return out
