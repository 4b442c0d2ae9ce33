"""The credentials app: installs the stored options as the storage layer's options provider."""

from django.apps import AppConfig


class CredentialsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "credentials"
    verbose_name = "storage credentials"

    def ready(self) -> None:
        from credentials.lookup import options_for
        from tables.delta.storage.api import set_options_provider

        # every storage the app opens (pages, API, workers, Spark jobs) gets the stored options
        # of its location's longest matching prefix, else the environment's credentials
        set_options_provider(options_for)
