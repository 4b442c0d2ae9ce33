"""`manage.py delta SUBCOMMAND`: the `delta` console script (tables.delta.cli) under manage.py.

Same subcommands, options, JSON, text and exit statuses: the parser's subcommands and the
running both come from tables.delta.cli. The standalone `delta` script starts faster (no Django)
and reads only the path it is given; here a version asked for by number on a registered table's
location follows the one rule (tables.services.versions.source): a version the table lost and a
pin keeps is read from the pin, and stderr says so.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from tables.delta import cli
from tables.delta.storage import api as storage_api
from tables.delta.storage.api import set_roots_provider


def registered_table(path: str) -> Any:
    """The Table registered at `path` (compared as registration stores locations: an object
    store's canonical URI, a local path resolved), or None."""
    from tables.delta.errors import DeltaError
    from tables.delta.storage.api import local_path
    from tables.models import Table
    from tables.services.catalog.registration import object_location
    from tables.services.errors import ServiceError

    try:
        location = object_location(path) or os.path.realpath(local_path(path.strip()))
    except (ServiceError, DeltaError, ValueError, OSError):  # not a location: read as given
        return None
    return Table.objects.filter(location=location).first()


def pinned_source(path: str, version: int) -> tuple[str, int | None, str] | None:
    """cli.VersionSource: where the registered table at `path` gives `version` from, when that
    is a pin's kept table; None (read the path as given) otherwise."""
    from django.db import DatabaseError

    from tables.services.versions.source import source_of

    try:
        table = registered_table(path)
        if table is None:
            return None
        source = source_of(table, version, wait=True)
    except DatabaseError:  # no database (not migrated, not reachable): the path as given
        return None
    if not source.from_pin:
        return None
    # the note names the pin, never the pin store's directory
    note = f"version {version} of {table.name} read from pin {source.pin.name}: its files were removed by VACUUM"
    return source.location, source.version, note


class Command(BaseCommand):
    requires_system_checks: list[str] = []  # a reader of logs needs no URL or model checks
    help = cli.DESCRIPTION

    def add_arguments(self, parser: CommandParser) -> None:
        cli.add_subcommands(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        # an operator's tool on a table they name: confined to DELTAWEB_ALLOWED_ROOTS from the
        # environment when set, else to the table's own root, not to the web app's setting
        previous = storage_api._roots_provider  # restored after: call_command runs in-process
        set_roots_provider(None)
        try:
            status = cli.execute(options, version_source=pinned_source)
        finally:
            set_roots_provider(previous)
        if status:
            sys.exit(status)
