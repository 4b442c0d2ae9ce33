"""Committing a RESTORE plan: put-if-absent on the next version, applied on top of a head that
moved on when no newer commit conflicts, idempotent by txnId, read back and verified; and the
one rule for what an approved plan may still commit (approved_change_on).

A partial plan (plan.predicate set) is committed the same way, scoped: file actions of newer
commits outside the partitions its predicate selects never conflict (the predicate is parsed
again against the plan's metadata), and it writes no metaData or protocol action, since it
keeps the latest's and other writers should not see a schema change that is none."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from tables.delta.errors import CommitConflictError, CorruptLogError, DeltaError, RestoreError, at_version
from tables.delta.history.changes import commit_actions
from tables.delta.log.actions import Metadata, Protocol, parse_actions
from tables.delta.log.commitinfo import read_commit_info
from tables.delta.log.listing import LogListing, commit_name
from tables.delta.restore.actions import MAX_LISTED_MISSING, missing_error, missing_files
from tables.delta.restore.plan import RestorePlan, plan_fingerprint, restore_metrics
from tables.delta.restore.predicate import PartitionPredicate, partition_predicate
from tables.delta.restore.rules import same_protocol
from tables.delta.snapshot.replay import action_identity, canonical_path, identity_keys
from tables.delta.snapshot.state import Snapshot, load_snapshot
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import as_storage
from tables.delta.write.commit import ENGINE_INFO, CommitResult, now_ms
from tables.delta.write.committer import FILESYSTEM, Committer

MAX_COMMIT_ATTEMPTS = 5


# --- committing ----------------------------------------------------------------------------------


def _commit_actions(
    storage: Storage, version: int, listing: LogListing | None = None
) -> list[tuple[str, dict[str, Any]]]:
    rel = next((c.path for c in listing.commits if c.version == version), None) if listing else None
    try:
        data = storage.read(rel or commit_name(version))
    except FileNotFoundError as exc:
        raise CorruptLogError(
            f"{storage.display()}: commit {version} disappeared while checking for conflicts"
        ) from exc
    return parse_actions(data, storage.display(rel or commit_name(version)))


def find_conflicts(
    storage: Storage, plan: RestorePlan, versions: range, listing: LogListing | None = None
) -> dict[int, list[str]]:
    """Commits in `versions` that overlap the plan, with why: a file action on a path the plan
    adds or removes, a metaData or protocol action, or a domain the plan writes."""
    paths = {canonical_path(a["path"]) for a in plan.adds} | {canonical_path(r["path"]) for r in plan.removes}
    domains = {d["domain"] for d in plan.domains}
    scope = plan_predicate(plan)
    out: dict[int, list[str]] = {}
    for v in versions:
        why: list[str] = []
        for name, body in _commit_actions(storage, v, listing):
            if name in ("metaData", "protocol"):
                why.append(f"changes the {name}")
            elif name in ("add", "remove") and scope is not None and not _inside(scope, body):
                continue  # a file outside a partial restore's partitions: never a conflict
            elif name in ("add", "remove") and canonical_path(str(body.get("path"))) in paths:
                why.append(f"{name}s {unquote(str(body.get('path')))}")
            elif name == "domainMetadata" and body.get("domain") in domains:
                why.append(f"writes domain {body.get('domain')}")
        if why:
            out[v] = sorted(set(why))[:5]
    return out


def plan_predicate(plan: RestorePlan) -> PartitionPredicate | None:
    """A partial plan's predicate, parsed again against the metadata it was planned on."""
    if plan.predicate is None:
        return None
    return partition_predicate(plan.predicate, Metadata.from_dict(plan.metadata), Protocol.from_dict(plan.protocol))


def _inside(scope: PartitionPredicate, body: dict[str, Any]) -> bool:
    """Whether a file action lies in the selected partitions; one whose partition values do
    not parse is taken as inside, so that it is checked rather than waved through."""
    pv = body.get("partitionValues")
    try:
        return scope.matches(pv if isinstance(pv, dict) else None)
    except CorruptLogError:
        return True


