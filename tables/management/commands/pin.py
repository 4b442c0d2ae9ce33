"""`manage.py pin TABLE VERSION --name NAME --reason TEXT --as USER [--expires ISO]`: pin a
version (written into the pin store at once); `manage.py pin --expire`: remove the pins past
their expiry (their kept tables deleted); `manage.py pin --sweep`: the beat's sweep of pins now
(pins left in "writing" resumed or failed with the reason, due pins expired, held pins settled).

Prints the new pin as JSON. Errors exit with status 2 and one line on stderr. Removing a pin
before its expiry is an approver's decision: the API, the pages or the admin console.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.utils.dateparse import parse_datetime

from tables.api.pins import PinSerializer
from tables.delta.errors import DeltaError
from tables.services.catalog.lookup import table_by_key
from tables.services.errors import ServiceError
from tables.services.pins import lifecycle as pins
from tables.services.versions.unreadable import refuse_pin


class Command(BaseCommand):
    help = "Pin a version of a table (kept through any VACUUM and log cleanup), or expire due pins."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("table", nargs="?", help="the table's id or slug")
        parser.add_argument("version", nargs="?", type=int, help="the version to pin")
        parser.add_argument("--name", help="the pin's name (unique per table)")
        parser.add_argument("--reason", help="why the version must be kept")
        parser.add_argument("--as", dest="user", help="the user the pin is made by (analyst, approver or staff)")
        parser.add_argument("--expires", default=None, help="ISO-8601 date-time after which the pin may go")
        parser.add_argument("--expire", action="store_true", help="remove the pins past their expiry")
        parser.add_argument(
            "--sweep", action="store_true", help="resume or fail pins left in writing, expire, settle held pins"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["sweep"]:
            self.stdout.write(json.dumps(pins.sweep_pins()))
            return
        if options["expire"]:
            self.stdout.write(json.dumps({"expired": pins.expire_pins()}))
            return
        missing = [o for o in ("table", "version", "name", "reason", "user") if options.get(o) in (None, "")]
        if missing:
            self._fail(
                "give " + ", ".join(("--as" if m == "user" else m if m == "table" else f"--{m}") for m in missing)
            )
        table = table_by_key(options["table"])
        if table is None:
            self._fail(f"no table with id or slug {options['table'][:80]!r}")
        user = get_user_model().objects.filter(username=options["user"]).first()
        if user is None:
            self._fail(f"no user {options['user'][:80]!r}")
        expires = self._expiry(options["expires"])
        try:
            refuse_pin(table, options["version"])  # a version the table no longer gives whole
            pin = pins.create_pin(table, options["version"], options["name"], options["reason"], user, expires)
        except (ServiceError, DeltaError) as exc:
            self._fail(str(exc))
        self.stdout.write(json.dumps(PinSerializer(pin).data))

    def _expiry(self, text: str | None) -> datetime | None:
        if not text:
            return None
        when = parse_datetime(text)
        if when is None:
            self._fail(f"--expires {text[:40]!r} is not an ISO-8601 date-time")
        if when.tzinfo is None:
            from datetime import UTC

            when = when.replace(tzinfo=UTC)
        return when

    def _fail(self, message: str) -> None:
        sys.stderr.write(" ".join(message.split()) + "\n")
        sys.exit(2)
