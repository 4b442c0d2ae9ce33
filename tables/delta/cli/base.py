"""What every subcommand of `delta` shares: the exit statuses, the one `error: ...` line, the
warning about a commit still being written, and the text table."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import orjson

# exit statuses: 2 is the contract's failure; the others follow shell conventions
EXIT_OK = 0
EXIT_BROKEN_PIPE = 1
EXIT_DIFFERS = 1  # verify, audit-verify: a checksum, signature, chain or version that does not hold
EXIT_FAILED = 2
EXIT_INTERRUPTED = 130
AUDIT_KEY_ENV = "DELTAWEB_AUDIT_KEY"  # the signing key itself (PEM or base64), as the server reads it
# (the signing key's variable is here, not in audit.py: the parser's help names it)

# Where a version asked for by number is read: (path, version) -> None to read the path as
# given, or (location, version there (None: its latest), note for stderr). The core reads only
# the path it is given; `manage.py delta` passes one that follows the registered table's pins.
VersionSource = Callable[[str, int], tuple[str, int | None, str] | None]


def fail(message: str) -> int:
    sys.stderr.write(f"error: {message.splitlines()[0] if message else 'failed'}\n")
    return EXIT_FAILED


def warn_incomplete(listing: Any) -> None:
    """One `warning: ...` line on stderr when the log's newest commit is still being written
    (tables.delta.log.tip): the command answered up to the commit before it, and exits 0."""
    incomplete = getattr(listing, "incomplete", None)
    if incomplete is not None:
        sys.stderr.write(f"warning: {incomplete.message('run the command again once it is complete')}\n")


def text_table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[("" if c is None else str(c)).replace("\n", " ")[:80] for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(out) + "\n"


def compact(value: Any) -> str:
    return "" if value is None else orjson.dumps(value).decode() if isinstance(value, (dict, list)) else str(value)
