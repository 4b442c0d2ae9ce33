"""`manage.py managed_table create|take-over|hand-back|freeze|unfreeze|backfill ...`: deltaweb as
a table's commit-owner from the command line (an operator's tool: no role checks).

  create NAME PATH [--schema JSON]     a new managed table (version 0 put-if-absent), registered
  take-over TABLE                      make deltaweb the commit-owner of a registered table
  hand-back TABLE                      make it a filesystem table again (everything backfilled)
  freeze TABLE --reason TEXT           refuse every commit until unfrozen
  unfreeze TABLE
  backfill TABLE                       copy every ratified commit to _delta_log/ now

TABLE is a table's id or slug. Prints one JSON object; errors exit with status 2.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from tables.delta.errors import DeltaError
from tables.models import Table
from tables.services.catalog.lookup import table_by_key
from tables.services.errors import ServiceError
from tables.services.managed import use_cases as owner_services
from tables.services.owner.access import managed_of
from tables.services.owner.summary import summary

DEFAULT_SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}


class Command(BaseCommand):
    help = "Create, take over, hand back, freeze, unfreeze or backfill tables deltaweb is the commit-owner of."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create")
        create.add_argument("name")
        create.add_argument("path")
        create.add_argument("--schema", default=None, help="the Delta schema as JSON (default: id long)")
        for name in ("take-over", "hand-back", "unfreeze", "backfill"):
            sub.add_parser(name).add_argument("table")
        freeze = sub.add_parser("freeze")
        freeze.add_argument("table")
        freeze.add_argument("--reason", required=True)

    def _table(self, key: str) -> Table:
        table = table_by_key(key)
        if table is None:
            raise ServiceError(f"no table with id or slug '{key}'", "not_found")
        return table

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        try:
            if action == "create":
                schema = json.loads(options["schema"]) if options["schema"] else DEFAULT_SCHEMA
                table = owner_services.create_managed_table(options["name"], options["path"], schema)
                out: Any = {"table": table.pk, **summary(managed_of(table))}
            else:
                table = self._table(options["table"])
                if action == "take-over":
                    out = owner_services.take_over(table)
                elif action == "hand-back":
                    out = owner_services.hand_back(table)
                elif action == "freeze":
                    out = summary(owner_services.freeze(table, None, options["reason"]))
                elif action == "unfreeze":
                    out = summary(owner_services.unfreeze(table, None))
                else:
                    out = {"backfilledVersion": owner_services.backfill(table.pk)}
        except (ServiceError, DeltaError, ValueError) as exc:
            sys.stderr.write(f"error: {exc}\n")
            sys.exit(2)
        self.stdout.write(json.dumps(out, default=str))
