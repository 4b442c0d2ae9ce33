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
from django.utils import timezone

from tables.delta.errors import ManagedTableError
from tables.delta.log.listing import STAGED_COMMITS_DIR, commit_name, staged_commit_name
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
from tables.delta.storage.api import FileInfo, Storage
from tables.delta.storage.opening import as_storage, open_storage
from tables.delta.write.catalog import staged_name_ok
from tables.models import ManagedTable, OwnerRefusal, OwnerState, RatifiedCommit, RestoreRequest, RestoreStatus, Table
from tables.services.jobs import faults
from tables.services.owner.publish import Publishing


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


class DatabaseOwner(Publishing):
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
