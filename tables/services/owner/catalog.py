"""deltaweb as a Unity Catalog for the catalogManaged tables it owns: the use cases behind
the Delta API (tables.api.catalog.views), in UC's vocabulary and error model.

- staging tables and createTable: a table id and a location under the storage root, then the
  client's `0.json` there is registered (a Table and its ManagedTable, active from version 0);
- loadTable: the table's metadata (from the commit at its last metadata version: one file,
  not the log), the ratified commits not yet published, the latest version, the etag;
- updateTable: `add-commit` (the DatabaseOwner ratifies the client's staged file),
  `set-latest-backfilled-version` (the client published), `assert-table-uuid`/`assert-etag`;
- the older `/delta/preview/commits` commit and getCommits, by table id and location.
Policy stays deltaweb's: the owner refuses a commit on a frozen table or a RESTORE without an
approved request, records the refusal, and the API answers UC's PermissionDeniedException.
"""

from __future__ import annotations

import base64
import re
import uuid
from pathlib import Path
from typing import Any

import orjson
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils.text import slugify

from tables.delta import errors as delta_errors
from tables.delta.log.listing import STAGED_COMMITS_DIR, commit_name, list_log
from tables.delta.managed.owner import parse_commit
from tables.delta.snapshot.state import load_table_config
from tables.delta.storage.api import is_uri
from tables.delta.storage.opening import open_storage
from tables.delta.write.catalog import FEATURE, TABLE_ID_KEY
from tables.models import ManagedTable, OwnerState, RatifiedCommit, Table, UcStagingTable
from tables.services.access import roles
from tables.services.access.hot_queries import managed_row
from tables.services.catalog.registration import check_new_location, make_new_table_dir, validate_location
from tables.services.errors import ServiceError
from tables.services.owner.access import database_owner
from tables.services.owner.commits import UcError, add_commit, bad, commit_fields, int_param, set_backfilled

PROTOCOL_VERSION = "1.0"
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,254}$")

ENDPOINTS = [
    "POST /v1/catalogs/{catalog}/schemas/{schema}/staging-tables",
    "POST /v1/catalogs/{catalog}/schemas/{schema}/tables",
    "GET /v1/catalogs/{catalog}/schemas/{schema}/tables/{table}",
    "POST /v1/catalogs/{catalog}/schemas/{schema}/tables/{table}",
    "HEAD /v1/catalogs/{catalog}/schemas/{schema}/tables/{table}",
    "GET /v1/catalogs/{catalog}/schemas/{schema}/tables/{table}/credentials",
    "GET /v1/staging-tables/{table_id}/credentials",
]

REQUIRED_PROTOCOL = {
    "min-reader-version": 3,
    "min-writer-version": 7,
    "reader-features": [FEATURE],
    "writer-features": [FEATURE, "inCommitTimestamp"],
}


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise bad(f"{what} must be 1-255 letters, digits, '_' or '-'")
    return value


def _can_write(user) -> None:
    if not roles.can_write_managed(user):
        raise UcError("PermissionDeniedException", 403, "Writing catalog tables needs the writer role (or staff).")


def _can_read(user) -> None:
    if not roles.can_browse(user):
        raise UcError("PermissionDeniedException", 403, "Reading catalog tables needs a deltaweb role.")


# --- configuration and staging ------------------------------------------------------------------


def get_config(catalog: str | None, protocol_versions: str | None) -> dict[str, Any]:
    """The negotiated protocol version (deltaweb speaks 1.0) and the endpoints it serves."""
    if not catalog or not protocol_versions:
        raise bad("both 'catalog' and 'protocol-versions' are required")
    _name(catalog, "catalog")
    majors = []
    for part in protocol_versions.split(","):
        m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", part)
        if m is None:
            raise bad(f"'{part.strip()[:50]}' is not a protocol version (major.minor)")
        majors.append(int(m[1]))
    if 1 not in majors:
        raise bad(f"no mutually supported protocol version; this server supports {PROTOCOL_VERSION}")
    return {"endpoints": ENDPOINTS, "protocol-version": PROTOCOL_VERSION}


