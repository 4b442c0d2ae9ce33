"""`manage.py discover PREFIX | --glue DATABASE [--register] [--json]`: every Delta table under a
prefix, or of an AWS Glue Data Catalog database.

Without --register, prints what would be registered (one line per table: new or registered,
the name it gets, the location). With it, registers the new ones; their first sync follows on
the probe's next tick (a running beat and worker). Errors exit with status 2 and one line on
stderr.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from tables.delta.errors import DeltaError
from tables.delta.storage.backends import named_schemes
from tables.services.catalog import discovery
from tables.services.errors import ServiceError


class Command(BaseCommand):
    help = "Find the Delta tables under a directory or object-store prefix; --register registers the new ones."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "prefix", nargs="?", default="", help=f"a directory, or {named_schemes()} under DELTAWEB_ALLOWED_ROOTS"
        )
        parser.add_argument("--glue", default="", metavar="DATABASE", help="the Delta tables of this AWS Glue database")
        parser.add_argument("--register", action="store_true", help="register the new tables")
        parser.add_argument("--json", action="store_true", help="print the answer as JSON")
        parser.add_argument(
            "--limit", type=int, default=discovery.PREVIEW_ROWS, metavar="N", help="list the first N tables found"
        )
        parser.add_argument(
            "--every", type=int, default=0, metavar="HOURS", help="with --register: look again this often (beat)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            glue = options["glue"]
            if options["register"]:
                source = (
                    discovery.schedule(None, options["prefix"], glue, options["every"]) if options["every"] else None
                )
                answer = discovery.register_found(options["prefix"], None, glue_database=glue, source=source)
            elif glue:
                answer = discovery.preview_glue(glue, None, max(0, options["limit"]))
            else:
                answer = discovery.preview(options["prefix"], None, max(0, options["limit"]))
        except (ServiceError, DeltaError) as exc:
            sys.stderr.write(" ".join(str(exc).split()) + "\n")
            sys.exit(2)
        if options["json"]:
            self.stdout.write(json.dumps(answer, indent=2))
            return
        if options["register"]:
            for row in answer["registered"]:
                self.stdout.write(f"registered  {row['name']}  {row['location']}")
            for row in answer["skipped"]:
                self.stdout.write(f"skipped     {row['location']}: {row['message']}")
        else:
            for row in answer["tables"]:
                self.stdout.write(f"{row['status']:<11} {row['name']}  {row['location']}")
            if answer["more"]:
                self.stdout.write(f"... and {answer['more']:,} more (--json --limit N lists more)")
            self.stderr.write(f"{answer['new']} new, {answer['registered']} registered already")
        if answer["truncated"]:
            self.stderr.write(f"the search {answer['truncated']}")
