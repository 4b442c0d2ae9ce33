"""Registering a table: the location checks (under DELTAWEB_ALLOWED_ROOTS, a readable Delta
table) and the Table row; also forgetting one. Registration is the only way a table's
location is set (the admin shows it read-only)."""

from __future__ import annotations

import os
from pathlib import Path

from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils.text import slugify

from tables.delta import errors as delta_errors
from tables.delta.log.listing import list_log
from tables.delta.storage.api import allowed_roots as storage_allowed_roots
from tables.delta.storage.api import is_uri, local_path
from tables.delta.storage.opening import as_storage
from tables.models import Table
from tables.services.errors import ServiceError, from_delta, printable


def allowed_roots() -> list[Path]:
    """The local allowed roots, resolved: the storage layer's own list (object-store prefixes
    are checked by their storage when the location is listed), less the pin store (deltaweb's
    own: its kept versions are read through their pins, never registered as tables)."""
    from django.conf import settings

    pins = os.path.realpath(settings.DELTAWEB_PIN_STORE) if not is_uri(settings.DELTAWEB_PIN_STORE) else None
    return [Path(r) for r in storage_allowed_roots() if not is_uri(r) and r != pins]


def _location_text(location: str) -> str:
    """The location as typed, stripped; refused when empty, huge or holding a NUL."""
    text = (location or "").strip()
    if not text:
        raise ServiceError("Give the table's location (a directory, file:// or s3:// URI).", "invalid_location")
    if len(text) > 2000 or "\x00" in text:
        raise ServiceError("That location is not a valid path or URI.", "invalid_location")
    return text


def shown(location: str) -> str:
    """A location in a message as the user typed it: where it leads on the server (a link's
    target, /proc/self/... naming the server's own files) is never said."""
    return printable((location or "").strip(), 300)


def allowed_path(location: str) -> Path:
    """An absolute location resolved (symlinks and '..' of its existing part) and checked to
    lie under DELTAWEB_ALLOWED_ROOTS; it need not exist yet."""
    text = _location_text(location)
    try:
        raw = local_path(text)
    except delta_errors.DeltaError as exc:
        raise ServiceError(str(exc), "invalid_location") from exc
    if not raw.is_absolute():
        raise ServiceError("Give an absolute path (or a file:// URI).", "invalid_location")
    try:
        real = Path(os.path.realpath(raw))
    except (OSError, ValueError) as exc:  # a link the server may not read (/proc/1/cwd), a loop
        raise ServiceError(f"{shown(text)} cannot be resolved by the server.", "invalid_location") from exc
    roots = allowed_roots()
    if not any(real == root or root in real.parents for root in roots):
        raise ServiceError(
            # the roots are not listed: they are the server's directories (the discovery page
            # offers what lies under them)
            f"{shown(text)} is outside the allowed roots; ask an administrator to add it to DELTAWEB_ALLOWED_ROOTS.",
            "location_not_allowed",
            403,
        )
    return real


def object_location(location: str) -> str | None:
    """An object-store location (`s3://`, `gs://`, `az://`, `abfss://` ...) in its canonical
    form (no trailing slash, `s3a://` spelled `s3://`), or None for a local path; a malformed
    one is refused."""
    from tables.delta.storage.objectstore_config import canonical, is_object_location, parse_location

    if not is_object_location((location or "").strip()):
        return None
    text = _location_text(location)
    try:
        loc = parse_location(text)
    except delta_errors.DeltaError as exc:
        raise ServiceError(str(exc), "invalid_location") from exc
    return canonical(loc).uri()  # s3a://b/x and s3://b/x/ are one table


def not_allowed(location: str) -> ServiceError:
    """The refusal of an object-store location (or prefix) outside the allowed ones."""
    return ServiceError(
        f"{location} is outside the allowed locations; ask an administrator to add a prefix of it to "
        "DELTAWEB_ALLOWED_ROOTS.",
        "location_not_allowed",
        403,
    )


def _check_listable(location: str, object_store: bool) -> None:
    """A Delta table its storage lets us list (one listing, the one registration needs). For an
    object store this is also the check that it lies under an allowed prefix of its scheme."""
    try:
        list_log(as_storage(location))
    except delta_errors.PathOutsideRootsError as exc:
        if not object_store:
            raise from_delta(exc) from exc  # a log linked out of the roots: path_outside_roots
        raise not_allowed(location) from exc
    except delta_errors.DeltaError as exc:
        raise from_delta(exc) from exc


