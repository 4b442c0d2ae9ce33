"""The tables app: registered Delta tables, their history, time travel and restores."""

from django.apps import AppConfig


class TablesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "tables"

    def ready(self) -> None:
        from django.conf import settings

        from tables.delta.storage.api import set_roots_provider

        # every storage the app opens (pages, API, workers, Spark jobs) is confined to these:
        # the tables' roots and the pin store deltaweb writes kept versions into
        set_roots_provider(lambda: [*settings.DELTAWEB_ALLOWED_ROOTS, settings.DELTAWEB_PIN_STORE])
        _check_pin_store(settings)


def _check_pin_store(settings) -> None:
    """The app does not start with a pin store where kept versions may not go (a system
    directory, an allowed root or above one, inside a Delta table: docs/pins.md); an
    object-store store is judged by its name here, and looked at before each pin."""
    from django.core.exceptions import ImproperlyConfigured

    from tables.delta.errors import PinStoreRefusedError
    from tables.delta.write.keep_place import check_pin_store

    try:
        check_pin_store(str(settings.DELTAWEB_PIN_STORE), list(settings.DELTAWEB_ALLOWED_ROOTS), look=False)
    except PinStoreRefusedError as exc:
        raise ImproperlyConfigured(exc.message) from None
