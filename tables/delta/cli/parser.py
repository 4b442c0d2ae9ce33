"""The `delta` command's options: the subcommands, their arguments and help (argparse only, so
`--help` and a usage error import nothing else; `manage.py delta` adds the same subcommands)."""

from __future__ import annotations

import argparse
from typing import Any

from tables.delta.cli.base import AUDIT_KEY_ENV

DESCRIPTION = (
    "Read Delta tables: snapshot, history, resolve, timeline, reachability, row-history, verify; "
    "enable-ict and restore write one commit; keep writes a version of a table as a new table."
)


def add_subcommands(parser: argparse.ArgumentParser) -> None:
    """Add the subcommands and their options to `parser` (the script's, or manage.py's)."""
    # plain ArgumentParser subparsers: Django's CommandParser needs arguments of its own, and
    # plain ones exit 2 with a usage line on a bad option under both commands alike
    sub = parser.add_subparsers(dest="subcommand", required=True, parser_class=argparse.ArgumentParser)

    def cmd(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
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
    p.add_argument(
        "--where",
        default=None,
        metavar="PREDICATE",
        help="restore only the partitions this predicate on partition columns selects, e.g. \"region = 'eu'\"",
    )
    p = cmd("reachability", "which versions can still be read or restored, and why not (newest first)")
    p.add_argument("--at", default=None, help="judge retention as of this time (default: now)")
    p.add_argument(
        "--vacuum-retention",
        default=None,
        metavar="INTERVAL",
        help='also forecast which readable versions a VACUUM with this retention ("7 days") would break',
    )
    p = cmd("keep", "write a new table whose single version 0 is a version of this one (survives its VACUUM)")
    p.add_argument("--version", type=int, required=True)
    p.add_argument("--into", required=True, metavar="DIR", help="the new table's location (must not be a table)")
    p.add_argument(
        "--hold",
        action="store_true",
        help="S3 with Object Lock: legal holds on the exact object versions instead of copies",
    )
    p = cmd("row-history", "one row's inserts, updates and deletes over a range of versions, by its key")
    p.add_argument(
        "--key",
        action="append",
        required=True,
        metavar="COLUMN=VALUE",
        help="a key column and its value (repeat for a key of several columns); cast to the column's type",
    )
    p.add_argument("--from", dest="from_version", type=int, default=None, help="first version (default: earliest)")
    p.add_argument("--to", dest="to_version", type=int, default=None, help="last version (default: latest)")
    p = cmd("verify", "each version's checksum file (_delta_log/N.crc) against a replay of the log")
    p.add_argument("--from", dest="from_version", type=int, default=None, help="first version (default: earliest)")
    p.add_argument("--to", dest="to_version", type=int, default=None, help="last version (default: latest)")
    add_audit_subcommands(sub)


def add_audit_subcommands(sub: Any) -> None:
    """`audit-export` and `audit-verify`: the signed audit export (tables.delta.history.audit)."""
    p = sub.add_parser("audit-export", help="a signed audit export of the table's commits and their hash chain")
    p.add_argument("path", help="table root: a directory or file:// URI")
    p.add_argument("--out", required=True, metavar="FILE", help="where to write the export")
    p.add_argument("--from", dest="from_version", type=int, default=None, help="first version (default: earliest)")
    p.add_argument("--to", dest="to_version", type=int, default=None, help="last version (default: latest)")
    p.add_argument(
        "--key", default=None, metavar="KEYFILE", help=f"the Ed25519 private key (PEM); default: ${AUDIT_KEY_ENV}"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p = sub.add_parser("audit-verify", help="check an audit export's signature and chain, and against a table")
    p.add_argument("path", metavar="FILE", help="the export file")
    p.add_argument("--public-key", required=True, metavar="KEYFILE", help="the Ed25519 public key (PEM or base64)")
    p.add_argument("--table", default=None, metavar="PATH", help="also check which versions' bytes still match")
    p.add_argument(
        "--accept-recorded",
        action="store_true",
        help="pass although the export records checksum mismatches or history rewrites (still listed)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")


def build_parser(prog: str = "delta") -> argparse.ArgumentParser:
    """The standalone command's parser."""
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    add_subcommands(parser)
    return parser
