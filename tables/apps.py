"""The tables app: registered Delta tables, their history, time travel and restores."""

from django.apps import AppConfig


class TablesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "tables"

    def ready(self) -> None:
        from django.conf import settings

        from tables.delta.storage.boundary import set_roots_provider

        # every storage the app opens (pages, API, workers, Spark jobs) is confined to these:
        # the tables' roots and the pin store deltaweb writes kept versions into
        set_roots_provider(lambda: [*settings.DELTAWEB_ALLOWED_ROOTS, settings.DELTAWEB_PIN_STORE])
