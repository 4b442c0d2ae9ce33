"""Celery tasks: thin wrappers over services."""

from __future__ import annotations

from celery import shared_task

from . import services
from .models import Table


@shared_task(name="tables.sync_table", acks_late=True)
def sync_table(job_id: int) -> dict:
    from .models import Job

    job = Job.objects.filter(pk=job_id).select_related("table").first()
    if job is None or job.table_id is None:
        return {"error": f"job {job_id} not found"}
    return services.sync_table(job.table_id, job.pk)


@shared_task(name="tables.sync_all")
def sync_all() -> int:
    """Beat: re-sync every registered table (each as its own job)."""
    from django.db import transaction

    count = 0
    for table in Table.objects.all():
        with transaction.atomic():
            services.start_sync(table)
        count += 1
    return count
