"""Discovery and bulk registration: every Delta table under a prefix (a local directory or an
object-store location under the allowed roots), shown first as a preview, then registered
together. Tables registered already are shown as such and left alone; a name in use gets a
suffix. A table whose log cannot be read now (its `_delta_log` unreadable, a log outside the
roots, a damaged commit or checkpoint, a reader feature this server cannot read) is not offered
as new: it is listed apart as "unreadable" with why, and registering skips it saying so. New tables are not synced here one by one: their first check is due at once, so the
probe's next tick syncs them in batches (tables.services.sync.probe).

The tables of an AWS Glue Data Catalog database are found the same way (`preview_glue`): its
Delta tables' storage locations, under the allowed roots like any other.

A prefix is walked as a stream (tables.delta.discover.walk_tables): each chunk of tables found
is looked up in the database and counted, a preview keeps only its first rows (a page: the
counts, "found" and "more" cover the rest) and registering registers each as it comes, so a
hundred thousand tables under a prefix are never held at once.

Used by the API (`/api/discover/`), the page (`/tables/discover/`) and `manage.py discover`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone
from django.utils.text import slugify

from tables.delta import errors as delta_errors
from tables.delta.discover import LOG_DIR, Walk, walk_tables
from tables.delta.log.listing import list_log
from tables.delta.snapshot.state import load_table_config
from tables.delta.storage.api import Storage
from tables.delta.storage.backends import named_schemes
from tables.delta.storage.opening import as_storage
from tables.models import DiscoverySource, Table
from tables.services.access import roles
from tables.services.catalog import aws
from tables.services.catalog.registration import allowed_path, not_allowed, object_location, register_table, shown
from tables.services.errors import ServiceError, from_delta, one_line

MAX_NAME = 200
READY_CHECKED = 500  # new tables whose log is read (a commit? readable?) first (the page lists 500)
PREVIEW_ROWS = 500  # tables a preview lists by default; its counts cover every table found
CHUNK = 500  # tables looked up in the database at once as the walk finds them
_COMMIT_NAME = re.compile(r"\d{20}\.(json|checkpoint(\.\d+\.\d+)?(\.[\w-]+)?\.parquet)")


@dataclass(frozen=True)
class Found:
    location: str
    name: str
    # "new", "registered", "incomplete" (a log with no commit yet: being written) or
    # "unreadable" (its log cannot be read now: `reason` says why; not offered)
    status: str
    table: str | None = None  # the registered table's slug
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        out = {"location": self.location, "name": self.name, "status": self.status, "table": self.table}
        if self.reason:
            out["reason"] = self.reason
        return out


def _prefix(prefix: str) -> tuple[str, Storage]:
    """The prefix in canonical form, and its storage, if it lies under the allowed roots."""
    text = (prefix or "").strip()
    if not text:
        raise ServiceError(f"Give a prefix to look under (a directory, or {named_schemes()}).", "invalid_location")
    uri = object_location(text)
    if uri is not None:
        return uri, as_storage(uri)
    real = allowed_path(text)
    if not real.is_dir():
        raise ServiceError(f"{shown(text)} does not exist or is not a directory.", "invalid_location")
    return str(real), as_storage(str(real))


def _join(prefix: str, key: str) -> str:
    return f"{prefix.rstrip('/')}/{key}" if key else prefix.rstrip("/")


def _name_for(prefix: str, key: str) -> str:
    raw = key or prefix.rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"[^\w.-]+", "_", raw.replace("/", "."))[:MAX_NAME] or "table"


def _check_role(user) -> None:
    if user is not None and not roles.can_register(user):  # None: the server's operator (manage.py)
        raise ServiceError("Discovering tables needs the analyst or approver role.", "permission_denied", 403)


class _Preview:
    """A preview built as the candidates stream in: the counts cover every one, the rows the
    first `limit` (None: all)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.rows: list[Found] = []
        self.counts = {"new": 0, "registered": 0, "incomplete": 0, "unreadable": 0}
        self.ready = _readiness()
        self.given: set[str] = set()  # names handed out to shown rows, so two new ones differ

    def add(self, candidates: list[tuple[str, str]]) -> None:
        registered = _registered([loc for loc, _ in candidates])
        for loc, name in candidates:
            row: Found | None = None
            reason = ""
            if loc in registered:
                # a registered table by the name it was registered under, not its folder's
                row = Found(loc, registered[loc][1], "registered", registered[loc][0])
                status = "registered"
            else:
                status, reason = self.ready(loc)
            self.counts[status] += 1
            if self.limit is None or len(self.rows) < self.limit:
                self.rows.append(row or Found(loc, _free_name(name, self.given), status, reason=reason))

    def answer(self, source: dict[str, Any], **extra: Any) -> dict[str, Any]:
        found = sum(self.counts.values())
        return {
            **source,
            "tables": [r.as_dict() for r in self.rows],
            **self.counts,
            "found": found,
            "more": found - len(self.rows),
            "truncated": "",
            **extra,
        }