def storage_root() -> str:
    """Where staging tables are allocated: DELTAWEB_UC_STORAGE_ROOT (a path or an object-store
    location), else `__unitystorage/tables` under the first allowed root."""
    from tables.services.catalog.registration import allowed_roots

    configured = getattr(settings, "DELTAWEB_UC_STORAGE_ROOT", "") or ""
    if configured:
        return check_new_location(configured)
    roots = allowed_roots()
    if not roots:
        raise UcError("InternalServerErrorException", 500, "No allowed root to allocate tables under.")
    return str(roots[0] / "__unitystorage" / "tables")


def _uri(location: str) -> str:
    """A stored location as UC names it: a file:// URI for a path, an object store's as it is."""
    return location if is_uri(location) else Path(location).as_uri()


def _local(location: str) -> str:
    """A location as a client echoes it (file:// URI, path or object-store URI), as deltaweb stores it."""
    text = (location or "").strip()
    if text.startswith("file://"):
        text = text[len("file://") :]
        text = text if text.startswith("/") else "/" + text.split("/", 1)[-1]
    return text.rstrip("/")


def create_staging_table(user, catalog: str, schema: str, body: dict[str, Any]) -> dict[str, Any]:
    """Allocate a table id and a location; the client writes `0.json` there, then createTable."""
    _can_write(user)
    catalog, schema = _name(catalog, "catalog"), _name(schema, "schema")
    name = _name(body.get("name"), "name")
    if ManagedTable.objects.filter(uc_catalog=catalog, uc_schema=schema, uc_name=name).exists():
        raise UcError("AlreadyExistsException", 409, f"Table '{catalog}.{schema}.{name}' already exists")
    table_id = uuid.uuid4()
    root = make_new_table_dir(f"{storage_root().rstrip('/')}/{table_id}")
    UcStagingTable.objects.create(
        table_uuid=table_id, catalog=catalog, schema=schema, name=name, location=root, created_by=user
    )
    return {
        "table-id": str(table_id),
        "table-type": "MANAGED",
        "location": _uri(root),
        "storage-credentials": [],  # a local location: the server's own file system, no credentials to vend
        "required-protocol": REQUIRED_PROTOCOL,
        "suggested-protocol": {"reader-features": [], "writer-features": ["domainMetadata"]},
        "required-properties": {"delta.enableInCommitTimestamps": "true", TABLE_ID_KEY: str(table_id)},
        "suggested-properties": {},
    }


def staging_credentials(user, table_id: str) -> dict[str, Any]:
    staging = UcStagingTable.objects.filter(table_uuid=_uuid(table_id)).first()
    if staging is None:
        raise UcError("NoSuchTableException", 404, f"No staging table with id {table_id[:64]}")
    if staging.created_by_id != getattr(user, "pk", None):
        raise UcError("PermissionDeniedException", 403, "Only the creator of a staging table may write it.")
    return {"storage-credentials": []}


def _uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(text))
    except ValueError:
        return None


