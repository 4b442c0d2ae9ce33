"""deltaweb as a commit-owner: the database-backed owner (SPEC section 5, issue 7).

It follows tables.delta.fs_owner.FileSystemOwner step for step, with the owner state in the
database (ManagedTable, RatifiedCommit, OwnerRefusal) instead of a JSON file:
- commit v, in one database transaction that first takes the table's row for writing (an
  UPDATE, so SQLite takes its write lock and PostgreSQL the row lock before anything is
  read): v-1 is the latest ratified version, v is neither ratified nor in `_delta_log/`; the
  writer requirements (owner.check_commit) and deltaweb's policy (no commit while frozen; a
  RESTORE only with the txnId of an approved restore request) hold; the staged file
  `_delta_log/_commits/<v>.<uuid>.json` is written put-if-absent and the RatifiedCommit row
  inserted. The unique (table, version) constraint makes two winners impossible even if the
  lock were not there: the loser's IntegrityError is a CommitConflict naming the winner. A
  crash before the transaction commits leaves an orphan staged file that readers never see.
  A refusal is a CommitRefused and an OwnerRefusal row.
- backfill to v: for each ratified u <= v in order, put-if-absent `_delta_log/<u>.json` with
  the staged content (an identical file there already is success: a crash after the put),
  then mark the row and the table (a conditional UPDATE from u-1 to u). Any step may crash;
  running again completes it; two backfills at once are harmless.
- take-over: `register_table` records a proposal (fresh tableId, version K); the client's
  put-if-absent of `_delta_log/<K>.json` is the commit point; the owner activates when it
  sees that file install it (on its next call of any kind) and forgets the proposal when
  `<K>.json` is someone else's.
- hand-back: a commit that removes the owner is ratified as "releasing" first (no commit is
  accepted after it), then everything is backfilled and that commit is written directly as
  `_delta_log/<v>.json`; any later call completes an interrupted hand-back.

`fault(step)` is called after each durable step (tests raise there to simulate a crash).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Max
from django.utils import timezone

from tables.delta.errors import CommitConflictError, CommitOwnerError, ManagedTableError
from tables.delta.log.checkpoint import write_checkpoint
from tables.delta.log.listing import LOG_DIR, STAGED_COMMITS_DIR, commit_name, staged_commit_name, tail_listing
from tables.delta.managed.owner import (
    Commit,
    CommitConflict,
    CommitOutcome,
    CommitRefused,
    CommitResponse,
    GetCommitsResponse,
    ParsedCommit,
    TableConf,
    check_commit,
    hands_back,
    installs_owner,
    parse_commit,
)
from tables.delta.snapshot.state import load_snapshot
from tables.delta.storage.api import FileInfo, Storage
from tables.delta.storage.opening import as_storage, open_storage
from tables.delta.write.catalog import check_maintenance, staged_name_ok
from tables.models import ManagedTable, OwnerRefusal, OwnerState, RatifiedCommit, RestoreRequest, RestoreStatus, Table
from tables.services import faults


def _restore_txn(txn: str) -> uuid.UUID | None:
    """The RestoreRequest.txn_id a RESTORE commit's txnId names, or None if it is no UUID."""
    try:
        return uuid.UUID(txn)
    except ValueError:
        return None


def owner_name() -> str:
    return getattr(settings, "DELTAWEB_OWNER_NAME", "deltaweb")


def table_conf(managed: ManagedTable) -> TableConf:
    """The TableConf a client would build from the table's metadata."""
    return TableConf(managed.table.location, owner_name(), {"tableId": managed.owner_table_id}, managed.feature)


