"""`delta`: the Delta core's command line and its stable JSON contract for scripts and tests.

Subcommands: snapshot, history, resolve, timeline, reachability, row-history and verify read a
table; enable-ict and restore (without --dry-run) write one commit; keep writes a new table (a
version of this one as its version 0); nothing else writes. Every subcommand prints JSON with
--json and a readable table without it. A failure exits with status 2 and one `error: ...`
line on stderr, never a traceback; `verify` exits 1 when a checksum disagrees with the log.

Installed as the `delta` console script (`tables.delta.cli:script`); `manage.py delta` is a thin
wrapper over the same parser and `execute`. This package imports no Django, Celery or Spark, and
the core modules (which bring pyarrow and numpy) only once a subcommand runs, so `--help` and
usage errors start at interpreter speed. Reads are confined to DELTAWEB_ALLOWED_ROOTS from the
environment when it is set, else to the table's own root: tables.delta.storage.api's default when
no roots provider is installed, which a plain process never does.

The package, lowest first: `base.py` (exit statuses, the `error:` line, the text table),
`parser.py` (the options) beside one module per subcommand or group of them, each its payload
and its text (`snapshot.py`; `history.py`: history, resolve, timeline, enable-ict; `restore.py`;
`reachability.py`; `keep.py`; `row_history.py`; `verify.py`; `audit.py`: audit-export and
audit-verify), then `entry.py` (main, script, execute and the dispatch, importing a subcommand's
module only once it runs). The names importers use are re-exported here.
"""

from __future__ import annotations

from tables.delta.cli.base import (
    AUDIT_KEY_ENV,
    EXIT_BROKEN_PIPE,
    EXIT_DIFFERS,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    VersionSource,
)
from tables.delta.cli.entry import as_text, execute, main, run, script
from tables.delta.cli.parser import DESCRIPTION, add_audit_subcommands, add_subcommands, build_parser

__all__ = [
    "AUDIT_KEY_ENV",
    "DESCRIPTION",
    "EXIT_BROKEN_PIPE",
    "EXIT_DIFFERS",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "VersionSource",
    "add_audit_subcommands",
    "add_subcommands",
    "as_text",
    "build_parser",
    "execute",
    "main",
    "run",
    "script",
]
