"""`manage.py listen_events [--queue URL] [--wait 10]`: sync tables when S3 tells of new commits.

Long-polls the SQS queue (DELTAWEB_SQS_QUEUE_URL unless --queue) that receives the bucket's
event notifications, and starts the sync of each registered table a message names. Stops on
SIGTERM or Ctrl-C after the poll in progress. AWS credentials and endpoint come from the
standard AWS_* environment.
"""

from __future__ import annotations

import signal
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from tables.services.sync import events


class Command(BaseCommand):
    help = "Sync tables on S3 event notifications from an SQS queue."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--queue", default="", help="the queue URL (default: DELTAWEB_SQS_QUEUE_URL)")
        parser.add_argument("--wait", type=int, default=10, help="seconds of each long poll (1-20)")

    def handle(self, *args: Any, **options: Any) -> None:
        queue = options["queue"] or settings.DELTAWEB_SQS_QUEUE_URL
        if not queue:
            sys.stderr.write("no queue: set DELTAWEB_SQS_QUEUE_URL or pass --queue\n")
            sys.exit(2)
        stopping = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stopping.append(True))
        self.stderr.write(f"listening to {queue}")
        events.listen(queue, max(1, min(20, options["wait"])), should_stop=lambda: bool(stopping))