class DatabaseOwner:
    """The commit-owner whose state is in deltaweb's database (see the module doc)."""

    def __init__(
        self,
        name: str | None = None,
        *,
        on_ratified: Callable[[ManagedTable, int], None] | None = None,
        fault: Callable[[str], None] | None = None,
    ) -> None:
        self.name = name or owner_name()
        self.on_ratified = on_ratified  # called inside the transaction (e.g. on_commit(backfill task))
        self.fault = fault or faults.reached  # the fault suite's named points, e.g. "backfill:written"

    def __repr__(self) -> str:
        return f"DatabaseOwner(name={self.name!r})"

    # --- state ---------------------------------------------------------------------------------

    def _find(self, tc: TableConf) -> ManagedTable | None:
        qs = ManagedTable.objects.select_related("table")
        if tc.table_id:
            return qs.filter(owner_table_id=tc.table_id).order_by().first()
        root = as_storage(tc.location).display()
        return qs.filter(table__location=root).first()

    def managed(self, tc: TableConf) -> ManagedTable | None:
        """The table's owner state, after finishing what a crash or a lost call left."""
        mt = self._find(tc)
        if mt is not None and mt.state in (OwnerState.PROPOSED, OwnerState.RELEASING):
            self._resolve(mt)  # only these states have anything to finish
            mt = self._find(tc)
        return mt

    def _resolve(self, mt: ManagedTable) -> None:
        storage = open_storage(mt.table.location)
        if mt.state == OwnerState.PROPOSED and mt.proposed_version is not None:
            try:
                data = storage.read(commit_name(mt.proposed_version))
            except FileNotFoundError:
                return  # the ownership commit is not written (yet)
            if installs_owner(data, table_conf(mt), self.name, mt.owner_table_id):
                ict = parse_commit(data).in_commit_timestamp
                ManagedTable.objects.filter(pk=mt.pk, state=OwnerState.PROPOSED).update(
                    state=OwnerState.ACTIVE,
                    latest_version=mt.proposed_version,
                    backfilled_version=mt.proposed_version,
                    latest_ict=ict,
                    releasing_version=None,
                    releasing_path="",
                    updated_at=timezone.now(),
                )
            elif mt.released_version is None:
                ManagedTable.objects.filter(pk=mt.pk, state=OwnerState.PROPOSED).delete()  # somebody else won
            else:
                ManagedTable.objects.filter(pk=mt.pk, state=OwnerState.PROPOSED).update(
                    state=OwnerState.RELEASED, proposed_version=None
                )
        elif mt.state == OwnerState.RELEASING:
            self._finish_release(storage, mt)

    # --- the interface -------------------------------------------------------------------------

    def register_table(self, tc: TableConf, current_version: int) -> dict[str, str]:
        root = as_storage(tc.location).display()
        table = Table.objects.filter(location=root).first()
        if table is None:
            raise ManagedTableError(f"{root}: register the table in deltaweb before it can own it", owner=self.name)
        new_id = str(uuid.uuid4())
        with transaction.atomic():
            mt = ManagedTable.objects.select_for_update().filter(table=table).first()
            if mt is not None and mt.state in (OwnerState.ACTIVE, OwnerState.RELEASING):
                raise ManagedTableError(f"{root}: commit-owner '{self.name}' owns this table already", owner=self.name)
            if mt is None:
                mt = ManagedTable(table=table)
            mt.owner_table_id, mt.feature = new_id, tc.feature
            mt.state, mt.proposed_version = OwnerState.PROPOSED, current_version + 1
            mt.save()
        self.fault("register:recorded")
        return {**tc.conf, "tableId": new_id}

    def commit(self, tc: TableConf, version: int, actions: bytes, *, committed_by: str = "") -> CommitOutcome:
        mt = self.managed(tc)
        if mt is None:
            return CommitRefused(version, f"commit-owner '{self.name}' does not own {tc.location}", "not_owned")
        if mt.state == OwnerState.ACTIVE and version <= mt.latest_version:
            return CommitConflict(version, mt.latest_version)  # lost for certain: answered before any lock
        try:
            parsed = parse_commit(actions)
        except ValueError as exc:
            return self._refuse(mt, version, None, f"the commit is not a valid commit file: {exc}", "invalid_commit")
        try:
            outcome = self._ratify(mt, tc, version, parsed, actions, committed_by=committed_by)
        except IntegrityError:
            latest = ManagedTable.objects.filter(pk=mt.pk).values_list("latest_version", flat=True).first()
            return CommitConflict(version, max(version, latest if latest is not None else version))
        if isinstance(outcome, CommitResponse) and mt.state == OwnerState.ACTIVE and self._releasing(mt):
            mt.refresh_from_db()
            return CommitResponse(self._finish_release(open_storage(mt.table.location), mt))
        return outcome

    def commit_staged(
        self,
        tc: TableConf,
        version: int,
        file_name: str,
        *,
        committed_by: str = "",
        claimed: tuple[int, int] | None = None,
        etag_version: int | None = None,
        known: ManagedTable | None = None,
    ) -> CommitOutcome:
        """Ratify a staged commit the client wrote itself (catalogManaged, Unity Catalog's
        add-commit): the file must be `_delta_log/_staged_commits/<v>.<uuid>.json` of this
        version; it is read (the owner's checks and policy need its commitInfo), never rewritten.
        `claimed` (ICT, size) is what the client said of the file; `etag_version` the metadata
        version its etag named (checked under the row lock). O(1) in the log's length: one file
        read, one row locked, one row inserted. `known`: the caller's row of an active table (one
        query less; the row is read again under the lock anyway)."""
        mt = known if known is not None and known.state == OwnerState.ACTIVE else self.managed(tc)
        if mt is None:
            return CommitRefused(version, f"commit-owner '{self.name}' does not own {tc.location}", "not_owned")
        if mt.state == OwnerState.ACTIVE and version <= mt.latest_version:
            # versions only grow: a version the row already shows as taken is lost for certain, so
            # the writer hears it at once, without the file read or the row lock the winner holds
            return CommitConflict(version, mt.latest_version)
        if not staged_name_ok(file_name, version):
            return self._refuse(
                mt,
                version,
                None,
                f"'{file_name[:200]}' is not a staged commit file name of version {version}",
                "invalid_commit",
            )
        path = f"{STAGED_COMMITS_DIR}/{file_name}"
        try:
            data = open_storage(mt.table.location).read(path)
        except FileNotFoundError:
            return self._refuse(mt, version, None, f"{path} does not exist", "invalid_commit")
        try:
            parsed = parse_commit(data)
        except ValueError as exc:
            return self._refuse(mt, version, None, f"the commit is not a valid commit file: {exc}", "invalid_commit")
        if claimed is not None and (claimed[0] != parsed.in_commit_timestamp or claimed[1] != len(data)):
            return self._refuse(
                mt,
                version,
                parsed,
                f"the request says timestamp {claimed[0]} and size {claimed[1]}, the file has inCommitTimestamp "
                f"{parsed.in_commit_timestamp} and {len(data)} bytes",
                "invalid_commit",
            )
        try:
            outcome = self._ratify(
                mt, tc, version, parsed, data, staged=path, committed_by=committed_by, etag_version=etag_version
            )
        except IntegrityError:
            latest = ManagedTable.objects.filter(pk=mt.pk).values_list("latest_version", flat=True).first()
            return CommitConflict(version, max(version, latest if latest is not None else version))
        return outcome

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

    def _releasing(self, mt: ManagedTable) -> bool:
        return ManagedTable.objects.filter(pk=mt.pk, state=OwnerState.RELEASING).exists()

    def _refuse(self, mt: ManagedTable, version: int, parsed: ParsedCommit | None, reason: str, code: str):
        OwnerRefusal.objects.create(
            table_id=mt.table_id,
            version=version,
            code=code,
            reason=reason[:5000],
            operation=((parsed.operation if parsed else None) or "")[:200],
            txn_id=((parsed.txn_id if parsed else None) or "")[:200],
        )
        return CommitRefused(version, reason, code)

    def _policy(self, mt: ManagedTable, parsed: ParsedCommit) -> str | None:
        """deltaweb's own rules, as a refusal reason (code "policy")."""
        if mt.frozen:
            who = mt.frozen_by.get_username() if mt.frozen_by else "an approver"
            return f"the table is frozen by {who}" + (f": {mt.frozen_reason}" if mt.frozen_reason else "")
        if parsed.operation == "RESTORE":
            txn = parsed.txn_id or ""
            request_txn = _restore_txn(txn)
            approved = (
                request_txn is not None
                and RestoreRequest.objects.filter(
                    txn_id=request_txn, table_id=mt.table_id, status__in=RestoreStatus.in_flight()
                ).exists()
            )
            if not approved:
                return (
                    f"a RESTORE commit needs the txnId of an approved restore request of this table; "
                    f"{txn or 'no txnId'} is not one (request the restore in deltaweb and have it approved)"
                )
        return None

    def _ratify(
        self,
        mt: ManagedTable,
        tc: TableConf,
        version: int,
        parsed: ParsedCommit,
        actions: bytes,
        *,
        staged: str | None = None,
        committed_by: str = "",
        etag_version: int | None = None,
        retries: int = 2,
    ) -> CommitOutcome:
        """Check the commit against the row as read, then ratify it with one conditional UPDATE
        (the row still at version-1, active, not frozen, the etag's metadata version) and one
        INSERT in a short transaction. Every check and every file operation happens before it,
        so the row lock (PostgreSQL) or SQLite's write lock is held for two statements, never
        across file IO. If the row moved in between, it is read again and checked again."""
        outcome = self._check_row(mt, tc, version, parsed, etag_version)
        if outcome is not None:
            return outcome
        storage = open_storage(mt.table.location)
        outcome = self._check_against_log(storage, mt, tc, version, parsed)
        if outcome is not None:
            return outcome
        if staged is None:  # the owner stages it (the owner API); a catalog client wrote it already
            staged = staged_commit_name(version, str(uuid.uuid4()), tc.staged_dir)
            storage.put_if_absent(staged, actions)
        self.fault("commit:staged")
        info = storage.stat(staged)
        releasing = bool(hands_back(tc, parsed))
        won = self._record_ratified(mt, version, parsed, staged, info, releasing, etag_version, committed_by)
        if not won:
            # the row moved since it was read (a winner, a freeze, a metadata change): read it
            # again and answer from what it says now
            fresh = ManagedTable.objects.select_related("table", "frozen_by").filter(pk=mt.pk).first()
            if fresh is None:
                return CommitRefused(version, f"commit-owner '{self.name}' does not own {tc.location}", "not_owned")
            if retries <= 0:
                return CommitConflict(version, max(version, fresh.latest_version))
            return self._ratify(
                fresh,
                tc,
                version,
                parsed,
                actions,
                staged=staged,
                committed_by=committed_by,
                etag_version=etag_version,
                retries=retries - 1,
            )
        return CommitResponse(Commit(version, staged, info.size, info.modification_time, parsed.in_commit_timestamp))

    def _check_row(
        self, mt: ManagedTable, tc: TableConf, version: int, parsed: ParsedCommit, etag_version: int | None
    ) -> CommitOutcome | None:
        """_ratify's checks against the row as read: owned, same table id and etag, the next version."""
        if mt.state != OwnerState.ACTIVE:
            code = "handing_back" if mt.state == OwnerState.RELEASING else "not_owned"
            return self._refuse(mt, version, parsed, f"commit-owner '{self.name}' does not own {tc.location}", code)
        if tc.table_id and tc.table_id != mt.owner_table_id:
            return self._refuse(
                mt, version, parsed, f"table id {tc.table_id} is not the one this owner took over", "not_owned"
            )
        if etag_version is not None and mt.metadata_version != etag_version:
            return CommitRefused(
                version, "the table's metadata changed since the etag was read", "requirement_conflict"
            )
        latest = mt.latest_version
        if version <= latest:
            return CommitConflict(version, latest)
        if version > latest + 1:
            return self._refuse(
                mt,
                version,
                parsed,
                f"version {version - 1} does not exist; the latest ratified version is {latest}",
                "version_gap",
            )
        return None

    def _check_against_log(
        self, storage: Storage, mt: ManagedTable, tc: TableConf, version: int, parsed: ParsedCommit
    ) -> CommitOutcome | None:
        """_ratify's checks of the commit itself: not in the log yet, the writer requirements, the policy."""
        if storage.exists(commit_name(version)):  # a filesystem writer broke the protocol
            return CommitConflict(version, version, f"{commit_name(version)} exists already")
        problem = check_commit(tc, self.name, parsed, mt.latest_ict)
        if problem is not None:
            return self._refuse(mt, version, parsed, problem[1], problem[0])
        reason = self._policy(mt, parsed)
        if reason:
            return self._refuse(mt, version, parsed, reason, "policy")
        return None

    def _record_ratified(
        self,
        mt: ManagedTable,
        version: int,
        parsed: ParsedCommit,
        staged: str,
        info: FileInfo,
        releasing: bool,
        etag_version: int | None,
        committed_by: str,
    ) -> bool:
        """_ratify's short transaction: the conditional UPDATE of the row and the RatifiedCommit INSERT; won or not."""
        if releasing:
            changes: dict[str, Any] = {
                "state": OwnerState.RELEASING,
                "releasing_version": version,
                "releasing_path": staged,
            }
        else:
            changes = {"latest_version": version, "latest_ict": parsed.in_commit_timestamp}
            if parsed.metadata is not None or parsed.protocol is not None:
                changes["metadata_version"] = version  # the etag moves with metadata changes only
        unchanged = ManagedTable.objects.filter(
            pk=mt.pk,
            state=OwnerState.ACTIVE,
            owner_table_id=mt.owner_table_id,
            latest_version=version - 1,  # the latest version as checked (_check_row)
            frozen=False,
        )
        if etag_version is not None:
            unchanged = unchanged.filter(metadata_version=etag_version)
        with transaction.atomic():
            won = unchanged.update(updated_at=timezone.now(), **changes)
            if won:
                engine = (parsed.commit_info or {}).get("engineInfo")
                RatifiedCommit.objects.create(
                    table_id=mt.table_id,
                    version=version,
                    path=staged,
                    size=info.size,
                    modification_time=info.modification_time,
                    in_commit_timestamp=parsed.in_commit_timestamp,
                    txn_id=(parsed.txn_id or "")[:200],
                    operation=(parsed.operation or "")[:200],
                    engine_info=(engine if isinstance(engine, str) else "")[:200],
                    committed_by=committed_by[:150],
                )
                if self.on_ratified is not None and not releasing:
                    self.on_ratified(mt, version)
                transaction.on_commit(lambda: self.fault("handback:releasing" if releasing else "commit:ratified"))
        return bool(won)

    def get_commits(self, tc: TableConf, start: int = 0, end: int | None = None) -> GetCommitsResponse:
        mt = self.managed(tc)
        if mt is None or mt.state == OwnerState.PROPOSED:
            return GetCommitsResponse([], -1)
        latest = mt.latest_version
        hi = latest if end is None or end < 0 else min(end, latest)
        # above the published version only: a range of the (table, version) index as long as the
        # unpublished commits, not a scan of every row the table ever had
        rows = RatifiedCommit.objects.filter(
            table_id=mt.table_id,
            backfilled=False,
            version__gte=max(start, mt.backfilled_version + 1),
            version__lte=hi,
        ).order_by("version")
        return GetCommitsResponse(
            [Commit(r.version, r.path, r.size, r.modification_time, r.in_commit_timestamp) for r in rows], latest
        )

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


