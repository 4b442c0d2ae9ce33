"""`manage.py delta SUBCOMMAND`: the `delta` console script (tables.delta.cli) under manage.py.

Same subcommands, options, JSON, text and exit statuses: the parser's subcommands and the
running both come from tables.delta.cli. The standalone `delta` script starts faster (no Django).
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from tables.delta import cli
from tables.delta.storage.boundary import set_roots_provider


class Command(BaseCommand):
    requires_system_checks: list[str] = []  # a reader of logs needs no URL or model checks
    help = cli.DESCRIPTION

    def add_arguments(self, parser: CommandParser) -> None:
        cli.add_subcommands(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        # an operator's tool on a table they name: confined to DELTAWEB_ALLOWED_ROOTS from the
        # environment when set, else to the table's own root, not to the web app's setting
        set_roots_provider(None)
        status = cli.execute(options)
        if status:
            sys.exit(status)
