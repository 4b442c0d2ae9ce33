"""The alerts app: rules on newly synced commits, their deliveries, and the live activity feed."""

from django.apps import AppConfig


class AlertsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "alerts"
    verbose_name = "Alerts"

    def ready(self) -> None:
        from alerts import plugin
        from alerts.hooks import on_commits_stored, on_files_removed, on_history_rewritten, on_prune
        from tables.signals import commits_stored, files_removed, history_rewritten, prune

        plugin.register()  # the host's pages and metrics (tables.plugins)
        commits_stored.connect(on_commits_stored, dispatch_uid="alerts.commits_stored")
        files_removed.connect(on_files_removed, dispatch_uid="alerts.files_removed")
        history_rewritten.connect(on_history_rewritten, dispatch_uid="alerts.history_rewritten")
        prune.connect(on_prune, dispatch_uid="alerts.prune")
