"""The `delta` command's entry point: parse, run the subcommand, print its JSON or text, exit.

Each subcommand's module (its payload and its text) is imported only once it runs, and the core
modules (which bring pyarrow and numpy) only inside those: `--help` and a usage error import the
parser and this module alone."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from tables.delta.cli.base import (
    EXIT_BROKEN_PIPE,
    EXIT_DIFFERS,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    VersionSource,
    fail,
)
from tables.delta.cli.parser import build_parser
from tables.delta.errors import DeltaError


def main(argv: Sequence[str] | None = None) -> int:
    """The `delta` console script: parse `argv` (default sys.argv[1:]), run, return the exit status."""
    # no linear algebra here: OpenBLAS, loaded with numpy (which pyarrow imports), would
    # first start a thread per core (20-30 ms of CPU, a tenth of a checkpointed snapshot)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        opts = vars(build_parser().parse_args(argv))
    except SystemExit as exc:  # --help (0) or a usage error (2, argparse printed the usage)
        return exc.code if isinstance(exc.code, int) else EXIT_FAILED
    return execute(opts)


class _NoPandas:
    """An import finder that says pandas is not installed: pyarrow imports it (0.2-0.3 s) the
    first time an array becomes numpy or a table is made empty, and no command uses it."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def script() -> int:
    """The `delta` console script's own process: `main` without pandas."""
    sys.meta_path.insert(0, _NoPandas())
    return main()


def execute(opts: Mapping[str, Any], version_source: VersionSource | None = None) -> int:
    """Run the parsed subcommand, print its JSON or text, and return the exit status.

    Errors print one `error: ...` line on stderr and return 2; nothing here raises.
    """
    sub = opts["subcommand"]
    if sub == "audit-verify":
        from tables.delta.cli.audit import audit_verify

        return audit_verify(opts)
    try:
        payload = run(sub, opts, version_source)
    except DeltaError as exc:
        return fail(str(exc))
    except (OSError, ValueError) as exc:
        return fail(f"{opts.get('path')}: {exc}")
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug must still not print a traceback at the user
        return fail(f"{opts.get('path')}: unexpected {type(exc).__name__}: {exc}")
    try:
        if opts.get("json"):
            sys.stdout.flush()  # text written before must not land after the bytes
            sys.stdout.buffer.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))
            sys.stdout.buffer.write(b"\n")
        else:
            sys.stdout.write(as_text(sub, payload))
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader went away (`delta history T | head`): no traceback, and none either from
        # the interpreter's own flush of stdout at exit
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):  # a stdout without a file descriptor (captured in-process)
            pass
        return EXIT_BROKEN_PIPE
    if sub == "verify" and not payload["ok"]:
        return EXIT_DIFFERS
    return EXIT_OK


def run(sub: str, opts: Mapping[str, Any], version_source: VersionSource | None = None) -> Any:
    """The payload of subcommand `sub` with parsed options `opts` (raises on failure)."""
    path = opts["path"]
    if sub == "snapshot":
        from tables.delta.cli.snapshot import snapshot_payload

        return snapshot_payload(path, opts, version_source)
    if sub == "history":
        from tables.delta.cli.history import history_payload

        return history_payload(path, opts)
    if sub == "resolve":
        from tables.delta.cli.history import resolve_payload

        return resolve_payload(path, opts)
    if sub == "timeline":
        from tables.delta.cli.history import timeline_payload

        return timeline_payload(path, opts)
    if sub == "enable-ict":
        from tables.delta.cli.history import enable_ict_payload

        return enable_ict_payload(path, opts)
    if sub == "restore":
        from tables.delta.cli.restore import restore_payload

        return restore_payload(path, opts)
    if sub == "reachability":
        from tables.delta.cli.reachability import reachability_payload

        return reachability_payload(path, opts)
    if sub == "keep":
        from tables.delta.cli.restore import keep_payload

        return keep_payload(path, opts)
    if sub == "row-history":
        from tables.delta.cli.row_history import row_history_payload

        return row_history_payload(path, opts)
    if sub == "verify":
        from tables.delta.cli.verify import verify_payload

        return verify_payload(path, opts)
    if sub == "audit-export":
        from tables.delta.cli.audit import audit_export_payload

        return audit_export_payload(path, opts)
        return audit_export_payload(path, opts)


def as_text(sub: str, p: Any) -> str:
    """The readable rendering of subcommand `sub`'s payload `p`."""
    if sub == "snapshot":
        from tables.delta.cli.snapshot import snapshot_text

        return snapshot_text(p)
    if sub == "history":
        from tables.delta.cli.history import history_text

        return history_text(p)
    if sub == "resolve":
        from tables.delta.cli.history import resolve_text

        return resolve_text(p)
    if sub == "timeline":
        from tables.delta.cli.history import timeline_text

        return timeline_text(p)
    if sub == "restore":
        from tables.delta.cli.restore import restore_text

        return restore_text(p)
    if sub == "reachability":
        from tables.delta.cli.reachability import reachability_text

        return reachability_text(p)
    if sub == "row-history":
        from tables.delta.cli.row_history import row_history_text

        return row_history_text(p)
    if sub == "keep":
        from tables.delta.cli.restore import keep_text

        return keep_text(p)
    if sub == "verify":
        from tables.delta.cli.verify import verify_text

        return verify_text(p)
    if sub == "audit-export":
        from tables.delta.cli.audit import audit_export_text

        return audit_export_text(p)
    return orjson.dumps(p, option=orjson.OPT_INDENT_2).decode() + "\n"
