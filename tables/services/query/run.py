"""Running a user's SQL at the versions it names (use cases).

`start_query(table, text, user)` checks the statement (tables.services.query.statement),
resolves each table reference to a version the user may read, and starts a data job of kind
"query" on the page's table: an identical query over the same resolved versions is reused, a
user may have DELTAWEB_QUERY_CONCURRENT queries queued or running, and a refusal creates
nothing. A reference without a version is the latest synced version; `VERSION AS OF n` must be
in the log and readable; `VERSION AS OF 'pin'` is the version a pin of that table holds;
`TIMESTAMP AS OF '...'` is deltaweb's own TIMESTAMP AS OF, with its errors. A version whose data
files were vacuumed is read from a pin that holds it, else refused with what happened and which
pin could have kept it.

Every query is on the record: the job row holds who asked, the statement as written, the
versions it resolved to (`references`) and, once it ran, the rows returned.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from tables.models import Job, JobKind, JobStatus, ManagedTable, Pin, PinState, Table
from tables.services.access.roles import can_browse
from tables.services.data import jobs as data_jobs
from tables.services.errors import ServiceError
from tables.services.jobs import lifecycle as jobs
from tables.services.query.statement import Parsed, QueryRefused, Reference, parse_statement

QUERY = JobKind.QUERY


def limits() -> dict[str, int]:
    """The limits a query runs under (settings, with their defaults)."""
    return {
        "length": int(getattr(settings, "DELTAWEB_QUERY_MAX_LENGTH", 20_000)),
        "rows": int(getattr(settings, "DELTAWEB_QUERY_MAX_ROWS", 100_000)),
        "shown": int(getattr(settings, "DELTAWEB_QUERY_ROWS_SHOWN", 10_000)),
        "seconds": int(getattr(settings, "DELTAWEB_QUERY_SECONDS", 300)),
        "concurrent": int(getattr(settings, "DELTAWEB_QUERY_CONCURRENT", 2)),
    }


def refused(exc: QueryRefused) -> ServiceError:
    return ServiceError(exc.message, "query_refused", 400, part=exc.part)


def find_table(name: str) -> Table | None:
    """A registered table by its slug, or by its Unity Catalog name (catalog.schema.table)."""
    parts = name.split(".")
    if len(parts) == 3:
        owned = (
            ManagedTable.objects.select_related("table")
            .filter(uc_catalog__iexact=parts[0], uc_schema__iexact=parts[1], uc_name__iexact=parts[2])
            .first()
        )
        return owned.table if owned is not None else None
    return Table.objects.filter(slug=name).first() or Table.objects.filter(slug__iexact=name).first()


def _pin_named(table: Table, name: str) -> Pin:
    pin = Pin.objects.filter(table=table, name=name, state__in=PinState.holding()).order_by("pk").first()
    if pin is None or not pin.store_location:
        raise QueryRefused(f"{table.slug} has no pin named '{name[:100]}' that holds a version.", name)
    return pin


def _version(table: Table, ref: Reference) -> tuple[int, Pin | None]:
    """The version a reference asks for, and the pin it is to be read from (None: the table)."""
    if ref.by == "pin":
        pin = _pin_named(table, str(ref.value))
        return pin.version, pin
    if ref.by == "timestamp":
        from tables.services.versions.read import resolve

        try:
            version = int(resolve(table, str(ref.value)).version)
        except ServiceError as exc:
            raise QueryRefused(f"{ref.text}: {exc.message}", ref.text) from None
    elif ref.by == "version":
        version = int(ref.value)  # type: ignore[arg-type]
    else:
        if table.last_synced_version is None:
            raise QueryRefused(f"{table.slug} has not been synced yet: sync it, or name a version.", ref.text)
        version = table.last_synced_version
    try:
        data_jobs.check_version(table, version)
    except ServiceError as exc:
        raise QueryRefused(f"{ref.text}: {exc.message}", ref.text) from None
    return version, _readable_from(table, version, ref)


def _readable_from(table: Table, version: int, ref: Reference) -> Pin | None:
    """The pin a version is read from, as the one rule says (tables.services.versions.source):
    None while the table gives it, the pin once the table lost it; a version neither gives
    is refused with why and which pin could have kept it."""
    from tables.services.versions.source import source_of
    from tables.services.versions.unreadable import unreadable_why

    source = source_of(table, version)
    if source.pin is not None:
        return source.pin
    why = unreadable_why(table, version)
    if why is not None:
        raise QueryRefused(f"{ref.text}: {why['text']}", ref.text)
    return None


def at_version(text: str) -> tuple[str, str | int]:
    """What "run at" a version box says: a version number, else a time (TIMESTAMP AS OF)."""
    text = (text or "").strip()
    if text.isascii() and text.isdigit() and len(text) <= 18:
        return "version", int(text)
    if not text:
        raise ServiceError("Give a version number or a time to run the query at.", "invalid")
    return "timestamp", text[:100]


def resolver(user: Any, page: Table | None = None, at: tuple[str, str | int] | None = None):
    """What parse_statement asks of each reference: the table the user may read, its version
    and where it is read from. With `at`, the page's table named without a version is read at
    that version or time (the same query run at another version)."""

    def resolve(ref: Reference) -> tuple[Any, dict[str, Any]]:
        table = find_table(ref.name)
        if table is None or not can_browse(user) or table.vanished_at is not None:
            raise QueryRefused(f"{ref.name} is not a registered table you may read.", ref.text)
        if at is not None and ref.by is None and page is not None and table.pk == page.pk:
            ref = Reference(ref.name, at[0], at[1], f"{ref.text} at {at[1]}")
        version, pin = _version(table, ref)
        binding = {"table": table.pk, "slug": table.slug, "version": version, "pin": pin.pk if pin else None}
        if pin is not None:
            binding["pinName"] = pin.name
        return (table.pk, version), binding

    return resolve


def check(text: str, user: Any, page: Table | None = None, at: tuple[str, str | int] | None = None) -> Parsed:
    """The statement checked and its references resolved, or ServiceError naming the part."""
    try:
        return parse_statement(text, resolver(user, page, at), limits()["length"])
    except QueryRefused as exc:
        raise refused(exc) from None


def params_of(text: str, parsed: Parsed) -> dict[str, Any]:
    lim = limits()
    return {
        "text": text,
        "groupKeys": parsed.group_keys,
        "sql": parsed.statement,
        "bindings": parsed.bindings,
        "references": [
            {"as": ref.text, **parsed.bindings[i], "by": ref.by or "latest"} for ref, i in parsed.references
        ],
        "maxRows": lim["rows"],
        "seconds": lim["seconds"],
    }


def start_query(table: Table, text: str, user: Any, at: tuple[str, str | int] | None = None) -> Job:
    """A finished identical query's job, the identical one running, or a new one (module doc);
    `at`: the page's table named without a version is read at that version or time."""
    if not isinstance(text, str):
        raise ServiceError("Give the statement as text.", "invalid")
    params = params_of(text, check(text, user, table, at))
    done = data_jobs.reusable(table, QUERY, params)
    if done is not None:
        done.reused = True  # type: ignore[attr-defined]
        return done
    running = Job.objects.filter(kind=QUERY, created_by=user, status__in=JobStatus.active()).count()
    already = jobs.active(QUERY, table, params)
    if already is None and running >= limits()["concurrent"]:
        raise ServiceError(
            f"You have {running} queries queued or running; at most {limits()['concurrent']} at once. "
            "Wait for one to finish or cancel it.",
            "too_many_queries",
            429,
        )
    return data_jobs.new_job(table, QUERY, params, user)


def history(user: Any, table: Table | None = None, limit: int = 50) -> list[Job]:
    """The user's latest queries, newest first (on one table when given)."""
    rows = Job.objects.filter(kind=QUERY, created_by=user).select_related("table")
    if table is not None:
        rows = rows.filter(table=table)
    return list(rows.order_by("-pk")[:limit])