def _find_txn(storage: Storage, listing: Any, after: int, txn_id: str) -> int | None:
    for lf in listing.commits:
        if lf.version > after:
            info = read_commit_info(storage, lf).info or {}
            if info.get("txnId") == txn_id and info.get("operation") == "RESTORE":
                return lf.version
    return None


def find_restore_commit(
    location: str | Storage, after: int, txn_id: str, committer: Committer = FILESYSTEM
) -> int | None:
    """The version of the RESTORE commit with `txn_id` after version `after`, if any (a
    retried job finds its own earlier commit instead of planning on top of it)."""
    storage = as_storage(location)
    return _find_txn(storage, committer.listing(storage), after, txn_id)


def approved_change(current: RestorePlan, approved: RestorePlan) -> RestorePlan | None:
    """approved_change_on for an approved plan that still has its file actions: the files
    the head gained since are those the current plan removes and the approved one does not
    (a file active now that the approved plan does not remove was not active at its head,
    or the approved plan would remove it too)."""
    keep = {action_identity(r) for r in approved.removes}
    gained = {action_identity(r) for r in current.removes} - keep
    return approved_change_on(current, approved.fingerprint, approved.read_version, lambda: gained)


def approved_change_on(
    current: RestorePlan, fingerprint: str | None, read_version: int | None, added_since: Callable[[], set[str]]
) -> RestorePlan | None:
    """The plan to commit for an approved restore (the one rule, for every engine), given
    the plan made again on the current head, the approved plan's fingerprint and head, and
    the identities of the files added since that head (asked only when needed): the current
    plan when it makes the same change (same fingerprint); when the head only gained files
    since, the approved change on top of them (the current plan without removing them),
    if that is exactly the approved change; else None (stale)."""
    if current.fingerprint == fingerprint:
        return current
    if read_version is None or current.read_version <= read_version:
        return None
    try:
        added = added_since()
    except (FileNotFoundError, DeltaError, ValueError):
        return None  # a commit we cannot read: let the approver look at the new plan
    removes = [r for r in current.removes if action_identity(r) not in added]
    if not added or len(removes) == len(current.removes):
        return None
    plan = current.replace(removes=removes, read_version=int(read_version))
    plan.fingerprint = plan_fingerprint(plan)
    return plan if plan.fingerprint == fingerprint else None


def files_added_since(location: Storage | str, after: int, upto: int) -> set[str]:
    """Identities of the files added by the commits after..upto (read from the commit files),
    for approved_change_on when the approved plan keeps no file actions."""
    storage = as_storage(location)
    return {
        action_identity(body)
        for v in range(after + 1, upto + 1)
        for name, body in commit_actions(storage, v)
        if name == "add" and isinstance(body.get("path"), str)
    }


def _rebase(plan: RestorePlan, head: Snapshot) -> RestorePlan:
    """The plan's change on `head` (its own head or a newer one): check that every file to
    remove is active and no file to add is, and count the metrics on that head."""
    keys = set(identity_keys(head.files).to_pylist()) if head.num_files else set()
    gone = [r["path"] for r in plan.removes if action_identity(r) not in keys]
    back = [a["path"] for a in plan.adds if action_identity(a) in keys]
    if gone or back:
        raise CommitConflictError(
            f"{plan.location}: the table changed under the restore plan at version {head.version} "
            f"({len(gone)} file(s) to remove are gone, {len(back)} file(s) to add are active already)",
            version=head.version,
        )
    return plan.replace(
        read_version=head.version,
        head_num_files=head.num_files,
        head_size_bytes=head.size_bytes,
        metrics=restore_metrics(plan.adds, plan.removes, head.num_files, head.size_bytes),
    )