def validate_location(location: str) -> str:
    """The table root, resolved (symlinks, '..'), if it is allowed and a readable Delta table."""
    uri = object_location(location)
    if uri is not None:
        _check_listable(uri, object_store=True)
        return uri
    real = allowed_path(location)
    typed = shown(location)
    if not real.is_dir():
        raise ServiceError(f"{typed} does not exist or is not a directory.", "invalid_location")
    if not (real / "_delta_log").is_dir():
        raise ServiceError(f"{typed} is not a Delta table (no _delta_log/ directory).", "not_a_delta_table")
    if not os.access(real / "_delta_log", os.R_OK | os.X_OK):
        raise ServiceError(f"{typed}/_delta_log is not readable by the server.", "invalid_location")
    return str(real)


def check_new_location(location: str) -> str:
    """A location for a table that may not exist yet, if it is under DELTAWEB_ALLOWED_ROOTS:
    an object store's in its canonical form, a local one absolute and resolved (symlinks,
    '..' of its nearest existing ancestor); nothing is created."""
    uri = object_location(location)
    if uri is not None:
        try:
            as_storage(uri).resolve("_delta_log")  # the boundary's own check of the allowed prefixes
        except delta_errors.PathOutsideRootsError as exc:
            raise not_allowed(uri) from exc
        return uri
    real = allowed_path(location)
    if real.exists() and not real.is_dir():
        raise ServiceError(f"{shown(location)} exists and is not a directory.", "invalid_location")
    return str(real)


def make_new_table_dir(location: str) -> str:
    """`check_new_location`, then its `_delta_log/` made through the storage boundary (a
    directory on local disk, nothing on an object store), ready for version 0."""
    checked = check_new_location(location)
    try:
        as_storage(checked).make_dir("_delta_log")
    except delta_errors.DeltaError as exc:
        raise from_delta(exc) from exc
    return checked


def register_table(name: str, location: str, description: str = "", user=None) -> Table:
    """Check the name and the location, read the log's listing once, and save the Table row."""
    name = (name or "").strip()
    if not name or len(name) > 200:
        raise ServiceError("Give the table a name (at most 200 characters).", "invalid_name")
    slug = slugify(name)[:200]
    if not slug:
        raise ServiceError("The name needs at least one letter or digit.", "invalid_name")
    real = validate_location(location)
    if not is_uri(real):  # an object-store location was listed by validate_location already
        _check_listable(real, object_store=False)
    if Table.objects.filter(name=name).exists() or Table.objects.filter(slug=slug).exists():
        raise ServiceError(f"A table named '{name}' is registered already.", "duplicate", 409)
    try:
        with transaction.atomic():
            _refuse_registered_location(real)
            return Table.objects.create(
                name=name, slug=slug, location=real, description=description or "", created_by=user
            )
    except IntegrityError as exc:
        raise ServiceError(f"A table named '{name}' is registered already.", "duplicate", 409) from exc


def check_location(location: str) -> str:
    """What registering `location` would meet, before a name is given (the register form checks
    it as it is typed): the table root if it is allowed, a readable Delta table and not
    registered yet; else the ServiceError the registration itself would raise."""
    real = validate_location(location)
    if not is_uri(real):
        _check_listable(real, object_store=False)
    _refuse_registered_location(real)
    return real


def _refuse_registered_location(location: str) -> None:
    """One row per location. `location` is canonical already (a local path resolved: no scheme,
    no trailing separator, no '.', '..' or symlink; an object-store URI in its parsed form), so
    every spelling of one directory meets here and the second registration names the first."""
    first = Table.objects.filter(location=location).only("pk", "name", "slug").first()
    if first is None:
        return
    url = reverse("tables:table_detail", args=[first.slug])
    raise ServiceError(
        f"This location is registered already as '{first.name}' ({url}).",
        "duplicate_location",
        409,
        table={"id": first.pk, "name": first.name, "slug": first.slug, "url": url},
    )


def delete_table(table: Table) -> None:
    """Forget a table: its cached history and jobs go; the table's files are never touched."""
    table.delete()
