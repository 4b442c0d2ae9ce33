"""The Celery application; broker and schedule come from settings (Redis by default)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deltaweb.settings")

app = Celery("deltaweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
# one process runs every task (a pool of threads), so a worker keeps one Spark session (one
# JVM) for all of them: a prefork pool would start one per child (tables.tasks)
app.conf.worker_pool = os.environ.get("CELERY_WORKER_POOL", "threads")
app.autodiscover_tasks()

from deltaweb.logs import connect_celery  # noqa: E402  (the app first: the signals are Celery's)

connect_celery()
