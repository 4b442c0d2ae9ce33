"""Publishing a commit-owner's ratified commits: backfill (each staged commit written as
`_delta_log/<v>.json` put-if-absent, then marked), a client's report that it published them,
checkpoints every DELTAWEB_OWNER_CHECKPOINT_INTERVAL versions, the cleanup of staged files, and
the end of a hand-back. The steps of DatabaseOwner (tables.services.owner.db) that write the
table's log; see that module's doc for the protocol."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from tables.delta.errors import CommitConflictError, CommitOwnerError, ManagedTableError
from tables.delta.log.checkpoint import write_checkpoint
from tables.delta.log.listing import LOG_DIR, commit_name, tail_listing
from tables.delta.managed.owner import (
    Commit,
    TableConf,
    parse_commit,
)
from tables.delta.snapshot.state import load_snapshot
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import open_storage
from tables.delta.write.catalog import check_maintenance
from tables.models import ManagedTable, OwnerState, RatifiedCommit


class Publishing:
    """DatabaseOwner's publishing steps (a mixin: it names the owner, finds its rows and calls
    the fault points)."""

    name: str
    fault: Callable[[str], None]

    def mark_published(self, tc: TableConf, version: int, *, known: ManagedTable | None = None) -> int:
        """A client published every ratified commit up to `version` (set-latest-backfilled-version):
        each `_delta_log/<u>.json` is checked to exist before the owner forgets the staged copy.
        Idempotent; a version above the latest ratified one is refused (ValueError). `known`: the
        caller's fresh row of an active table (one query less)."""
        mt = known if known is not None and known.state == OwnerState.ACTIVE else self.managed(tc)
        if mt is None:
            raise ManagedTableError(f"commit-owner '{self.name}' does not own {tc.location}", owner=self.name)
        if version > mt.latest_version:
            raise ValueError(f"version {version} is after the latest ratified version {mt.latest_version}")
        storage = open_storage(mt.table.location)
        for u in range(mt.backfilled_version + 1, version + 1):
            if not storage.exists(commit_name(u)):
                raise ValueError(f"{commit_name(u)} is not published; publish versions in order before reporting them")
        with transaction.atomic():
            RatifiedCommit.objects.filter(
                table_id=mt.table_id, version__gt=mt.backfilled_version, version__lte=version, backfilled=False
            ).update(backfilled=True)
            ManagedTable.objects.filter(pk=mt.pk, backfilled_version__lt=version).update(backfilled_version=version)
        self._checkpoint_if_due(storage, mt.backfilled_version, version)
        return max(version, mt.backfilled_version)

    def _checkpoint_if_due(self, storage: Storage, before: int, after: int) -> str | None:
        """Publishing crossed a multiple of DELTAWEB_OWNER_CHECKPOINT_INTERVAL (default 100):
        checkpoint that version, so a writer or reader replays at most that many commits after
        it instead of the whole log. Only published versions are checkpointed (the
        maintenance rule of catalogManaged); an existing checkpoint is kept."""
        every = int(getattr(settings, "DELTAWEB_OWNER_CHECKPOINT_INTERVAL", 100))
        if every <= 0 or after <= 0:
            return None
        target = after - after % every
        if target <= before or target <= 0:
            return None
        check_maintenance("CHECKPOINT", target, after)
        name = f"{LOG_DIR}/{target:020d}.checkpoint.parquet"
        if storage.exists(name):
            return None
        # from the previous checkpoint on, not the whole log: O(interval) per checkpoint
        listing = tail_listing(storage)
        if any(v > target for v in listing.checkpoints):
            return None  # a later checkpoint exists already
        return write_checkpoint(storage, load_snapshot(storage, target, listing=listing))

    def cleanup_staged(self, tc: TableConf, retention_seconds: float | None = None) -> int:
        """Delete staged files of published versions (ratified or losers) older than the
        retention (DELTAWEB_OWNER_STAGED_RETENTION_SECONDS, default a day): readers that
        listed before publishing may still open the ratified copy for a while. Returns how
        many were deleted."""
        mt = self.managed(tc)
        if mt is None or mt.state == OwnerState.PROPOSED:
            return 0
        keep = float(
            retention_seconds
            if retention_seconds is not None
            else getattr(settings, "DELTAWEB_OWNER_STAGED_RETENTION_SECONDS", 86400)
        )
        storage = open_storage(mt.table.location)
        cutoff = timezone.now().timestamp() * 1000 - keep * 1000
        deleted = 0
        for directory in (tc.staged_dir,):
            if not storage.is_dir(directory):
                continue
            for info in list(storage.list_from(directory)):
                name = info.path.rpartition("/")[2]
                version = int(name[:20]) if name[:20].isdigit() else None
                if version is None or version > mt.backfilled_version or info.modification_time > cutoff:
                    continue
                storage.delete(info.path if "/" in info.path else f"{directory}/{name}")
                deleted += 1
        return deleted

    def backfill_to_version(self, tc: TableConf, version: int) -> int | None:
        mt = self.managed(tc)
        if mt is None or mt.state == OwnerState.PROPOSED:
            return None
        self._backfill(open_storage(mt.table.location), mt, version)
        return ManagedTable.objects.filter(pk=mt.pk).values_list("backfilled_version", flat=True).first()

    # --- backfill and hand-back ----------------------------------------------------------------

    def _put_same(self, storage: Storage, rel: str, data: bytes) -> None:
        """put-if-absent; an identical file there already is success (a re-run after a crash)."""
        try:
            storage.put_if_absent(rel, data)
        except CommitConflictError:
            if storage.read(rel) != data:
                raise CommitOwnerError(
                    f"{storage.display(rel)} exists with other content than the ratified commit; the log was "
                    f"written around commit-owner '{self.name}'",
                    file=rel,
                ) from None

    def _backfill(self, storage: Storage, mt: ManagedTable, upto: int) -> None:
        mt.refresh_from_db(fields=["latest_version", "backfilled_version"])
        before = mt.backfilled_version
        self._publish(storage, mt, upto)
        mt.refresh_from_db(fields=["backfilled_version"])
        self._checkpoint_if_due(storage, before, mt.backfilled_version)

    def _publish(self, storage: Storage, mt: ManagedTable, upto: int) -> None:
        for u in range(mt.backfilled_version + 1, min(upto, mt.latest_version) + 1):
            row = RatifiedCommit.objects.filter(table_id=mt.table_id, version=u).first()
            if row is None:  # never skip a version
                raise CommitOwnerError(f"{storage.display()}: the owner has no ratified commit {u} to backfill")
            self._put_same(storage, commit_name(u), storage.read(row.path))
            self.fault("backfill:written")
            with transaction.atomic():
                RatifiedCommit.objects.filter(pk=row.pk).update(backfilled=True)
                ManagedTable.objects.filter(pk=mt.pk, backfilled_version__lt=u).update(backfilled_version=u)
            self.fault("backfill:marked")

    def _finish_release(self, storage: Storage, mt: ManagedTable) -> Commit:
        version, staged = mt.releasing_version, mt.releasing_path
        assert version is not None
        self._backfill(storage, mt, version - 1)
        data = storage.read(staged)
        self._put_same(storage, commit_name(version), data)
        self.fault("handback:written")
        info = storage.stat(commit_name(version))
        ict = parse_commit(data).in_commit_timestamp
        with transaction.atomic():
            RatifiedCommit.objects.filter(table_id=mt.table_id, version=version).update(backfilled=True)
            ManagedTable.objects.filter(pk=mt.pk, state=OwnerState.RELEASING).update(
                state=OwnerState.RELEASED,
                latest_version=version,
                backfilled_version=version,
                released_version=version,
                releasing_version=None,
                releasing_path="",
                latest_ict=ict,
                frozen=False,
            )
        return Commit(version, commit_name(version), info.size, info.modification_time, ict)
