"""The server's signed audit export: the same file as `delta audit-export`
(tables.delta.history.audit), made from what deltaweb first saw of each commit (the chain of
tables.services.chain.look, not the bytes as they are now: an export made before a rewrite
proves it afterwards), the cached history's metadata, and who requested and approved which
restore. Signed with the key the deployment configures (DELTAWEB_AUDIT_KEY, or a file named by
DELTAWEB_AUDIT_KEY_FILE). Without one, a development start (not DELTAWEB_PRODUCTION) signs with
a key made on first use and kept under the var directory (mode 0600), and the page says so; a
production start without one has exports unavailable, and the page and the API say why.
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Max, Min

from deltaweb.kept_secrets import kept_file
from tables.delta.history.audit import (
    AuditKeyError,
    ExportInput,
    key_id,
    load_private_key,
    make_export,
    public_raw,
    sign_export,
)
from tables.delta.history.chain import GENESIS
from tables.delta.log.commitinfo import bounded
from tables.models import Commit, RestoreRequest, SeenBlock, Table, VersionChecksum
from tables.services.chain.seen import Seen, entry_before, seen_commits
from tables.services.errors import ServiceError

MAX_VERSIONS = 200_000  # versions one export may hold (a longer history is exported in ranges)


@dataclass(frozen=True)
class KeyState:
    """Whether exports can be signed, and if not, why (said on the page, never a failure)."""

    key: Ed25519PrivateKey | None
    reason: str = ""
    # the development key's file when no key is configured outside production, else None
    development: Path | None = None

    @property
    def key_id(self) -> str:
        return key_id(self.key.public_key()) if self.key is not None else ""

    @property
    def public_key(self) -> str:
        """The public key as the base64 of its 32 raw bytes (what `delta audit-verify
        --public-key` reads), "" without a key."""
        return base64.b64encode(public_raw(self.key.public_key())).decode() if self.key is not None else ""


DEV_KEY_FILE = "audit-signing.key"  # under the var directory: the development signing key


def _new_raw_key() -> str:
    """A fresh Ed25519 private key as the base64 of its 32 random bytes (load_private_key's form)."""
    return base64.b64encode(os.urandom(32)).decode()


def signing_key() -> KeyState:
    """The deployment's signing key; else, outside production, the development key kept under
    the var directory (made on first use); else why there is none."""
    text = str(getattr(settings, "DELTAWEB_AUDIT_KEY", "") or "")
    path = str(getattr(settings, "DELTAWEB_AUDIT_KEY_FILE", "") or "")
    if not text.strip() and path:
        try:
            with open(path, "rb") as f:
                text = f.read(1 << 16).decode("ascii", "replace")
        except OSError as exc:
            return KeyState(None, f"the signing key file cannot be read ({exc.strerror})")
    if not text.strip():
        if getattr(settings, "DELTAWEB_PRODUCTION", False):
            return KeyState(
                None,
                "no signing key is configured: a production deployment sets DELTAWEB_AUDIT_KEY "
                "(or DELTAWEB_AUDIT_KEY_FILE) to its Ed25519 private key",
            )
        return _development_key()
    try:
        return KeyState(load_private_key(text))
    except AuditKeyError as exc:
        return KeyState(None, str(exc))


def _development_key() -> KeyState:
    """The development signing key: made on first use (random, mode 0600, published exclusively,
    so processes starting at once share one) in the var directory."""
    directory = Path(settings.DELTAWEB_VAR_DIR)
    try:
        text = kept_file(DEV_KEY_FILE, directory=directory, make=_new_raw_key)
        return KeyState(load_private_key(text), development=directory / DEV_KEY_FILE)
    except OSError as exc:
        return KeyState(None, f"the development signing key cannot be kept in {directory} ({exc.strerror})")
    except (ImproperlyConfigured, AuditKeyError) as exc:
        return KeyState(None, f"the development signing key {directory / DEV_KEY_FILE} is not usable ({exc})")


def export_file_name(table: Table, first: int, last: int) -> str:
    """The download's name: the table (its slug, made safe) and the version range."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", table.slug)[:100] or f"table-{table.pk}"
    return f"{slug}-audit-v{first}-v{last}.jsonl"


def _range(table: Table, first: int | None, last: int | None) -> tuple[int, int]:
    """The versions to export: `first`..`last` within those seen (default: all of them)."""
    span = SeenBlock.objects.filter(table=table).aggregate(lo=Min("first_version"), hi=Max("last_version"))
    lo, hi = span["lo"], span["hi"]
    if lo is None or hi is None:
        raise ServiceError("Nothing to export yet: no commit of this table has been synced.", "nothing_to_export", 409)
    a = lo if first is None else first
    b = hi if last is None else last
    if a > b or a < lo or b > hi:
        raise ServiceError(f"Versions {a}..{b} are not within the versions seen, {lo}..{hi}.", "invalid", 400)
    if b - a + 1 > MAX_VERSIONS:
        raise ServiceError(f"At most {MAX_VERSIONS} versions per export: export a smaller range.", "invalid", 400)
    return a, b


def _commit_row(seen: Seen, c: Commit | None, before: Commit | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "version": seen.version,
        "sha256": seen.sha256,
        "entry": seen.entry,
        "size": seen.size,
        "firstSeenAt": seen.first_seen_at.isoformat(),
        "stillMatches": seen.matches,
    }
    if c is None:
        return {**row, "operation": None, "commitInfo": None, "files": None}
    info = c.commit_info if isinstance(c.commit_info, dict) else {}
    files = None
    if c.num_files is not None:
        files = {"activeFiles": c.num_files, "activeBytes": c.size_bytes}
        if before is not None and before.num_files is not None and before.version == c.version - 1:
            files |= {
                "filesChange": c.num_files - before.num_files,
                "bytesChange": (c.size_bytes or 0) - (before.size_bytes or 0),
            }
    return {
        **row,
        "timestamp": c.timestamp,
        "timestampSource": c.timestamp_source,
        "inCommitTimestamp": c.in_commit_timestamp,
        "fileModificationTime": c.file_modification_time,
        "operation": c.operation or None,
        "commitInfo": {k: bounded(info[k]) for k in _INFO_KEYS if k in info},
        "files": files,
        "logExpired": c.log_expired,
    }


_INFO_KEYS = ("timestamp", "inCommitTimestamp", "operation", "operationParameters", "operationMetrics", "userId",
              "userName", "engineInfo", "isBlindAppend", "txnId", "readVersion")  # fmt: skip


def _approvals(table: Table, first: int, last: int) -> list[dict[str, Any]]:
    """Who requested, approved or rejected each restore that landed in the range or was decided
    on a head inside it."""
    out = []
    for r in (
        RestoreRequest.objects.filter(table=table).select_related("requested_by", "approver").order_by("created_at")
    ):
        landed = r.result_version is not None and first <= r.result_version <= last
        decided = r.decided_at is not None and r.plan_head_version is not None and first <= r.plan_head_version <= last
        if not (landed or decided):
            continue
        out.append(
            {
                "request": r.pk,
                "txnId": r.txn,
                "status": r.status,
                "targetVersion": r.resolved_version,
                "resultVersion": r.result_version,
                "reason": r.reason[:2000],
                "requestedBy": r.requested_by.get_username() if r.requested_by else None,
                "approver": r.approver.get_username() if r.approver else None,
                "approverComment": r.approver_comment[:2000],
                "createdAt": r.created_at.isoformat(),
                "decidedAt": r.decided_at.isoformat() if r.decided_at else None,
                "finishedAt": r.finished_at.isoformat() if r.finished_at else None,
            }
        )
    return out


@dataclass(frozen=True)
class AuditFile:
    """A signed export and the name it is downloaded under."""

    data: bytes
    name: str


def audit_export(table: Table, first: int | None = None, last: int | None = None, user: Any = None) -> bytes:
    """The signed export file of `table`'s versions `first`..`last` (default: all seen)."""
    return audit_export_file(table, first, last, user).data


def audit_export_file(table: Table, first: int | None = None, last: int | None = None, user: Any = None) -> AuditFile:
    """The signed export of `table`'s versions `first`..`last` (default: all seen) and its
    file name (the table and the range); ServiceError 503 audit_unavailable without a key."""
    state = signing_key()
    if state.key is None:
        raise ServiceError(f"Signed audit exports are unavailable: {state.reason}.", "audit_unavailable", 503)
    a, b = _range(table, first, last)
    seen = seen_commits(table, a, b)
    before = entry_before(table, a)
    commits = {c.version: c for c in Commit.objects.filter(table=table, version__gte=a - 1, version__lte=b)}
    rows = [_commit_row(s, commits.get(s.version), commits.get(s.version - 1)) for s in seen]
    who = user.get_username() if user is not None and getattr(user, "is_authenticated", False) else None
    inp = ExportInput(
        table={"name": table.name, "location": table.location, "id": table.pk},
        first=a,
        last=b,
        previous=before if before is not None else GENESIS,
        commits=rows,
        made_by="deltaweb",
        approvals=_approvals(table, a, b),
        checksums=_checksums(table, a, b),
        extra={"requestedBy": who},
    )
    return AuditFile(sign_export(make_export(inp), state.key), export_file_name(table, a, b))


def _checksums(table: Table, a: int, b: int) -> list[dict[str, Any]]:
    """The sync's checks of the range's checksum files, shaped as `delta verify` reports them."""
    rows = VersionChecksum.objects.filter(table=table, version__gte=a, version__lte=b).order_by("version")
    out = []
    for r in rows:
        check: dict[str, Any] = {"version": r.version, "ok": r.ok, "mismatches": r.mismatches}
        if r.error:
            check["error"] = r.error
        if not r.full:
            check["countsOnly"] = True
        out.append(check)
    return out