def _registered(locations: list[str]) -> dict[str, tuple[str, str]]:
    """The registered tables among these locations: location -> (slug, name)."""
    rows = Table.objects.filter(location__in=locations).values_list("location", "slug", "name")
    return {loc: (slug, name) for loc, slug, name in rows}


def _readiness() -> Callable[[str], tuple[str, str]]:
    """Each new table's state in turn, (status, why): the first READY_CHECKED have their log
    read (`_state`; a preview lists 500), the rest are taken as new."""
    checked = 0

    def ready(location: str) -> tuple[str, str]:
        nonlocal checked
        checked += 1
        return ("new", "") if checked > READY_CHECKED else _state(location)

    return ready


def _state(location: str) -> tuple[str, str]:
    """("new", ""), ("incomplete", "") while its log holds no commit or checkpoint yet (a writer
    creating it may have made `_delta_log/` only), or ("unreadable", why) when the log cannot
    be listed or its latest protocol and metadata cannot be read, as a sync would need them."""
    try:
        storage = as_storage(location)
        if not any(_COMMIT_NAME.fullmatch(name) for name in storage.list_names(LOG_DIR)):
            return "incomplete", ""
        load_table_config(storage, list_log(storage))
    except delta_errors.PathOutsideRootsError:
        return "unreadable", "its log lies outside the allowed roots (a symbolic link out of them)"
    except PermissionError:
        return "unreadable", "the server may not read its _delta_log (permission denied)"
    except (OSError, ValueError, delta_errors.DeltaError) as exc:
        return "unreadable", f"its log cannot be read: {one_line(exc, 300)}"
    return "new", ""


def _walk(canonical: str, storage: Storage, walk: Walk) -> Iterator[list[tuple[str, str]]]:
    """The tables under the prefix (`_prefix`'s answer) as (location, wanted name), in chunks as
    the walk finds them."""
    chunk: list[tuple[str, str]] = []
    try:
        for key in walk_tables(storage, walk):
            chunk.append((_join(canonical, key), _name_for(canonical, key)))
            if len(chunk) >= CHUNK:
                yield chunk
                chunk = []
    except delta_errors.PathOutsideRootsError as exc:
        raise not_allowed(canonical) from exc
    except delta_errors.DeltaError as exc:
        raise from_delta(exc) from exc
    if chunk:
        yield chunk


def _chunks(candidates: list[tuple[str, str]]) -> Iterator[list[tuple[str, str]]]:
    for i in range(0, len(candidates), CHUNK):
        yield candidates[i : i + CHUNK]


def preview(prefix: str, user, limit: int | None = PREVIEW_ROWS) -> dict[str, Any]:
    """What registering everything under `prefix` would do, without doing it: the first
    `limit` tables found and the counts of all of them, walked without keeping the rest."""
    _check_role(user)
    canonical, storage = _prefix(prefix)
    walk, out = Walk(), _Preview(limit)
    for chunk in _walk(canonical, storage, walk):
        out.add(chunk)
    return out.answer({"prefix": canonical}, directoriesListed=walk.dirs_listed, truncated=walk.truncated)


