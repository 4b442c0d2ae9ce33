"""Discovery and bulk registration: every Delta table under a prefix (a local directory or an
object-store location under the allowed roots), shown first as a preview, then registered
together. Tables registered already are shown as such and left alone; a name in use gets a
suffix. New tables are not synced here one by one: their first check is due at once, so the
probe's next tick syncs them in batches (tables.services.sync.probe).

The tables of an AWS Glue Data Catalog database are found the same way (`preview_glue`): its
Delta tables' storage locations, under the allowed roots like any other.

Used by the API (`/api/discover/`), the page (`/tables/discover/`) and `manage.py discover`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone
from django.utils.text import slugify

from tables.delta import errors as delta_errors
from tables.delta.discover import LOG_DIR, find_tables
from tables.delta.storage.api import Storage
from tables.delta.storage.backends import named_schemes
from tables.delta.storage.boundary import as_storage
from tables.models import DiscoverySource, Table
from tables.services import aws
from tables.services.access import roles
from tables.services.errors import ServiceError, from_delta, one_line
from tables.services.registration import allowed_path, not_allowed, object_location, register_table, shown

MAX_NAME = 200
READY_CHECKED = 500  # new tables whose log is looked at for a first commit (the page lists 500)
_COMMIT_NAME = re.compile(r"\d{20}\.(json|checkpoint(\.\d+\.\d+)?(\.[\w-]+)?\.parquet)")


@dataclass(frozen=True)
class Found:
    location: str
    name: str
    status: str  # "new", "registered" or "incomplete" (a log with no commit yet: being written)
    table: str | None = None  # the registered table's slug

    def as_dict(self) -> dict[str, Any]:
        return {"location": self.location, "name": self.name, "status": self.status, "table": self.table}


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


def _answer(source: dict[str, str], candidates: list[tuple[str, str]], **extra: Any) -> dict[str, Any]:
    """The preview of these (location, wanted name) candidates: new or registered, unique names."""
    locations = [loc for loc, _ in candidates]
    registered = {
        loc: (slug, name)
        for loc, slug, name in Table.objects.filter(location__in=locations).values_list("location", "slug", "name")
    }
    names = _free_names([(loc, name) for loc, name in candidates if loc not in registered])
    fresh = [loc for loc, _ in candidates if loc not in registered][:READY_CHECKED]
    unready = {loc for loc in fresh if not _has_commit(loc)}
    rows = [
        # a registered table by the name it was registered under, not its folder's
        Found(loc, registered[loc][1], "registered", registered[loc][0])
        if loc in registered
        else Found(loc, names.get(loc, name), "incomplete" if loc in unready else "new")
        for loc, name in candidates
    ]
    return {
        **source,
        "tables": [r.as_dict() for r in rows],
        "new": sum(r.status == "new" for r in rows),
        "registered": sum(r.status == "registered" for r in rows),
        "incomplete": sum(r.status == "incomplete" for r in rows),
        "truncated": "",
        **extra,
    }


def _has_commit(location: str) -> bool:
    """Whether the table's log holds a commit or a checkpoint yet (a writer creating it may have
    made `_delta_log/` only): the first such name of one listing; unreadable counts as none."""
    try:
        return any(_COMMIT_NAME.fullmatch(name) for name in as_storage(location).list_names(LOG_DIR))
    except (OSError, delta_errors.DeltaError):
        return False


def preview(prefix: str, user) -> dict[str, Any]:
    """What registering everything under `prefix` would do, without doing it."""
    _check_role(user)
    canonical, storage = _prefix(prefix)
    try:
        found = find_tables(storage)
    except delta_errors.PathOutsideRootsError as exc:
        raise not_allowed(canonical) from exc
    except delta_errors.DeltaError as exc:
        raise from_delta(exc) from exc
    candidates = [(_join(canonical, key), _name_for(canonical, key)) for key in found.tables]
    return _answer({"prefix": canonical}, candidates, directoriesListed=found.dirs_listed, truncated=found.truncated)


def _is_delta(table: dict[str, Any]) -> bool:
    params = {k.lower(): str(v).lower() for k, v in (table.get("Parameters") or {}).items()}
    return params.get("table_type") == "delta" or params.get("spark.sql.sources.provider") == "delta"


def preview_glue(database: str, user) -> dict[str, Any]:
    """The Delta tables of an AWS Glue Data Catalog database (their storage locations; the
    catalog's other tables are left out), as `preview` gives a prefix's."""
    _check_role(user)
    name = (database or "").strip()
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
    return _answer({"glueDatabase": name}, candidates)


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


def _free_names(wanted: list[tuple[str, str]]) -> dict[str, str]:
    """A name per location, unique among themselves and against registered tables (by name and slug)."""
    taken_names = set(Table.objects.values_list("name", flat=True))
    taken_slugs = set(Table.objects.values_list("slug", flat=True))
    out: dict[str, str] = {}
    for location, name in wanted:
        candidate, n = name, 1
        while candidate in taken_names or slugify(candidate)[:200] in taken_slugs or not slugify(candidate):
            n += 1
            candidate = f"{name[: MAX_NAME - 8]}-{n}"
        taken_names.add(candidate)
        taken_slugs.add(slugify(candidate)[:200])
        out[location] = candidate
    return out


def register_found(
    prefix: str,
    user,
    only: list[str] | None = None,
    glue_database: str = "",
    source: DiscoverySource | None = None,
    plan: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Register the new tables under `prefix` (or of the Glue database), or only the locations
    in `only`; their first sync follows on the probe's next tick. With `source`, they are that
    scheduled source's tables."""
    if plan is None:
        plan = preview_glue(glue_database, user) if glue_database else preview(prefix, user)
    chosen = set(only) if only is not None else None
    registered, skipped = [], []
    for row in plan["tables"]:
        if row["status"] != "new" or (chosen is not None and row["location"] not in chosen):
            continue
        try:
            table = register_table(row["name"], row["location"], user=user)
        except ServiceError as exc:
            skipped.append({"location": row["location"], "code": exc.code, "message": exc.message})
            continue
        Table.objects.filter(pk=table.pk).update(next_check_at=timezone.now(), source=source)
        registered.append({"location": table.location, "name": table.name, "table": table.slug})
    source = {"glueDatabase": plan["glueDatabase"]} if glue_database else {"prefix": plan["prefix"]}
    return {**source, "registered": registered, "skipped": skipped, "truncated": plan["truncated"]}


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
    (and those found again not), unless the search stopped early."""
    now = now or timezone.now()
    try:
        plan = preview_glue(source.glue_database, None) if source.glue_database else preview(source.prefix, None)
        done = register_found(source.prefix, None, glue_database=source.glue_database, source=source, plan=plan)
    except ServiceError as exc:
        result: dict[str, Any] = {"error": exc.message}
    else:
        found = {r["location"] for r in plan["tables"]}
        mine = Table.objects.filter(source=source)
        vanished = (
            0
            if plan["truncated"]
            else mine.exclude(location__in=found).filter(vanished_at__isnull=True).update(vanished_at=now)
        )
        back = mine.filter(location__in=found, vanished_at__isnull=False).update(vanished_at=None)
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
