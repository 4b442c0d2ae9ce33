"""How a commit is made: the `Committer` protocol, which a writer that commits whole actions (a
RESTORE) is handed instead of asking what kind of table it writes.

The three ways a Delta commit is made, each behind the same two calls (the log as the
committer's writers see it, and a commit of the next version):
- a filesystem table: put-if-absent of `_delta_log/<v>.json` (`commit.commit`);
  `FILESYSTEM`. A managed table refuses it (`commit.refuse_managed`).
- a managedCommit or coordinatedCommits table: its commit-owner ratifies the commit
  (`managed.commit_via_owner`), the log read with the owner's ratified, not yet backfilled
  commits merged in; `OwnerCommitter(owner)`.
- a catalogManaged table: its catalog ratifies the staged commit and publishes it; the
  catalog is handed in as the table's `CommitOwner` (its flavor is the table's, read from
  the log), so `OwnerCommitter(catalog)` serves it too (`catalog.py` holds what a client of
  a catalog writes itself: version 0, staged commits, publishing).
`committer_for(owner)` is the one place that picks a way from an optional owner."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tables.delta.log.listing import LogListing, list_log
from tables.delta.managed.owner import CommitOwner
from tables.delta.snapshot.state import ratified_listing
from tables.delta.storage.api import Storage
from tables.delta.write.commit import CommitResult, commit, now_ms
from tables.delta.write.managed import commit_via_owner


class Committer(Protocol):
    """One way of committing to a table (see the module)."""

    # whether commits go through an owner or a catalog: a managed table's writers need one
    managed: bool

    def listing(self, storage: Storage) -> LogListing:
        """The table's log as a writer committing this way reads it."""
        ...

    def commit(
        self,
        storage: Storage,
        actions: list[dict[str, Any]],
        operation: str,
        operation_parameters: dict[str, Any] | None = None,
        *,
        read_version: int | None = None,
        is_blind_append: bool = False,
        operation_metrics: dict[str, str] | None = None,
        txn_id: str | None = None,
        clock: Callable[[], int] = now_ms,
        user_name: str | None = None,
    ) -> CommitResult:
        """`actions` committed as the next version (`commit.commit`'s contract): a
        CommitConflictError when another writer took it or the table is past `read_version`."""
        ...


@dataclass(frozen=True)
class FilesystemCommitter:
    """A filesystem table's commits: put-if-absent of the next `_delta_log/<v>.json`."""

    managed: bool = False

    def listing(self, storage: Storage) -> LogListing:
        return list_log(storage)

    def commit(self, storage: Storage, actions: list[dict[str, Any]], operation: str, *args: Any, **kw: Any):
        return commit(storage, actions, operation, *args, **kw)


@dataclass(frozen=True)
class OwnerCommitter:
    """A managed table's commits, ratified by its commit-owner or its catalog (`owner`)."""

    owner: CommitOwner
    managed: bool = True

    def listing(self, storage: Storage) -> LogListing:
        return ratified_listing(storage, self.owner)

    def commit(self, storage: Storage, actions: list[dict[str, Any]], operation: str, *args: Any, **kw: Any):
        return commit_via_owner(storage, self.owner, actions, operation, *args, **kw)


FILESYSTEM = FilesystemCommitter()


def committer_for(owner: CommitOwner | None) -> Committer:
    """The way to commit to a table whose commit-owner (or catalog) is `owner`, None for none."""
    return FILESYSTEM if owner is None else OwnerCommitter(owner)