def _is_delta(table: dict[str, Any]) -> bool:
    params = {k.lower(): str(v).lower() for k, v in (table.get("Parameters") or {}).items()}
    return params.get("table_type") == "delta" or params.get("spark.sql.sources.provider") == "delta"


def preview_glue(database: str, user, limit: int | None = PREVIEW_ROWS) -> dict[str, Any]:
    """The Delta tables of an AWS Glue Data Catalog database (their storage locations; the
    catalog's other tables are left out), as `preview` gives a prefix's."""
    _check_role(user)
    name, out = (database or "").strip(), _Preview(limit)
    for chunk in _chunks(_glue_candidates(name)):
        out.add(chunk)
    return out.answer({"glueDatabase": name})


def _glue_candidates(database: str) -> list[tuple[str, str]]:
    """The Glue database's Delta tables as (location, wanted name)."""
    name = database
    if not re.fullmatch(r"[\w.-]{1,255}", name):
        raise ServiceError("Give a Glue database name (letters, digits, _ . -).", "invalid")
    try:
        tables = glue_tables(name)
    except ServiceError:
        raise
    except Exception as exc:  # botocore's errors: unknown database, no access, no endpoint
        raise ServiceError(
            f"The Glue catalog did not list database '{name}': {one_line(exc, 300)}", "glue_error", 502
        ) from exc
    candidates = []
    for t in tables:
        location = (t.get("StorageDescriptor") or {}).get("Location") or ""
        canonical = object_location(location) if location else None
        if _is_delta(t) and canonical:
            candidates.append((canonical.rstrip("/"), f"{name}.{t['Name']}"[:MAX_NAME]))
    return candidates


def glue_tables(database: str) -> list[dict[str, Any]]:
    """Every table of a Glue database, all pages (AWS_* environment: region and keys; the
    endpoint DELTAWEB_GLUE_ENDPOINT_URL or AWS's own, never the object store's)."""
    from botocore.exceptions import NoRegionError
    from django.conf import settings

    region = settings.DELTAWEB_GLUE_REGION or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    try:
        client = aws.client("glue", region, settings.DELTAWEB_GLUE_ENDPOINT_URL)
    except NoRegionError as exc:
        # nothing was asked of AWS yet: the catalog did not fail (not a 502), the setting is
        # missing, and the message says which one (boto3 also reads an AWS config file)
        raise ServiceError(
            "No AWS region for the Glue catalog: set DELTAWEB_GLUE_REGION (or AWS_REGION) on the server.",
            "glue_region_missing",
            400,
        ) from exc
    out: list[dict[str, Any]] = []
    for page in client.get_paginator("get_tables").paginate(DatabaseName=database):
        out += page.get("TableList", [])
    return out


def _free_name(name: str, given: set[str]) -> str:
    """A name unique against registered tables (by name and slug) and those in `given`, which
    it joins (a preview's names; registering instead finds each new one in the database)."""
    candidate, n = name, 1
    while (
        candidate in given
        or not slugify(candidate)
        or Table.objects.filter(Q(name=candidate) | Q(slug=slugify(candidate)[:200])).exists()
    ):
        n += 1
        candidate = f"{name[: MAX_NAME - 8]}-{n}"
    given.add(candidate)
    return candidate


def _new_ones(
    stream: Iterator[list[tuple[str, str]]], seen: Callable[[list[str]], None] | None
) -> Iterator[tuple[str, str, str]]:
    """The tables of a stream of candidates not registered yet, as (location, name, why not):
    why is "" for a new one, the reason for an unreadable one (the first READY_CHECKED are read,
    as a preview does); those still being written are left out. Each chunk's locations go to
    `seen`."""
    ready = _readiness()
    for chunk in stream:
        if seen is not None:
            seen([loc for loc, _ in chunk])
        registered = _registered([loc for loc, _ in chunk])
        for loc, name in chunk:
            if loc in registered:
                continue
            status, reason = ready(loc)
            if status != "incomplete":
                yield loc, name, reason