def summary(mt: ManagedTable, refusals: int = 10, versions: int = 50, clients_window: int = 1000) -> dict[str, Any]:
    """What the table page and the API show of a managed table's owner state: staged (ratified,
    not yet published) against published versions, the publish lag in versions and in time (the
    oldest unpublished commit's age), refusals, and which clients committed (the API user and
    commitInfo.engineInfo) among the latest `clients_window` versions."""
    unpublished = RatifiedCommit.objects.filter(
        table_id=mt.table_id, version__gt=mt.backfilled_version, backfilled=False
    )
    ratified = list(unpublished.order_by("version").values_list("version", flat=True)[:versions])
    oldest = unpublished.order_by("version").values_list("created_at", flat=True).first()
    clients = list(
        RatifiedCommit.objects.filter(table_id=mt.table_id, version__gt=mt.latest_version - clients_window)
        .values("committed_by", "engine_info")
        .annotate(commits=Count("id"), lastVersion=Max("version"))
        .order_by("-lastVersion")[:20]
    )
    return {
        "tableId": mt.owner_table_id,
        "state": mt.state,
        "stateLabel": OwnerState(mt.state).label,
        "feature": mt.feature,
        "catalogName": f"{mt.uc_catalog}.{mt.uc_schema}.{mt.uc_name}" if mt.uc_name else None,
        "latestRatifiedVersion": mt.latest_version,
        "backfilledVersion": mt.backfilled_version,
        "stagedVersions": mt.backfill_lag,
        "unbackfilledVersions": ratified,
        "backfillLag": mt.backfill_lag,
        "publishLagSeconds": round((timezone.now() - oldest).total_seconds(), 1) if oldest else 0.0,
        "frozen": mt.frozen,
        "frozenBy": mt.frozen_by.get_username() if mt.frozen_by else None,
        "frozenReason": mt.frozen_reason,
        "frozenAt": mt.frozen_at,
        "refusalCount": OwnerRefusal.objects.filter(table_id=mt.table_id).count(),
        "refusals": list(
            OwnerRefusal.objects.filter(table_id=mt.table_id).values("version", "code", "reason", "operation", "at")[
                :refusals
            ]
        ),
        "clients": [
            {
                "user": c["committed_by"] or None,
                "engine": c["engine_info"] or None,
                "commits": c["commits"],
                "lastVersion": c["lastVersion"],
            }
            for c in clients
        ],
        "clientsWindow": clients_window,
    }
