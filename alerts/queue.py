"""The alerts app's task names, and sending its tasks by name (tables.services.jobs.lifecycle.send), now or after a delay, without
ever failing the caller: an unreachable broker leaves the row queued and the beat task
(alerts.sweep) sends it again."""

from __future__ import annotations

import logging
from typing import Any

from celery import current_app

from tables.services.jobs import lifecycle as jobs

logger = logging.getLogger("alerts")

# the tasks' names, stable across releases (queued messages carry them); tasks.py registers them
EVALUATE_TASK = "alerts.evaluate"
DELIVER_TASK = "alerts.deliver"


def send_quietly(task_name: str, *args: Any, countdown: float | None = None) -> bool:
    """Send `task_name`; False (logged) when the broker cannot be reached."""
    try:
        if countdown is None:
            jobs.send(task_name, *args)
        else:
            if task_name not in current_app.tasks:
                current_app.loader.import_default_modules()
            current_app.signature(task_name, args=args).apply_async(countdown=countdown)
        return True
    except Exception as exc:  # kombu raises several types for an unreachable broker
        logger.warning("%s%s not sent (%s); the sweep will send it", task_name, args, exc)
        return False
