"""`manage.py bootstrap_demo`: create (once) the demo table, register it and sync it."""

from __future__ import annotations

import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from tables.delta.errors import DeltaError
from tables.models import Table
from tables.services.catalog.demo import build_demo_table
from tables.services.catalog.registration import register_table
from tables.services.errors import ServiceError
from tables.services.sync.store import sync_table


class Command(BaseCommand):
    requires_system_checks: list[str] = []  # a reader of logs needs no URL or model checks
    help = "Create the demo 'orders' table under the first allowed root, register and sync it (idempotent)."

    def handle(self, *args, **options) -> None:
        root = Path(settings.DELTAWEB_ALLOWED_ROOTS[0]) / "demo-orders"
        try:
            if not (root / "_delta_log").exists():
                root.parent.mkdir(parents=True, exist_ok=True)
                build_demo_table(root)
                self.stdout.write(f"created the demo table at {root}")
            table = Table.objects.filter(name="demo orders").first()
            if table is None:
                table = register_table("demo orders", str(root), "A demo table with ICT enabled at version 6")
                self.stdout.write(f"registered it as '{table.name}'")
            sync_table(table.pk)
        except (DeltaError, ServiceError, OSError) as exc:
            sys.stderr.write(f"error: {exc}\n")
            sys.exit(2)
