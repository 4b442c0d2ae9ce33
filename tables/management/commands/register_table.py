"""`manage.py register_table NAME PATH [--description TEXT] [--sync]`: register a Delta table.

Prints the new table's id. Errors exit with status 2 and one line on stderr. With --sync the
table's history is synced in this process (no worker needed) before the command returns.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from tables.delta.errors import DeltaError
from tables.services.catalog.registration import register_table
from tables.services.errors import ServiceError
from tables.services.sync.store import sync_table


class Command(BaseCommand):
    help = "Register a Delta table (and optionally sync its history now); prints the table id."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="a unique name for the table")
        parser.add_argument("path", help="the table root: an absolute directory or file:// URI")
        parser.add_argument("--description", default="", help="free text shown with the table")
        parser.add_argument("--sync", action="store_true", help="sync the history now, in this process")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            table = register_table(options["name"], options["path"], options["description"])
        except (ServiceError, DeltaError) as exc:
            self._fail(str(exc))
        self.stdout.write(str(table.pk))
        if options["sync"]:
            result = sync_table(table.pk)
            if result.get("error"):
                self._fail(f"registered table {table.pk}, but the sync failed: {result['error']}")
            if result.get("skipped"):
                self._fail(f"registered table {table.pk}, but the sync was skipped: {result.get('reason')}")
            self.stderr.write(
                f"synced {table.name}: {result.get('newCommits', 0)} commits, latest version {result.get('latestVersion')}"
            )

    def _fail(self, message: str) -> None:
        sys.stderr.write(" ".join(message.split()) + "\n")
        sys.exit(2)
