"""The Celery application; broker and schedule come from settings (Redis by default)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deltaweb.settings")

app = Celery("deltaweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