def verify_restore(
    storage: Storage,
    plan: RestorePlan,
    version: int,
    head: Snapshot | None = None,
    committer: Committer = FILESYSTEM,
) -> dict:
    """Read `version` back: its files must be the head's less the removes plus the adds, its
    metadata and protocol the plan's."""
    listing = committer.listing(storage)
    new = load_snapshot(storage, version, listing)
    head = head if head is not None else load_snapshot(storage, version - 1, listing)
    expected = set(identity_keys(head.files).to_pylist()) if head.num_files else set()
    expected -= {action_identity(r) for r in plan.removes}
    expected |= {action_identity(a) for a in plan.adds}
    actual = set(identity_keys(new.files).to_pylist()) if new.num_files else set()
    metadata_ok = new.metadata == Metadata.from_dict(plan.metadata)
    protocol_ok = same_protocol(new.protocol, Protocol.from_dict(plan.protocol))
    return {
        "verified": actual == expected and metadata_ok and protocol_ok,
        "numFiles": len(actual),
        "expectedNumFiles": len(expected),
        "missing": sorted(p.split("\x00")[0] for p in expected - actual)[:10],
        "unexpected": sorted(p.split("\x00")[0] for p in actual - expected)[:10],
        "metadataMatches": metadata_ok,
        "protocolMatches": protocol_ok,
    }


def commit_restore(
    location: str | Storage,
    plan: RestorePlan,
    txn_id: str | None = None,
    clock: Callable[[], int] = now_ms,
    recheck_files: bool = True,
    committer: Committer = FILESYSTEM,
    extra_parameters: dict[str, str] | None = None,
    user_name: str | None = None,
) -> dict[str, Any]:
    """Commit `plan` as the next version; see the module's contract for conflicts and txnId.
    The files to add are checked again (they may have gone while the plan waited), unless
    `recheck_files` is False: for a plan that was made, and checked, just now.
    `extra_parameters` join commitInfo.operationParameters and `user_name` is its userName
    (who requested and approved an approved restore): commitInfo only, so the plan's
    fingerprint, which covers its actions, is the same with or without them."""
    storage = as_storage(location)
    where = storage.display()
    txn = txn_id or str(uuid.uuid4())
    last_error: CommitConflictError | None = None
    for _attempt in range(MAX_COMMIT_ATTEMPTS):
        listing = committer.listing(storage)
        head_version = _head_version(listing, plan, where)
        done = _find_txn(storage, listing, plan.read_version, txn) if txn_id else None
        if done is not None:
            return _already_committed(storage, plan, listing, done, txn, committer)
        newer = range(plan.read_version + 1, head_version + 1)
        if len(newer):
            _raise_conflicts(storage, plan, newer, listing, where)
        head = load_snapshot(storage, head_version, listing)
        current = _rebase(plan, head)
        if current.files_checked and recheck_files:
            current = _recheck_adds(storage, current, head, where)
        now = clock()
        actions = _restore_actions(current, now)
        try:
            result = committer.commit(
                storage,
                actions,
                "RESTORE",
                {**(extra_parameters or {}), **operation_parameters(current)},
                read_version=head_version,
                is_blind_append=False,
                operation_metrics=current.metrics,
                txn_id=txn,
                clock=lambda now=now: now,
                user_name=user_name,
            )
        except CommitConflictError as exc:
            last_error = exc  # another writer won the version: check again on the new head
            continue
        check = verify_restore(storage, current, result.version, head, committer)
        return _committed(current, result, check, txn, head_version, newer)
    raise CommitConflictError(
        f"{where}: gave up committing the restore after {MAX_COMMIT_ATTEMPTS} attempts: other writers keep "
        f"committing first",
        version=last_error.version if last_error else plan.read_version,
    )


def _head_version(listing: LogListing, plan: RestorePlan, where: str) -> int:
    """The listing's latest version, which must not be before the plan's head."""
    head_version = listing.latest_commit
    if head_version is None or head_version < plan.read_version:
        raise RestoreError(f"{where}: the table is at version {head_version}, before the plan's {plan.read_version}")
    return head_version