def create_table(user, catalog: str, schema: str, body: dict[str, Any]) -> dict[str, Any]:
    """Register the staging table at `location` under its name, from the `0.json` its creator wrote."""
    _can_write(user)
    catalog, schema = _name(catalog, "catalog"), _name(schema, "schema")
    name = _name(body.get("name"), "name")
    if body.get("table-type") != "MANAGED":
        raise bad("'table-type' must be MANAGED (deltaweb serves catalog-managed tables)")
    location = body.get("location")
    if not isinstance(location, str):
        raise bad("'location' is required")
    staging = UcStagingTable.objects.filter(location=_local(location)).first()
    if staging is None:
        raise UcError("NoSuchTableException", 404, f"No staging table at {location[:300]}")
    if staging.created_by_id != getattr(user, "pk", None):
        raise UcError("PermissionDeniedException", 403, "Only the creator of a staging table may finalize it.")
    if staging.finalized:
        raise bad(f"The staging table {staging.table_uuid} was finalized already")
    props = body.get("properties")
    if not isinstance(props, dict) or props.get(TABLE_ID_KEY) != str(staging.table_uuid):
        raise bad(f"'properties' must carry {TABLE_ID_KEY} = {staging.table_uuid}")
    protocol = body.get("protocol") or {}
    for key in ("reader-features", "writer-features"):
        missing = set(REQUIRED_PROTOCOL[key]) - set(protocol.get(key) or ())
        if missing:
            raise bad(f"protocol {key} lacks {', '.join(sorted(missing))}")
    if ManagedTable.objects.filter(uc_catalog=catalog, uc_schema=schema, uc_name=name).exists():
        raise UcError("AlreadyExistsException", 409, f"Table '{catalog}.{schema}.{name}' already exists")
    try:
        path = validate_location(staging.location)
        storage = open_storage(path)
        first = parse_commit(storage.read(commit_name(0)))
    except (ServiceError, FileNotFoundError, ValueError, delta_errors.DeltaError) as exc:
        raise bad(f"{commit_name(0)} at {location[:300]} is missing or not a commit: {exc}") from exc
    written = first.protocol or {}
    config = (first.metadata or {}).get("configuration") or {}
    if FEATURE not in (written.get("readerFeatures") or ()) or config.get(TABLE_ID_KEY) != str(staging.table_uuid):
        raise bad(f"{commit_name(0)} does not declare {FEATURE} and {TABLE_ID_KEY} = {staging.table_uuid}")
    full = f"{catalog}.{schema}.{name}"
    try:
        with transaction.atomic():
            if UcStagingTable.objects.filter(pk=staging.pk, finalized=False).update(finalized=True) != 1:
                raise bad(f"The staging table {staging.table_uuid} was finalized already")
            table = Table.objects.create(name=full, slug=slugify(full)[:200], location=path, created_by=user)
            ManagedTable.objects.create(
                table=table,
                owner_table_id=str(staging.table_uuid),
                feature=FEATURE,
                state=OwnerState.ACTIVE,
                latest_version=0,
                backfilled_version=0,
                latest_ict=first.in_commit_timestamp,
                uc_catalog=catalog,
                uc_schema=schema,
                uc_name=name,
            )
    except IntegrityError as exc:
        raise UcError("AlreadyExistsException", 409, f"Table '{full}' already exists") from exc
    return load_table(user, catalog, schema, name)


# --- loading ------------------------------------------------------------------------------------


def find(catalog: str, schema: str, name: str) -> ManagedTable:
    mt = managed_row(uc_name=(catalog, schema, name))
    if mt is None:
        raise UcError("NoSuchTableException", 404, f"Table '{catalog}.{schema}.{name}' does not exist")
    return mt


