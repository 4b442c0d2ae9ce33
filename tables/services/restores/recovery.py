"""Recovering a version's gone objects from a versioned bucket before restoring it: what must be
copied back (recorded with the request, one RecoveredObject row each, "planned": the approver
approves exactly these), and the worker's copy of them, each row marked before its copy and
completed after it (the audit: what was copied, from which version id, to which, by which
request). Nothing is ever deleted.

A version is recoverable when it cannot be read now and the reachability map computed on a view
of the table with the noncurrent versions back says it can (tables.services.versions.reachability); the
objects to copy are those it needs (its log segment, its data and deletion-vector files) that
only the noncurrent versions hold.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from tables.delta import errors as delta_errors
from tables.delta.history.reachability.compute import Reachability, recovery_needs
from tables.delta.storage.api import Storage
from tables.delta.storage.backends.registry import ObjectVersion
from tables.delta.storage.opening import as_storage
from tables.delta.storage.versions import copy_back, versioned_bucket
from tables.models import RecoveredObject, RestoreRequest, Table
from tables.services.errors import ServiceError, from_delta, one_line, public_message
from tables.services.versions.reachability import Recovery, recovery_of

SAMPLE = 50  # objects a request's plan lists; the run copies them all
COMMIT_TIME_NOTE = (
    "recovered commit files get the time of the copy as their modification time: without in-commit "
    "timestamps, the commit times of those versions change"
)


def _entry(result: Reachability | None, version: int) -> Any:
    return next((v for v in result.versions if v.version == version), None) if result is not None else None


def recovery_for(table: Table, version: int) -> tuple[Recovery, list[tuple[str, ObjectVersion]]]:
    """The table's recovery and the (key, noncurrent version) pairs `version` needs copied
    back, log files first. ServiceError store_not_versioned (422) when the table's store
    keeps no versions, version_not_recoverable (400) when the version is readable already or
    the noncurrent versions would not make it readable."""
    try:
        result, found = recovery_of(table.location)
    except delta_errors.NotVersionedError as exc:
        raise from_delta(exc, f"Files cannot be recovered first: {exc.message}", table) from exc
    except delta_errors.DeltaError as exc:
        raise from_delta(exc, one_line(exc.message), table) from exc
    entry = _entry(result, version)
    if entry is None:
        raise ServiceError(f"Version {version} is not in the log of {table.name}.", "version_not_found", 404)
    if entry.readable:
        raise ServiceError(
            f"Version {version} of {table.name} can be read: there is nothing to recover.",
            "version_not_recoverable",
            400,
        )
    if not entry.recoverable:
        raise ServiceError(
            f"Version {version} of {table.name} cannot be recovered: not every object it needs survives as a "
            "noncurrent version in the bucket.",
            "version_not_recoverable",
            400,
            reason=entry.reason,
        )
    needs = recovery_needs(found.state, found.view, version)
    objects = found.recoverable.objects
    wanted = sorted((k for k in needs if k in objects), key=lambda k: (not k.startswith("_delta_log/"), k))
    return found, [(k, objects[k]) for k in wanted]


def recovery_payload(found: Recovery, wanted: list[tuple[str, ObjectVersion]]) -> dict[str, Any]:
    """What a request's plan says of the recovery: counts, bytes, a sample, and the note on
    commit times when commit files are among them on a table without in-commit timestamps."""
    commits = [int(k[11:31]) for k, _v in wanted if k.startswith("_delta_log/") and k.endswith(".json")]
    commits = [v for v in commits if not found.state.ict.applies(v)]
    return {
        "count": len(wanted),
        "bytes": sum(v.size for _k, v in wanted),
        "logFiles": sum(1 for k, _v in wanted if k.startswith("_delta_log/")),
        "sample": [
            {"path": k, "versionId": v.version_id, "size": v.size, "lastModified": v.last_modified}
            for k, v in wanted[:SAMPLE]
        ],
        "notes": [COMMIT_TIME_NOTE] if commits else [],
    }


def record_plan(req: RestoreRequest, wanted: list[tuple[str, ObjectVersion]]) -> None:
    """The objects a request will copy back, one row each (outcome "planned"): what the
    approver approves is exactly what the run copies, whatever happens to the bucket meanwhile."""
    planned = RecoveredObject.Outcome.PLANNED
    RecoveredObject.objects.bulk_create(
        RecoveredObject(request=req, path=rel[:4096], source_version_id=v.version_id[:1024], size=v.size,
                        source_etag=v.etag[:200], outcome=planned)
        for rel, v in wanted
    )  # fmt: skip


class _Audit:
    """Each row marked "copying" before its copy and completed after it (a row left "copying"
    is a copy whose worker stopped: the next attempt copies it again, which the store cannot
    let replace anything)."""

    def __init__(self, rows: list[RecoveredObject], progress: Any) -> None:
        self.rows, self.progress = {r.path: r for r in rows}, progress
        self.current: RecoveredObject | None = None
        self.count = 0

    def __call__(self, rel: str, source: ObjectVersion, report: dict[str, Any] | None) -> None:
        row = self.rows[rel]
        if report is None:
            row.outcome, self.current = RecoveredObject.Outcome.COPYING, row
            row.save(update_fields=["outcome"])
            return
        row.outcome = report["outcome"]
        row.version_id = str(report.get("versionId") or "")[:1024]
        row.etag = str(report.get("etag") or "")[:200]
        row.sha256 = str(report.get("sha256") or "")[:64]
        row.checked_by = ", ".join(report.get("checkedBy") or [])[:200]
        row.finished_at, self.current = timezone.now(), None
        row.save(update_fields=["outcome", "version_id", "etag", "sha256", "checked_by", "finished_at"])
        self.count += 1
        self.progress("recovering files from noncurrent versions", self.count, len(self.rows))

    def failed(self, message: str) -> None:
        """The copy under way failed: its row says so (the copies before it stay)."""
        row, self.current = self.current, None
        if row is not None:
            row.outcome, row.error, row.finished_at = RecoveredObject.Outcome.FAILED, message[:2000], timezone.now()
            row.save(update_fields=["outcome", "error", "finished_at"])


def recover_files(req: RestoreRequest, progress: Any) -> dict[str, Any]:
    """The worker's part before the restore: every object the request planned (its rows not
    done yet: planned, or copying when a worker stopped mid-copy) copied back from exactly the
    noncurrent version the approver saw, each row completed after its copy. A current object
    with the version's bytes counts as present; one with other bytes fails the run and is
    left as it is. A summary for the result; RecoveryError on a failure (the copies made stay:
    nothing is deleted)."""
    todo = list(
        RecoveredObject.objects.filter(
            request=req, outcome__in=[RecoveredObject.Outcome.PLANNED, RecoveredObject.Outcome.COPYING]
        )
    )
    if todo:
        progress("recovering files from noncurrent versions", 0, len(todo))
        audit = _Audit(todo, progress)
        try:
            storage = as_storage(req.table.location)
            bucket = versioned_bucket(storage)
            objects = [(r.path, _source(storage, r)) for r in todo]
            copy_back(storage, bucket, objects, audit)
        except (delta_errors.DeltaError, OSError) as exc:
            message = public_message(one_line(getattr(exc, "message", exc), 2000), req.table)
            audit.failed(message)
            if isinstance(exc, delta_errors.RecoveryError):
                raise
            raise delta_errors.RecoveryError(f"recovering files failed: {message}") from None
    recorded = RecoveredObject.objects.filter(request=req)
    return {
        "copied": recorded.filter(outcome=RecoveredObject.Outcome.COPIED).count(),
        "present": recorded.filter(outcome=RecoveredObject.Outcome.PRESENT).count(),
        "objects": recorded.count(),
        "bytes": sum(recorded.values_list("size", flat=True)),
    }


def _source(storage: Storage, row: RecoveredObject) -> ObjectVersion:
    """The noncurrent version a row names, as the backend copies it (its key confined to the
    table by the storage, as every key)."""
    _bucket, key = storage.object_ref(row.path)  # type: ignore[attr-defined]
    return ObjectVersion(key, row.source_version_id, row.size, row.source_etag, 0, False)
