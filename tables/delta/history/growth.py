"""Growth per version: the number of active files and their bytes after each commit.

Replays forward from a snapshot, carrying the active files (identity -> size) commit by
commit; commits are parsed in batches, from their bytes when the caller read them already (a
sync reads each commit once, for its commitInfo and for growth). Plain Python over pyarrow
(no Django, no Spark).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow.compute as pc

from tables.delta.history.timestamps import CommitTimes
from tables.delta.log.actions import Source, read_json_actions
from tables.delta.snapshot.replay import identity_keys
from tables.delta.snapshot.state import Snapshot, load_snapshot, read_commit_bytes
from tables.delta.storage.api import Storage

# A replay from the earliest version gives complete growth charts unless the log before the
# newest checkpoint is longer than this; then it starts at the checkpoint.
GROWTH_REPLAY_LIMIT = 5000
BATCH = 500

Progress = Callable[..., None]  # progress(stage, done=0, total=None)


class FileState:
    """Active files (identity -> size) carried forward commit by commit to count growth."""

    def __init__(self, snap: Snapshot) -> None:
        keys = identity_keys(snap.files).to_pylist() if snap.num_files else []
        self.sizes = dict(zip(keys, snap.files.column("size").to_pylist(), strict=True)) if keys else {}
        self.total = sum(s or 0 for s in self.sizes.values())

    def apply(self, storage: Storage, lfs: list) -> dict[int, tuple[int, int]]:
        """(files, bytes) after each of the commits `lfs` (ascending), read and parsed in one go."""
        sources = [(storage.display(lf.path), lf.version, read_commit_bytes(storage, lf.path, lf.size)) for lf in lfs]
        return self.apply_sources(sources)

    def apply_sources(self, sources: list[Source]) -> dict[int, tuple[int, int]]:
        """(files, bytes) after each commit of `sources` ((name, version, content), ascending),
        parsed in one go. Partition values play no part in a file's identity, so they are not
        even parsed."""
        f = read_json_actions(sources, []).files
        f = f.take(pc.sort_indices(f, sort_keys=[("version", "ascending"), ("seq", "ascending")])) if f.num_rows else f
        out: dict[int, tuple[int, int]] = {}
        rows = zip(
            f.column("version").to_pylist(),
            identity_keys(f).to_pylist() if f.num_rows else [],
            f.column("is_add").to_pylist(),
            f.column("size").to_pylist(),
            strict=True,
        )
        sizes, total = self.sizes, self.total
        pending = iter(version for _name, version, _data in sources)
        current = next(pending, None)
        for version, key, is_add, size in rows:
            while current is not None and current < version:
                out[current] = (len(sizes), total)
                current = next(pending, None)
            old = sizes.pop(key, None)
            if old is not None:
                total -= old
            if is_add:
                sizes[key] = size or 0
                total += size or 0
        while current is not None:
            out[current] = (len(sizes), total)
            current = next(pending, None)
        self.total = total
        return out


def growth_base(times: CommitTimes, start_after: int, replay_limit: int = GROWTH_REPLAY_LIMIT) -> int:
    """The version to replay from: the last one known, else the earliest (or the newest
    checkpoint when the log before it is longer than `replay_limit`)."""
    if start_after >= times.earliest:
        return start_after
    cps = sorted(v for v in times.listing.checkpoints if v <= times.latest)
    newest_cp = cps[-1] if cps else None
    if newest_cp is not None and newest_cp - times.earliest > replay_limit:
        return newest_cp
    return times.earliest


def growth_start(
    storage: Storage, times: CommitTimes, start_after: int, replay_limit: int = GROWTH_REPLAY_LIMIT
) -> tuple[int, FileState, tuple[int, int]]:
    """(base version, the active files at it, its (files, bytes)): where a replay for growth
    after `start_after` begins (see growth_base)."""
    base = growth_base(times, start_after, replay_limit)
    snap = load_snapshot(storage, base, listing=times.listing)
    return base, FileState(snap), (snap.num_files, snap.size_bytes)


def growth(
    storage: Storage,
    times: CommitTimes,
    start_after: int,
    versions: list[int],
    progress: Progress | None = None,
    replay_limit: int = GROWTH_REPLAY_LIMIT,
) -> dict[int, tuple[int, int]]:
    """Files and bytes after each of `versions` (and the base), replaying forward from a snapshot."""
    report = progress or (lambda *args, **kwargs: None)
    report(f"loading the snapshot at version {growth_base(times, start_after, replay_limit)}")
    base, state, at_base = growth_start(storage, times, start_after, replay_limit)
    out = {base: at_base}
    commits = {c.version: c for c in times.listing.commits}
    todo = [commits[v] for v in versions if v > base]
    for i in range(0, len(todo), BATCH):
        out.update(state.apply(storage, todo[i : i + BATCH]))
        report("replaying commits for growth", min(i + BATCH, len(todo)), len(todo))
    return out
