"""The alerts app's task names, and sending its tasks by name (tables.services.jobs.lifecycle.send), now or after a delay, without
ever failing the caller: an unreachable broker leaves the row queued and the beat task
(alerts.sweep) sends it again."""

from __future__ import annotations

import logging
from typing import Any

from tables.services.jobs import lifecycle as jobs

logger = logging.getLogger("alerts")

# the tasks' names, stable across releases (queued messages carry them); tasks.py registers them
EVALUATE_TASK = "alerts.evaluate"
DELIVER_TASK = "alerts.deliver"


def send_quietly(task_name: str, *args: Any, countdown: float | None = None) -> bool:
    """Send `task_name`; False (logged) when the broker cannot be reached."""

    def later(exc: Exception) -> None:
        logger.warning("%s%s not sent (%s); the sweep will send it", task_name, args, exc)

    return jobs.send_or_mark(task_name, *args, mark=later, countdown=countdown)
