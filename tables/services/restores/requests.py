"""Restore requests and decisions: an analyst's request with its dry-run plan, an approver's
approval (which queues the run) or rejection, or the requester's withdrawal.

A restore request is a row first. The analyst's request carries a dry-run plan (the pure
planner; fast). An approver (never the requester) approves it, which queues the run in the
same transaction and sends it to a worker, by task name, once that commits; the run itself
is tables.services.restores.runs. Every transition is a RestoreEvent.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from django.db import transaction
from django.utils import timezone

from tables.delta import errors as delta_errors
from tables.delta.log.actions import Metadata, dv_unique_id
from tables.delta.restore.plan import plan_restore
from tables.delta.snapshot.diff import dict_diff, schema_changes, schema_fields
from tables.delta.snapshot.state import Snapshot, load_snapshot
from tables.delta.storage.api import Storage
from tables.delta.write.committer import committer_for
from tables.models import Pin, RestoreEvent, RestoreRequest, RestoreStatus, Table
from tables.services import approvals
from tables.services.access import roles
from tables.services.catalog.lookup import INT64_MAX
from tables.services.errors import ServiceError, http_status, one_line, public_message
from tables.services.jobs import lifecycle as jobs
from tables.services.owner.access import owner_of
from tables.services.restores.recovery import record_plan, recovery_for, recovery_payload
from tables.services.versions.reachability import version_reachability
from tables.services.versions.read import snapshot_at
from tables.services.versions.source import source_of

RESTORE_WARNING = (
    "a restore re-emits its files with dataChange=true; streaming and change-data readers will see them again"
)
PLAN_SAMPLE = 50  # files to add / remove listed with a stored plan
MAX_TEXT = 5000  # reason and comments


def event(req: RestoreRequest, actor, from_status: str, to_status: str, note: str = "") -> None:
    """Record one transition of a request (the audit trail)."""
    RestoreEvent.objects.create(
        request=req, actor=actor, from_status=from_status, to_status=to_status, note=note[:MAX_TEXT]
    )


def _text(value: str | None, what: str, required: bool, code: str) -> str:
    text = (value or "").strip()
    if required and not text:
        raise ServiceError(f"Give a {what}.", code)
    if len(text) > MAX_TEXT:
        raise ServiceError(f"The {what} is too long (at most {MAX_TEXT} characters).", code)
    return text


def _restore_target(version: int | None, timestamp: str | None) -> tuple[int | None, str | None]:
    ts = (timestamp or "").strip() if isinstance(timestamp, str) else timestamp
    ts = ts if ts not in ("", None) else None
    if (version is None) == (ts is None):
        raise ServiceError("Give either the version to restore or a timestamp, not both.", "invalid_target")
    if version is not None and (
        isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= INT64_MAX
    ):
        raise ServiceError(f"The version to restore must be a number (0 or more), not {version!r}.", "invalid_target")
    if ts is not None and len(str(ts)) > 64:
        raise ServiceError("The timestamp is too long (at most 64 characters).", "invalid_timestamp")
    return version, (str(ts) if ts is not None else None)


def _restore_error(exc: delta_errors.DeltaError, table: Table) -> ServiceError:
    """A core error met while planning, as the request's answer (nothing is saved), with the
    status of tables.services.errors (e.g. 422 when the log cannot be read, 403 outside the roots); the
    message names the table, not its location on the server."""
    message = public_message(exc.message, table)
    if isinstance(exc, delta_errors.MissingFilesError):
        count = exc.details.get("count", len(exc.files))
        extra = {"fromPin": True} if exc.details.get("fromPin") else {}
        return ServiceError(message, exc.code, 400, files=exc.files, missingCount=count, **extra)
    return ServiceError(one_line(message, MAX_TEXT), exc.code, http_status(exc))


def _file_sample(actions: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    if actions is None:
        return None
    out = []
    for a in sorted(actions, key=lambda a: str(a.get("path")))[:PLAN_SAMPLE]:
        dv = a.get("deletionVector") or None
        out.append(
            {
                "path": unquote(str(a.get("path"))),
                "size": a.get("size"),
                "partitionValues": a.get("partitionValues") or {},
                "deletionVector": dv_unique_id(dv) if dv else None,
            }
        )
    return out


def _side(snap: Snapshot) -> dict[str, Any]:
    md = snap.metadata
    return {
        "version": snap.version,
        "numFiles": snap.num_files,
        "sizeBytes": snap.size_bytes,
        "protocol": snap.protocol.to_dict(),
        "partitionColumns": list(md.partition_columns),
        "numColumns": len(schema_fields(md)),
    }


def _plan_compare(table: Table, plan: dict[str, Any], storage: Storage | None = None) -> dict[str, Any]:
    """Current head, target and the table after the restore, side by side (read through
    `storage` when given: the view of a table whose gone objects are to be recovered)."""
    if storage is not None:
        head, target = load_snapshot(storage, plan["readVersion"]), load_snapshot(storage, plan["targetVersion"])
    else:
        head, target = snapshot_at(table, plan["readVersion"]), snapshot_at(table, plan["targetVersion"])
    after_md = Metadata.from_dict(plan["metadata"])
    metrics = plan.get("metrics") or {}
    after = {
        "numFiles": int(metrics.get("numOfFilesAfterRestore", target.num_files)),
        "sizeBytes": int(metrics.get("tableSizeAfterRestore", target.size_bytes)),
        "protocol": plan["protocol"],
        "partitionColumns": list(after_md.partition_columns),
        "numColumns": len(schema_fields(after_md)),
    }
    return {
        "head": _side(head),
        "target": _side(target),
        "after": after,
        "schema": schema_changes(head.metadata, after_md),
        "properties": dict_diff(head.metadata.configuration, after_md.configuration),
        "protocol": dict_diff(head.protocol.to_dict(), plan["protocol"]),
        "partitionColumns": {"from": list(head.metadata.partition_columns), "to": after["partitionColumns"]},
    }


def plan_payload(
    table: Table, plan: dict[str, Any], first_read_version: int | None = None, storage: Storage | None = None
) -> dict[str, Any]:
    """What a request stores of a plan (RestorePlan.to_dict): everything but the file
    actions (the fingerprint stands for them; the run plans again), a bounded sample of
    them, the side-by-side comparison, the warning, and the head of the request's first
    plan (where a retry looks for its own commit)."""
    out = {k: v for k, v in plan.items() if k not in ("adds", "removes")}
    out["sample"] = {"add": _file_sample(plan.get("adds")), "remove": _file_sample(plan.get("removes"))}
    if plan.get("fromPin"):  # the files a run copies from the pin: counted, a sample listed
        back = plan["fromPin"]
        sample = sorted(back.get("files") or [], key=lambda f: f["path"])[:PLAN_SAMPLE]
        out["fromPin"] = {"count": back["count"], "bytes": back["bytes"], "sample": sample}
    out["compare"] = _plan_compare(table, plan, storage)
    out["warning"] = RESTORE_WARNING
    out["firstReadVersion"] = first_read_version if first_read_version is not None else plan["readVersion"]
    return out


def _resolution_rule(plan: dict[str, Any]) -> str:
    resolution = plan.get("resolution")
    if resolution:
        return str(resolution.get("rule") or "")
    return f"version {plan['targetVersion']} as given"


def check_restorable(table: Table, version: int) -> None:
    """Refuse, before anything is planned or saved, a target the reachability answer says
    cannot be rebuilt: its commits are gone (log cleanup) or nothing before it can rebuild it.
    Missing data files are left to the planner's existence check, which agrees with the
    answer (only files the restore would add count), names exactly those files, honours
    "ignore missing files" and refuses a path outside the allowed roots as such (403)."""
    try:
        # a long log's answer may still be computing: the planner checks the same files then
        entry = version_reachability(table, version, wait=False)
    except ServiceError:
        return  # the log cannot be read: the planner says why
    if entry is None or entry["restorable"] or entry["reason"] == "files_missing":
        return
    reason = entry["reason"]
    why = {
        "log_expired": "its commits were deleted by log cleanup (the log expired), so its state cannot be rebuilt",
        "not_reproducible": "its state cannot be rebuilt from the log (a commit is missing and no checkpoint covers it)",
    }.get(reason, "it cannot be read")
    raise ServiceError(
        f"Version {version} of {table.name} cannot be restored: {why}. Restore a more recent version.",
        "version_not_restorable",
        400,
        reason=reason,
    )


def request_restore(
    table: Table,
    user,
    *,
    reason: str,
    version: int | None = None,
    timestamp: str | None = None,
    ignore_missing_files: bool = False,
    allow_protocol_downgrade: bool = False,
    where: str | None = None,
    recover_files_first: bool = False,
) -> RestoreRequest:
    """A pending restore request with its dry-run plan; a plan that cannot be made (missing
    files not ignored, target not before the latest version, a predicate that is not on
    partition columns or selects nothing, ...) refuses and saves nothing. `where` restores only
    the partitions a predicate selects (blank: the whole table). `recover_files_first`: the
    version's gone objects are copied back from the bucket's noncurrent versions before the
    restore runs; the plan is made on the table as it will be then (store_not_versioned,
    version_not_recoverable when that cannot be). A version the table no longer gives but a
    pin keeps is planned on the pin's kept table: the files VACUUM took are copied back from it
    when the approved restore runs (the plan's fromPin counts them, its pin names the pin)."""
    if not roles.can_request_restore(user):
        raise ServiceError(
            "Requesting a restore needs the analyst or approver role (or staff).", "permission_denied", 403
        )
    reason = _text(reason, "reason for the restore (the approver reads it)", True, "invalid_reason")
    version, timestamp = _restore_target(version, timestamp)
    recovery, storage, wanted, pin = None, None, [], None
    if recover_files_first:
        recovery, storage, wanted = _recovery(table, version)
    elif version is not None:
        pin = pin_for_restore(table, version)
        if pin is None:
            check_restorable(table, version)
    try:
        plan = plan_restore(
            storage if storage is not None else table.location,
            version=version,
            timestamp=timestamp,
            ignore_missing_files=bool(ignore_missing_files),
            allow_protocol_downgrade=bool(allow_protocol_downgrade),
            committer=committer_for(owner_of(table)),  # a managed table: as its owner knows it
            where=(where or "").strip() or None,
            pinned=pin.store_location if pin is not None else None,
        )
        payload = plan_payload(table, plan.to_dict(), storage=storage)
        if pin is not None:
            payload["pin"] = pin_ref(pin)
    except delta_errors.DeltaError as exc:
        raise _restore_error(exc, table) from exc
    if version is None:  # a timestamp: checked once the plan resolved it to a version
        check_restorable(table, plan.target_version)
    if recovery is not None:
        payload["recovery"] = recovery
    with transaction.atomic():
        req = RestoreRequest.objects.create(
            table=table,
            target_version=version,
            target_timestamp=timestamp or "",
            resolved_version=plan.target_version,
            resolution_rule=_resolution_rule(payload),
            reason=reason,
            ignore_missing_files=bool(ignore_missing_files),
            allow_protocol_downgrade=bool(allow_protocol_downgrade),
            recover_files_first=recovery is not None,
            requested_by=user,
            plan=payload,
            plan_head_version=plan.read_version,
            plan_fingerprint=plan.fingerprint,
        )
        if wanted:
            record_plan(req, wanted)
        recovering = f" (recovering {recovery['count']} objects first)" if recovery is not None else ""
        if pin is not None:
            back = payload.get("fromPin") or {"count": 0, "bytes": 0}
            recovering = f" (from pin {pin.name!r}: {back['count']} file(s), {back['bytes']} bytes to copy back)"
        event(
            req, user, "", RestoreStatus.PENDING,
            f"requested a restore to version {plan.target_version}{recovering}: {reason}",
        )  # fmt: skip
    return req


def pin_for_restore(table: Table, version: int) -> Pin | None:
    """The pin a restore to `version` reads the version from, by the one rule
    (tables.services.versions.source): None while the table itself gives the version."""
    source = source_of(table, version)
    return source.pin if source.from_pin else None


def pin_ref(pin: Pin) -> dict[str, Any]:
    """What a request stores of the pin its plan reads (never the pin store's location)."""
    return {"id": pin.pk, "name": pin.name, "version": pin.version}


def _recovery(table: Table, version: int | None) -> tuple[dict[str, Any], Storage, list[Any]]:
    """The recovery a request shows (objects to copy back), the view to plan on (the table as
    it will be once they are back) and the objects (recorded with the request)."""
    if version is None:
        # a timestamp would be resolved on commit times that the copy itself may change
        raise ServiceError("Recovering files first needs the version to restore, not a timestamp.", "invalid_target")
    found, wanted = recovery_for(table, version)
    return recovery_payload(found, wanted), found.view, wanted


def check_can_decide(req: RestoreRequest, user) -> None:
    """Approvers (or staff) decide, never on their own request; ServiceError 403 otherwise."""
    approvals.check_can_decide(
        user,
        req.requested_by_id,
        role_needed="Approving or rejecting restores needs the approver role (or staff).",
        own_request=f"You requested restore #{req.pk}; another approver must approve or reject it.",
    )


def _decide(req: RestoreRequest, user, to_status: str, comment: str, fingerprint: str | None) -> None:
    current = RestoreRequest.objects.filter(pk=req.pk).values_list("status", "plan_fingerprint").first()
    if current is None:
        raise ServiceError(f"There is no restore request {req.pk}.", "not_found", 404)
    status, current_fingerprint = current
    verb = "approved" if to_status == RestoreStatus.APPROVED else "rejected"
    if status not in RestoreStatus.awaiting_approval():
        raise ServiceError(
            f"Restore #{req.pk} is {RestoreStatus(status).label}; only pending or stale requests can be {verb}.",
            "invalid_state",
            409,
        )
    if fingerprint and fingerprint != current_fingerprint:
        raise ServiceError(
            f"The plan of restore #{req.pk} changed since you looked at it; review the new plan.", "plan_changed", 409
        )
    approvals.transition(
        RestoreRequest.objects.filter(pk=req.pk, status=status),
        {"status": to_status, "approver": user, "approver_comment": comment, "decided_at": timezone.now()},
        ServiceError(f"Restore #{req.pk} was decided by someone else just now.", "invalid_state", 409),
        lambda: event(req, user, status, to_status, comment),
    )


def approve_restore(req: RestoreRequest, user, comment: str = "", fingerprint: str | None = None) -> RestoreRequest:
    """Approve the current plan and queue its run (enqueued once the transaction commits).
    `fingerprint`, when given, must be the plan's: the approver approves what they saw."""
    check_can_decide(req, user)
    comment = _text(comment, "comment", False, "invalid_comment")
    with transaction.atomic():
        _check_none_in_flight(req)
        _decide(req, user, RestoreStatus.APPROVED, comment, fingerprint)
        _queue_restore(req, user)
    req.refresh_from_db()
    return req


def _check_none_in_flight(req: RestoreRequest) -> None:
    """Refuse (409) to approve while another restore of the same table is approved, queued or
    running: the second would be planned on a head the first is about to move, and two
    RESTOREs racing on one table can only end in a conflict or a stale plan. The table's row
    is locked first, so that two approvers approving two requests at once cannot both pass."""
    Table.objects.select_for_update().filter(pk=req.table_id).values_list("pk", flat=True).first()
    other = (
        RestoreRequest.objects.filter(table_id=req.table_id, status__in=RestoreStatus.in_flight())
        .exclude(pk=req.pk)
        .order_by("pk")
        .values_list("pk", "status")
        .first()
    )
    if other is not None:
        pk, status = other
        raise ServiceError(
            f"Restore #{pk} of this table is {RestoreStatus(status).label}; approve this one after it finishes.",
            "restore_in_flight",
            409,
            inFlight=pk,
        )


def withdraw_restore(req: RestoreRequest, user, comment: str = "") -> RestoreRequest:
    """The requester (or staff) withdraws a pending or stale request; it can no longer be
    approved. 403 for anyone else, 409 once it was decided."""
    approvals.check_withdrawer(
        user, req.requested_by_id, refused=f"Only the requester of restore #{req.pk} (or staff) can withdraw it.",
        staff=True,
    )  # fmt: skip
    comment = _text(comment, "comment", False, "invalid_comment")
    with transaction.atomic():
        status = RestoreRequest.objects.filter(pk=req.pk).values_list("status", flat=True).first()
        if status is None:
            raise ServiceError(f"There is no restore request {req.pk}.", "not_found", 404)
        if status not in RestoreStatus.awaiting_approval():
            raise ServiceError(
                f"Restore #{req.pk} is {RestoreStatus(status).label}; only pending or stale requests can be withdrawn.",
                "invalid_state",
                409,
            )
        # conditional on the status read: an approval landing meanwhile wins, and this refuses
        approvals.transition(
            RestoreRequest.objects.filter(pk=req.pk, status=status),
            {"status": RestoreStatus.WITHDRAWN, "stage": "withdrawn", "finished_at": timezone.now()},
            ServiceError(f"Restore #{req.pk} was decided by someone else just now.", "invalid_state", 409),
            lambda: event(req, user, status, RestoreStatus.WITHDRAWN, comment or "withdrawn by the requester"),
        )
    req.refresh_from_db()
    return req


def reject_restore(req: RestoreRequest, user, comment: str = "") -> RestoreRequest:
    """Reject a pending or stale request; a comment saying why is required."""
    check_can_decide(req, user)
    comment = _text(comment, "comment saying why the restore is rejected", True, "invalid_comment")
    with transaction.atomic():
        _decide(req, user, RestoreStatus.REJECTED, comment, None)
        RestoreRequest.objects.filter(pk=req.pk).update(finished_at=timezone.now(), stage="rejected")
    req.refresh_from_db()
    return req


def _queue_restore(req: RestoreRequest, actor) -> None:
    queued = RestoreRequest.objects.filter(pk=req.pk, status=RestoreStatus.APPROVED).update(
        status=RestoreStatus.QUEUED, stage="queued", done=0, total=None, error="", progress_at=timezone.now()
    )
    if queued == 1:
        event(req, actor, RestoreStatus.APPROVED, RestoreStatus.QUEUED, "queued for a worker")
        send_restore_on_commit(req.pk)


def send_restore_on_commit(pk: int) -> None:
    """Send the run to a worker once the transaction commits."""
    transaction.on_commit(lambda: send_restore(pk))


def send_restore(pk: int) -> None:
    """Send the run to the broker; if it is unreachable the request stays queued and
    requeue_stuck_restores (tables.services.restores.runs) sends it again later."""

    def stay_queued(exc: Exception) -> None:
        RestoreRequest.objects.filter(pk=pk, status=RestoreStatus.QUEUED).update(
            error=jobs.unreachable_message(exc, "the restore stays queued and is sent again")
        )

    jobs.send_or_mark(jobs.RESTORE_TASK, pk, mark=stay_queued)


def restore_ids_by_version(table: Table, commits) -> dict[int, int]:
    """{version: request id} of the RESTORE commits among `commits` that deltaweb made, for the
    history to link them to their request: one query for the page. A request is matched by
    its result version on this table and, when the commit names its request (the
    operationParameters' requestId, written since it exists), by that id too: a table
    re-created under the same name has other commits at those versions."""
    restores = {c.version: c for c in commits if c.operation == "RESTORE"}
    if not restores:
        return {}
    rows = RestoreRequest.objects.filter(table=table, result_version__in=list(restores)).values_list(
        "result_version", "pk"
    )
    out = {}
    for version, pk in rows:
        named = (restores[version].operation_parameters or {}).get("requestId")
        if named is None or str(named) == str(pk):
            out[version] = pk
    return out


MAX_PREVIEW_PARTITIONS = 100


def selected_partitions(table: Table, where: str) -> dict[str, Any]:
    """The partitions of the latest version a restore predicate selects (the first 100, with
    their file counts), for the form to list before anything is requested."""
    from tables.delta.restore.predicate import partition_predicate
    from tables.delta.snapshot.partitions import distinct_partitions

    snap = snapshot_at(table)
    try:
        pred = partition_predicate(where, snap.metadata, snap.protocol)
    except delta_errors.DeltaError as exc:
        raise _restore_error(exc, table) from exc
    inverse, parts = distinct_partitions(snap.files, list(pred.columns))
    counts = [0] * len(parts)
    for i in inverse.tolist():
        counts[i] += 1
    chosen = [(p, n) for p, n in zip(parts, counts, strict=True) if pred.matches(p)]
    keys = {c.key: c.name for c in pred.columns}
    return {
        "predicate": pred.text,
        "count": len(chosen),
        "partitions": [
            {"values": {keys.get(k, k): v for k, v in p.items()}, "files": n}
            for p, n in chosen[:MAX_PREVIEW_PARTITIONS]
        ],
    }
