"""Whether a checkpoint is the state it stands for.

Readers (this core, Spark, delta-rs) start from the newest checkpoint at or below a version and
never read the commits before it again. A checkpoint replaced by another table's, or one that
lists files never added, makes every version after it list files that do not exist (or miss
files that do) while the log looks whole. Two checks, at two costs:

- every snapshot load, for free: the `_last_checkpoint` its writer left says how many adds the
  newest checkpoint holds (`numOfAddFiles`), and the load counts them anyway
  (`check_hint`, `hint_detail`);
- where readability is reported (reachability), thorough: when the commits up to a checkpoint
  are still in the log, their replay must give the checkpoint's protocol, table id and files
  (`replay_disagreement`: the newest checkpoints path by path, older ones beyond a budget by
  the add count their Parquet footers give, `footer_disagreement`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tables.delta.errors import CheckpointMismatchError, CorruptLogError
from tables.delta.log.checkpoint import CheckpointReader, ParquetPart
from tables.delta.log.listing import LogFile, LogListing, complete_checkpoint, read_last_checkpoint
from tables.delta.snapshot.replay import identity_keys
from tables.delta.storage.api import Storage
from tables.delta.text_bounds import cut

_SHOWN = 200  # characters of a table id quoted in a detail (log strings are untrusted)


def newest_checkpoint(listing: LogListing) -> int | None:
    """The version of the newest complete checkpoint listed: the one `_last_checkpoint` can
    describe (a hint naming an older one is stale, not a disagreement)."""
    return max((v for v, files in listing.checkpoints.items() if complete_checkpoint(files)), default=None)


def hint_detail(hint: dict[str, Any] | None, version: int, adds: int) -> str | None:
    """What the `_last_checkpoint` hint says against checkpoint `version` holding `adds` adds,
    or None (no hint of that version, or one without a count: the count is optional)."""
    if not hint or hint.get("version") != version:
        return None
    claimed = hint.get("numOfAddFiles")
    if type(claimed) is not int or claimed == adds:
        return None
    return (
        f"the checkpoint at version {version} is not the one its writer left: "
        f"_last_checkpoint says it holds {claimed} files, it holds {adds}"
    )


def check_hint(storage: Storage, listing: LogListing, files: list[LogFile], rows: pa.Table) -> None:
    """Raise CheckpointMismatchError when the checkpoint `files` (its add and remove `rows`
    read already) is the newest and disagrees with `_last_checkpoint`. The hint is read again
    only when the listing did not carry it, and only for the newest checkpoint."""
    version = files[0].version
    if version != newest_checkpoint(listing):
        return
    hint = listing.hint if listing.hint_read else read_last_checkpoint(storage)
    adds = int(pc.sum(rows.column("is_add")).as_py() or 0) if rows.num_rows else 0
    problem = hint_detail(hint, version, adds)
    if problem is not None:
        raise CheckpointMismatchError(
            f"{storage.display(files[0].path)}: {problem}", file=files[0].path, version=version
        )


@dataclass(slots=True)
class Replayed:
    """What the log before a checkpoint gives at its version: the identities of the active
    files (None: not compared, only counted), their count, the protocol and metaData."""

    version: int
    keys: set[str] | None
    count: int
    protocol: dict[str, Any] | None
    metadata: dict[str, Any] | None
    source: str  # where the replay started, for the detail: "version 0", "the checkpoint at 7"


def _protocol_key(p: dict[str, Any]) -> tuple:
    # features in any order, and absent lists the same as empty ones (writers differ)
    return (
        int(p.get("minReaderVersion") or 1),
        int(p.get("minWriterVersion") or 2),
        frozenset(p.get("readerFeatures") or ()),
        frozenset(p.get("writerFeatures") or ()),
    )


def _config_problems(others: list[tuple[str, dict[str, Any]]], want: Replayed) -> list[str]:
    problems = []
    protocol = next((b for n, b in reversed(others) if n == "protocol"), None)
    metadata = next((b for n, b in reversed(others) if n == "metaData"), None)
    if want.protocol is not None and protocol is not None and _protocol_key(protocol) != _protocol_key(want.protocol):
        problems.append("its protocol is not the log's")
    if want.metadata is not None and metadata is not None and metadata.get("id") != want.metadata.get("id"):
        theirs, ours = cut(str(metadata.get("id")), _SHOWN), cut(str(want.metadata.get("id")), _SHOWN)
        problems.append(f"its table id '{theirs}' is not the log's '{ours}'")
    return problems


def _file_problems(keys: list[str], want: Replayed) -> list[str]:
    """The checkpoint's active identities `keys` against the replay's (sets: hashing strings
    in Python cost no more than Arrow's kernels here, and equal sets are told at once)."""
    if want.keys is None:
        return [] if len(keys) == want.count else [f"it lists {len(keys)} files, the log {want.count}"]
    theirs = set(keys)
    problems = []
    if theirs != want.keys:
        extra, lacking = len(theirs - want.keys), len(want.keys - theirs)
        problems.append(
            f"it lists {len(theirs)} files, the log {len(want.keys)} ({extra} not active in the log, {lacking} left out)"
        )
    if len(theirs) != len(keys):
        problems.append(f"it lists {len(keys) - len(theirs)} files twice")
    return problems


def replay_disagreement(storage: Storage, files: list[LogFile], want: Replayed) -> tuple[str | None, int | None]:
    """(what checkpoint `files` says against the replay `want`, or None; its add count). One
    read of the checkpoint's non-file actions and of its files' paths and deletion vectors."""
    reader = CheckpointReader(storage, files)
    try:
        others = reader.others()
        rows = reader.file_actions(others, [])
    except CorruptLogError as exc:
        reader.settle()
        return _detail(want, [f"it cannot be read ({exc})"]), None
    adds = rows.filter(rows.column("is_add")) if rows.num_rows else rows
    keys = identity_keys(adds).to_pylist() if adds.num_rows else []
    return _detail(want, _config_problems(others, want) + _file_problems(keys, want)), adds.num_rows


def footer_adds(storage: Storage, files: list[LogFile]) -> int | None:
    """The adds of a classic or multi-part Parquet checkpoint as its footers count them, or None
    when they do not say (no statistics; a v2 checkpoint's adds live in its sidecars)."""
    if any(f.fmt != "parquet" or f.v2 for f in files):
        return None
    total = 0
    try:
        for f in files:
            counts = ParquetPart(storage, f.path).counts("add")
            if None in counts:
                return None
            total += sum(c or 0 for c in counts)
    except CorruptLogError:
        return None  # reported by whoever reads it in full
    return total


def footer_disagreement(storage: Storage, files: list[LogFile], want: Replayed) -> tuple[str | None, int | None]:
    """(`replay_disagreement` by the count alone, or None; the count): no data read."""
    adds = footer_adds(storage, files)
    if adds is None or adds == want.count:
        return None, adds
    return _detail(want, [f"it lists {adds} files, the log {want.count}"]), adds


def _detail(want: Replayed, problems: list[str]) -> str | None:
    if not problems:
        return None
    return f"the checkpoint at version {want.version} disagrees with the log replayed from {want.source}: " + "; ".join(
        problems
    )
