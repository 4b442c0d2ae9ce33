"""The tables app: registered Delta tables, their history, time travel and restores."""

from django.apps import AppConfig


class TablesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "tables"
