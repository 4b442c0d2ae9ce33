"""The alerts app: rules on newly synced commits, their deliveries, and the live activity feed."""

from django.apps import AppConfig


class AlertsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "alerts"
    verbose_name = "Alerts"
