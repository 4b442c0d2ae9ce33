"""deltaweb: history, time travel and restore for Delta Lake tables."""

from deltaweb.celery import app as celery_app

__all__ = ("celery_app",)
__version__ = "0.1.0"