def _already_committed(
    storage: Storage, plan: RestorePlan, listing: LogListing, done: int, txn: str, committer: Committer
) -> dict[str, Any]:
    """commit_restore's answer for a retry whose commit (version `done`) is in the log already."""
    info = read_commit_info(storage, next(c for c in listing.commits if c.version == done)).info or {}
    check = verify_restore(storage, plan, done, committer=committer)
    return {
        "version": done,
        "alreadyCommitted": True,
        "txnId": txn,
        "readVersion": info.get("readVersion"),
        "targetVersion": plan.target_version,
        "rebasedOver": [],
        "metrics": info.get("operationMetrics") or {},
        "inCommitTimestamp": info.get("inCommitTimestamp"),
        "verified": check["verified"],
        "verification": check,
        "protocolOutcome": plan.protocol_outcome,
        "fingerprint": plan.fingerprint,
    }


def _raise_conflicts(storage: Storage, plan: RestorePlan, newer: range, listing: LogListing, where: str) -> None:
    """Raise CommitConflictError if any of the `newer` commits conflicts with the plan."""
    conflicts = find_conflicts(storage, plan, newer, listing)
    if conflicts:
        first = min(conflicts)
        detail = "; ".join(f"version {v} {', '.join(w)}" for v, w in sorted(conflicts.items())[:5])
        raise CommitConflictError(
            f"{where}: the restore planned on version {plan.read_version} conflicts with "
            f"{'version' if len(conflicts) == 1 else 'versions'} {', '.join(map(str, sorted(conflicts)))}: {detail}",
            version=first,
            versions=sorted(conflicts),
        )


def _recheck_adds(storage: Storage, current: RestorePlan, head: Snapshot, where: str) -> RestorePlan:
    """The rebased plan after checking its files to add again; missing ones raise or are skipped."""
    # files may have gone since the plan (a vacuum while it waited for approval)
    with at_version(f"version {current.target_version}"):
        missing, bad = missing_files(storage, current.adds)
    if missing and not current.ignore_missing_files:
        raise missing_error(where, current.target_version, missing)
    if bad:
        adds = [a for i, a in enumerate(current.adds) if i not in bad]
        current = current.replace(
            adds=adds,
            missing_files=sorted(set(current.missing_files) | set(missing)),
            metrics=restore_metrics(adds, current.removes, head.num_files, head.size_bytes),
        )
    return current


def _restore_actions(current: RestorePlan, now: int) -> list[dict[str, Any]]:
    """The RESTORE commit's actions, removes stamped with `now`."""
    actions: list[dict[str, Any]] = []
    if current.predicate is None:  # a partial restore keeps the latest's (see the module's docstring)
        actions += [{"metaData": current.metadata}, {"protocol": current.protocol}]
    actions += [{"domainMetadata": d} for d in current.domains]
    actions += [{"add": a} for a in current.adds]
    actions += [{"remove": {**r, "deletionTimestamp": now}} for r in current.removes]
    return actions


def _committed(
    current: RestorePlan, result: CommitResult, check: dict, txn: str, head_version: int, newer: range
) -> dict[str, Any]:
    """commit_restore's answer for the commit it just wrote and verified."""
    return {
        "version": result.version,
        "alreadyCommitted": False,
        "txnId": txn,
        "readVersion": head_version,
        "targetVersion": current.target_version,
        "rebasedOver": list(newer),
        "metrics": current.metrics,
        "inCommitTimestamp": result.in_commit_timestamp,
        "verified": check["verified"],
        "verification": check,
        "protocol": current.protocol,
        "protocolOutcome": current.protocol_outcome,
        "engineInfo": ENGINE_INFO,
        "fingerprint": current.fingerprint,
        "skippedMissingFiles": current.missing_files[:MAX_LISTED_MISSING],
    }


def operation_parameters(plan: RestorePlan) -> dict[str, Any]:
    """commitInfo.operationParameters: {version, timestamp}, and the predicate of a partial one."""
    params: dict[str, Any] = {"version": plan.requested_version, "timestamp": plan.requested_timestamp}
    if plan.predicate is not None:
        params["predicate"] = plan.predicate
    return params
