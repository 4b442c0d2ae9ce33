"""`manage.py delta SUBCOMMAND`: the core's stable JSON contract for scripts and tests.

Every subcommand prints JSON with --json and a readable table without it. Errors exit with
status 2 and one line on stderr, never a traceback; only `enable-ict` and `restore` (without
--dry-run) write to a table.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson
from django.core.management.base import BaseCommand, CommandParser

from tables.delta import report
from tables.delta.errors import DeltaError
from tables.delta.storage import set_roots_provider


class Command(BaseCommand):
    requires_system_checks: list[str] = []  # a reader of logs needs no URL or model checks
    help = "Read Delta tables: snapshot, history, resolve, timeline; enable-ict and restore write one commit."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", required=True, parser_class=argparse.ArgumentParser)

        def cmd(name: str, help_text: str) -> argparse.ArgumentParser:
            p = sub.add_parser(name, help=help_text)
            p.add_argument("path", help="table root: a directory or file:// URI")
            p.add_argument("--json", action="store_true", help="machine-readable output")
            return p

        p = cmd("snapshot", "the table's state at a version")
        p.add_argument("--version", type=int, default=None)
        p.add_argument("--no-files", action="store_true", help="leave the file list out")
        p = cmd("history", "commits newest first, as DESCRIBE HISTORY")
        p.add_argument("--limit", type=int, default=None)
        p.add_argument("--offset", type=int, default=0)
        p = cmd("resolve", "TIMESTAMP AS OF: the version a timestamp selects")
        p.add_argument("--timestamp", required=True)
        p.add_argument("--allow-latest", action="store_true")
        p.add_argument("--allow-earliest", action="store_true")
        cmd("timeline", "every version's commit timestamps, the ICT boundary and anomalies")
        cmd("enable-ict", "turn In-Commit Timestamps on (writes one commit)")
        p = cmd("restore", "RESTORE TO VERSION / TIMESTAMP AS OF (writes one commit unless --dry-run)")
        target = p.add_mutually_exclusive_group(required=True)
        target.add_argument("--version", type=int, default=None)
        target.add_argument("--timestamp", default=None, help="ISO-8601, yyyy-MM-dd[ HH:mm:ss[.SSS]] or epoch ms")
        p.add_argument("--ignore-missing-files", action="store_true", help="restore without files that are gone")
        p.add_argument("--allow-protocol-downgrade", action="store_true", help="write the target's lower protocol")
        p.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")

    def execute(self, *args: Any, **options: Any) -> None:
        # argparse errors already exit with 2 and one usage line; keep that behaviour
        super().execute(*args, **options)

    def handle(self, *args: Any, **options: Any) -> None:
        sub = options["subcommand"]
        # an operator's tool on a table they name: confined to DELTAWEB_ALLOWED_ROOTS from the
        # environment when set, else to the table's own root, not to the web app's setting
        set_roots_provider(None)
        try:
            payload = report.run(sub, options)
        except DeltaError as exc:
            self._fail(str(exc))
        except (OSError, ValueError) as exc:
            self._fail(f"{options.get('path')}: {exc}")
        except Exception as exc:  # a bug must still not print a traceback at the user
            self._fail(f"{options.get('path')}: unexpected {type(exc).__name__}: {exc}")
        if options.get("json"):
            sys.stdout.buffer.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))
            sys.stdout.write("\n")
        else:
            sys.stdout.write(report.as_text(sub, payload))
        sys.stdout.flush()

    def _fail(self, message: str) -> None:
        sys.stderr.write(f"error: {message.splitlines()[0] if message else 'failed'}\n")
        sys.exit(2)