def register_found(
    prefix: str,
    user,
    only: list[str] | None = None,
    glue_database: str = "",
    source: DiscoverySource | None = None,
    seen: Callable[[list[str]], None] | None = None,
) -> dict[str, Any]:
    """Register the new tables under `prefix` (or of the Glue database), or only the locations
    in `only`, as the walk finds them; their first sync follows on the probe's next tick. With
    `source`, they are that scheduled source's tables; `seen` is told every location found."""
    _check_role(user)
    walk = Walk()
    if glue_database:
        where: dict[str, str] = {"glueDatabase": glue_database.strip()}
        stream = _chunks(_glue_candidates(where["glueDatabase"]))
    else:
        canonical, storage = _prefix(prefix)
        where = {"prefix": canonical}
        stream = _walk(canonical, storage, walk)
    chosen = set(only) if only is not None else None
    registered, skipped = [], []
    for location, name, unreadable in _new_ones(stream, seen):
        if chosen is not None and location not in chosen:
            continue
        if unreadable:
            skipped.append(
                {"location": location, "code": "unreadable", "message": f"cannot be registered: {unreadable}"}
            )
            continue
        try:
            table = register_table(_free_name(name, set()), location, user=user)
        except ServiceError as exc:
            skipped.append({"location": location, "code": exc.code, "message": exc.message})
            continue
        Table.objects.filter(pk=table.pk).update(next_check_at=timezone.now(), source=source)
        registered.append({"location": table.location, "name": table.name, "table": table.slug})
    return {**where, "registered": registered, "skipped": skipped, "truncated": walk.truncated}


# --- discovery on a schedule ---------------------------------------------------------------------


def schedule(user, prefix: str = "", glue_database: str = "", every_hours: int = 24) -> DiscoverySource:
    """Look in this prefix (or Glue database) again every `every_hours`: a row, run by the beat."""
    _check_role(user)
    if bool(prefix) == bool(glue_database):
        raise ServiceError("Give a prefix or a Glue database (one of them).", "invalid")
    if not 1 <= every_hours <= 24 * 30:
        raise ServiceError("Look again every 1 to 720 hours.", "invalid")
    where = {"glue_database": glue_database} if glue_database else {"prefix": _prefix(prefix)[0]}
    source = DiscoverySource.objects.filter(**where).first()
    if source is None:
        source = DiscoverySource.objects.create(
            **where,
            every_hours=every_hours,
            next_run_at=timezone.now() + timedelta(hours=every_hours),
            created_by=user if getattr(user, "pk", None) else None,
        )
    return source


def rerun(source: DiscoverySource, now: datetime | None = None) -> dict[str, Any]:
    """Look again: register what is new, mark the source's tables it no longer finds vanished
    (and those found again not), unless the search stopped early. What is held is the source's
    own tables not found yet, never the whole walk."""
    now = now or timezone.now()
    mine = Table.objects.filter(source=source)
    missing = set(mine.values_list("location", flat=True))
    back = 0

    def seen(locations: list[str]) -> None:
        nonlocal back
        missing.difference_update(locations)
        back += mine.filter(location__in=locations, vanished_at__isnull=False).update(vanished_at=None)

    try:
        done = register_found(source.prefix, None, glue_database=source.glue_database, source=source, seen=seen)
    except ServiceError as exc:
        result: dict[str, Any] = {"error": exc.message}
    else:
        vanished, left = 0, sorted(missing)
        for i in range(0, 0 if done["truncated"] else len(left), CHUNK):
            gone = mine.filter(location__in=left[i : i + CHUNK], vanished_at__isnull=True)
            vanished += gone.update(vanished_at=now)
        result = {
            "registered": len(done["registered"]),
            "skipped": len(done["skipped"]),
            "vanished": vanished,
            "back": back,
        }
    DiscoverySource.objects.filter(pk=source.pk).update(
        last_run_at=now, last_result=result, next_run_at=now + timedelta(hours=source.every_hours)
    )
    return result


def rerun_due(now: datetime | None = None) -> int:
    """The beat's: every source whose time has come, looked in again."""
    now = now or timezone.now()
    due = list(DiscoverySource.objects.filter(next_run_at__lte=now))
    for source in due:
        rerun(source, now)
    return len(due)
