"""The table of the "shared" cache (settings.CACHES) when no Redis is configured: sign-in
throttles, rate counts and reachability answers every process reads. Created whatever the
settings say now, so that a deployment can drop Redis later without another step."""

from django.conf import settings
from django.core.management.commands.createcachetable import Command as CreateCacheTable
from django.db import migrations


def create(apps, schema_editor) -> None:
    command = CreateCacheTable()
    command.verbosity = 0
    command.create_table(schema_editor.connection.alias, settings.SHARED_CACHE_TABLE, False)


def drop(apps, schema_editor) -> None:
    schema_editor.execute(f"DROP TABLE IF EXISTS {schema_editor.quote_name(settings.SHARED_CACHE_TABLE)}")


class Migration(migrations.Migration):
    dependencies = [("tables", "0019_restore_recover_files")]

    operations = [migrations.RunPython(create, drop)]