def etag(mt: ManagedTable) -> str:
    """Opaque; moves only when a commit changes metadata or protocol (not on data commits)."""
    raw = f"{mt.owner_table_id}:{mt.metadata_version}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _hyphenated(value: Any) -> Any:
    """A Delta schema (metaData.schemaString) in UC's DeltaStructType shape (hyphenated keys)."""
    if isinstance(value, dict):
        return {re.sub(r"([a-z])([A-Z])", r"\1-\2", k).lower(): _hyphenated(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_hyphenated(v) for v in value]
    return value


def _metadata_and_protocol(mt: ManagedTable) -> tuple[dict[str, Any], dict[str, Any]]:
    """metaData and protocol as of the last version that changed them: one commit file read
    (the ratified copy while unpublished); the log's table config only when that commit
    changed just one of the two."""
    storage = open_storage(mt.table.location)
    v = mt.metadata_version
    row = RatifiedCommit.objects.filter(table_id=mt.table_id, version=v).values_list("path", flat=True).first()
    parsed = parse_commit(storage.read(row or commit_name(v)))
    if parsed.metadata is not None and parsed.protocol is not None:
        return parsed.metadata, parsed.protocol
    cfg = load_table_config(storage, list_log(storage), owner=database_owner())
    return cfg.metadata.to_dict(), cfg.protocol.to_dict()


def _properties(metadata: dict[str, Any], protocol: dict[str, Any], mt: ManagedTable) -> dict[str, str]:
    props = {str(k): str(v) for k, v in (metadata.get("configuration") or {}).items()}
    props["delta.minReaderVersion"] = str(protocol.get("minReaderVersion"))
    props["delta.minWriterVersion"] = str(protocol.get("minWriterVersion"))
    for f in {*(protocol.get("readerFeatures") or ()), *(protocol.get("writerFeatures") or ())}:
        props[f"delta.feature.{f}"] = "supported"
    props["delta.lastUpdateVersion"] = str(mt.metadata_version)
    return props


def commit_json(r: RatifiedCommit) -> dict[str, Any]:
    return {
        "version": r.version,
        "timestamp": r.in_commit_timestamp or r.modification_time,
        "file-name": r.path.rpartition("/")[2],
        "file-size": r.size,
        "file-modification-timestamp": r.modification_time,
    }


def table_response(mt: ManagedTable) -> dict[str, Any]:
    """loadTable's answer from one consistent read of the owner state."""
    metadata, protocol = _metadata_and_protocol(mt)
    schema = metadata.get("schemaString") or "{}"
    rows = RatifiedCommit.objects.filter(
        table_id=mt.table_id, backfilled=False, version__gt=mt.backfilled_version, version__lte=mt.latest_version
    ).order_by("-version")
    created = int(mt.created_at.timestamp() * 1000)
    return {
        "metadata": {
            "etag": etag(mt),
            "table-type": "MANAGED",
            "table-uuid": mt.owner_table_id,
            "location": _uri(mt.table.location),
            "created-time": created,
            "updated-time": int(mt.updated_at.timestamp() * 1000),
            "columns": _hyphenated(orjson.loads(schema)),
            "partition-columns": list(metadata.get("partitionColumns") or []),
            "properties": _properties(metadata, protocol, mt),
            "last-commit-version": mt.metadata_version,
            "last-commit-timestamp-ms": metadata.get("createdTime") or created,
        },
        "commits": [commit_json(r) for r in rows],
        "latest-table-version": mt.latest_version,
    }


def load_table(user, catalog: str, schema: str, name: str) -> dict[str, Any]:
    _can_read(user)
    return table_response(find(catalog, schema, name))


def table_exists(user, catalog: str, schema: str, name: str) -> None:
    """tableExists (HEAD): NoSuchTableException when missing; reading rights as loadTable, so a
    token without a deltaweb role cannot probe which names exist."""
    _can_read(user)
    find(catalog, schema, name)


def table_credentials(user, catalog: str, schema: str, name: str, operation: str | None) -> dict[str, Any]:
    if operation not in ("READ", "READ_WRITE"):
        raise bad("'operation' must be READ or READ_WRITE")
    (_can_write if operation == "READ_WRITE" else _can_read)(user)
    find(catalog, schema, name)
    return {"storage-credentials": []}


# --- committing ---------------------------------------------------------------------------------

_ACTIONS = {
    "add-commit",
    "set-latest-backfilled-version",
    "set-properties",
    "remove-properties",
    "set-protocol",
    "set-columns",
    "set-partition-columns",
    "set-table-comment",
    "set-domain-metadata",
    "remove-domain-metadata",
}


def update_table(user, catalog: str, schema: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """updateTable: requirements, then add-commit, then set-latest-backfilled-version."""
    _can_write(user)
    mt = find(catalog, schema, name)
    requirements, updates = body.get("requirements"), body.get("updates")
    if not isinstance(requirements, list) or not isinstance(updates, list) or not updates:
        raise bad("'requirements' and a non-empty 'updates' list are required")
    reqs: dict[str, dict] = {}
    for r in requirements:
        kind = r.get("type") if isinstance(r, dict) else None
        if kind not in ("assert-table-uuid", "assert-etag") or kind in reqs:
            raise bad(f"requirement {str(kind)[:50]!r} is unknown or repeated")
        reqs[kind] = r
    acts: dict[str, dict] = {}
    for u in updates:
        kind = u.get("action") if isinstance(u, dict) else None
        if kind not in _ACTIONS or kind in acts:
            raise bad(f"update action {str(kind)[:50]!r} is unknown or repeated")
        acts[kind] = u
    if "assert-table-uuid" not in reqs:
        raise bad("an assert-table-uuid requirement is required")
    if reqs["assert-table-uuid"].get("uuid") != mt.owner_table_id:
        raise UcError(
            "UpdateRequirementConflictException",
            409,
            f"The table's uuid is not {str(reqs['assert-table-uuid'].get('uuid'))[:64]}",
        )
    etag_version = None
    if "assert-etag" in reqs:
        if reqs["assert-etag"].get("etag") != etag(mt):
            raise UcError("UpdateRequirementConflictException", 409, "The etag is stale; reload the table")
        etag_version = mt.metadata_version
    mirrored = set(acts) - {"add-commit", "set-latest-backfilled-version", "set-table-comment"}
    if mirrored and "add-commit" not in acts:
        raise bad(f"{', '.join(sorted(mirrored))} must come with the add-commit whose staged file makes the change")
    if "set-table-comment" in acts and "add-commit" not in acts:
        raise bad("deltaweb keeps the comment in the table's metadata: change it with a commit")
    if "add-commit" in acts:
        add_commit(mt, user, commit_fields(acts["add-commit"].get("commit")), etag_version=etag_version)
    if "set-latest-backfilled-version" in acts:
        set_backfilled(mt, int_param(acts["set-latest-backfilled-version"], "latest-published-version"))
    mt.refresh_from_db()
    return table_response(mt)


# --- the older preview commits API (unitycatalog-client's DeltaCommitsApi) -------------------------


def _by_id(body: dict[str, Any]) -> ManagedTable:
    table_id, uri = body.get("table_id"), body.get("table_uri")
    if not isinstance(table_id, str) or not isinstance(uri, str):
        raise bad("'table_id' and 'table_uri' are required")
    mt = managed_row(owner_table_id=table_id)
    if mt is None or mt.feature != FEATURE:
        raise UcError("NoSuchTableException", 404, f"No catalog-managed table with id {table_id[:64]}")
    if _local(uri) != mt.table.location.rstrip("/"):
        raise bad(f"table_uri {uri[:300]} is not the location of table {table_id[:64]}")
    return mt


def preview_commit(user, body: dict[str, Any]) -> dict[str, Any]:
    """POST /delta/preview/commits: a commit and/or the latest backfilled version."""
    _can_write(user)
    mt = _by_id(body)
    info, backfilled = body.get("commit_info"), body.get("latest_backfilled_version")
    if info is None and backfilled is None:
        raise bad("at least one of commit_info and latest_backfilled_version is required")
    if info is not None:
        if not isinstance(info, dict):
            raise bad("'commit_info' must be an object")
        commit = commit_fields({k.replace("_", "-"): v for k, v in info.items()})
        add_commit(mt, user, commit, idempotent=True)
    if backfilled is not None:
        if not isinstance(backfilled, int) or isinstance(backfilled, bool) or backfilled < 0:
            raise bad("'latest_backfilled_version' must be a non-negative integer")
        if info is not None:
            mt.refresh_from_db()  # the commit above moved it
        set_backfilled(mt, backfilled, fresh=True)
    return {}


def preview_get_commits(user, body: dict[str, Any]) -> dict[str, Any]:
    """GET /delta/preview/commits: unpublished ratified commits in [start, end], the latest version."""
    _can_read(user)
    mt = _by_id(body)
    start = int_param(body, "start_version") if "start_version" in body else 0
    end = body.get("end_version")
    if end is not None and (not isinstance(end, int) or isinstance(end, bool) or end < start):
        raise bad("'end_version' must be an integer >= start_version")
    rows = RatifiedCommit.objects.filter(  # the unpublished range only (see DatabaseOwner.get_commits)
        table_id=mt.table_id,
        backfilled=False,
        version__gte=max(start, mt.backfilled_version + 1),
        version__lte=mt.latest_version,
    )
    if end is not None:
        rows = rows.filter(version__lte=end)
    commits = [{k.replace("-", "_"): v for k, v in commit_json(r).items()} for r in rows.order_by("version")]
    return {"commits": commits, "latest_table_version": mt.latest_version}


__all__ = ["STAGED_COMMITS_DIR", "UcError"]
