"""Celery tasks of the alerts app: thin wrappers, registered under the names the services
send (alerts.queue.EVALUATE_TASK, alerts.queue.DELIVER_TASK) and the beat schedule uses."""

from __future__ import annotations

from celery import shared_task

from alerts.detect import evaluate, silence
from alerts.notify import delivery
from alerts.queue import DELIVER_TASK, EVALUATE_TASK


@shared_task(name=EVALUATE_TASK, acks_late=True)
def evaluate_scan(scan_id: int) -> dict:
    return evaluate.run_scan(scan_id)


@shared_task(name=DELIVER_TASK, acks_late=True)
def deliver(delivery_id: int, how: str = "") -> dict:
    return delivery.deliver(delivery_id, manual=how == "manual")


@shared_task(name="alerts.sweep")
def sweep() -> dict:
    return delivery.sweep()


@shared_task(name="alerts.check_silence")
def check_silence() -> dict:
    return silence.check_tables()
