"""The one query over a table's cached history, used by the history page and the API.

Both filter the same way (operation, user, version range, time range, an operationMetrics
key's numeric range, text in the operationParameters) and cache the answers until the next
sync: `synced_key` names the cached state of a table. Every filter is a condition of the one
query, its text bounded (MAX_SEARCH), paged and counted once per sync as the rest: a
100,000-commit table is never read into memory.

The time range has one rule for both (README, "History filters"): a date alone
(`yyyy-MM-dd`) means that whole UTC day — `since` from its first millisecond, `until` to its
last; a date-time or epoch milliseconds means that instant, and both ends are inclusive.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from django.core.cache import cache
from django.db.models import Case, FloatField, Q, QuerySet, TextField, When
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from tables.delta.errors import InvalidTimestampError
from tables.delta.history.timestamps import parse_timestamp
from tables.models import Commit, Table
from tables.services.catalog.lookup import INT64_MAX
from tables.services.errors import ServiceError

CACHE_SECONDS = 3600


@dataclass(frozen=True)
class HistoryFilter:
    """Filters of the history; times are epoch milliseconds. `until` is inclusive, `before`
    exclusive (a whole UTC day ends before the next one starts)."""

    operation: str | None = None
    version_min: int | None = None
    version_max: int | None = None
    since: int | None = None
    until: int | None = None
    before: int | None = None
    user: str | None = None  # part of userName or userId, case-insensitive
    metric: str | None = None  # an operationMetrics key (numOutputRows), with metric_min/metric_max
    metric_min: float | None = None
    metric_max: float | None = None
    params: str | None = None  # text anywhere in operationParameters (keys and values), case-insensitive

    def check(self) -> HistoryFilter:
        """ServiceError (400 invalid_range) for a range that ends before it starts; 400 invalid
        for a metric range without its key, or a key that is no metric's name."""
        lo, hi = self.version_min, self.version_max
        if lo is not None and hi is not None and lo > hi:
            raise ServiceError(f"version_min ({lo}) must not be greater than version_max ({hi}).", "invalid_range")
        check_metric(self.metric, self.metric_min, self.metric_max)
        return self


# an operationMetrics key as Delta writers name them (numOutputRows, executionTimeMs, ...)
METRIC_KEY = re.compile(r"(?!.*__)[A-Za-z_][A-Za-z0-9_.-]{0,99}")  # no "__": the ORM's separator
MAX_SEARCH = 200  # the longest text the user and parameter filters take


def check_metric(key: str | None, lo: float | None, hi: float | None) -> None:
    """ServiceError 400 for a metric filter that cannot mean anything: a range without a key,
    a key that is no metric name, or a range that ends before it starts."""
    if key is None or key == "":
        if lo is not None or hi is not None:
            raise ServiceError("A metric range needs the metric's name (e.g. numOutputRows).", "invalid")
        return
    if not METRIC_KEY.fullmatch(key):
        raise ServiceError(
            f"'{key[:40]}' is not a metric name: letters, digits, '_', '.' or '-', at most 100 characters.",
            "invalid",
        )
    if lo is not None and hi is not None and lo > hi:
        raise ServiceError(f"The metric's lower bound ({lo:g}) is above its upper bound ({hi:g}).", "invalid_range")


def parse_time(name: str, text: str) -> int:
    """A time filter as epoch milliseconds; ServiceError (400 invalid_timestamp) naming the field."""
    try:
        t = parse_timestamp(text)
    except InvalidTimestampError as exc:
        raise ServiceError(f"{name}: {exc.message}", "invalid_timestamp") from exc
    if abs(t) > INT64_MAX:
        raise ServiceError(f"{name}: '{text[:40]}' is out of range.", "invalid_timestamp")
    return t


_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")


def version_at_time(table: Table, text: str) -> int | None:
    """The version current at a time a person typed (the History tab's jump): the newest cached
    commit at or before it by effective timestamp (ICT where enabled), None before the first.
    ServiceError `invalid_timestamp` when the text is no time."""
    ms = parse_time("time", text)
    # by timestamp (its index: one seek), which rises with the version; a tie goes to the newer
    found = Commit.objects.filter(table=table, timestamp__lte=ms).order_by("-timestamp", "-version")
    return found.values_list("version", flat=True).first()


def day_start(day: date) -> int:
    return int(datetime.combine(day, time.min, tzinfo=UTC).timestamp() * 1000)


def day_end(day: date) -> int:
    """The last millisecond of a UTC day (the one before the next day starts)."""
    if day == date.max:
        return day_start(day) + 86_400_000 - 1
    return day_start(day + timedelta(days=1)) - 1


def time_range(since: str | date | None, until: str | date | None) -> tuple[int | None, int | None]:
    """(since, until) as inclusive epoch milliseconds under the one rule of this module: a date
    (a `date`, or text `yyyy-MM-dd`) is its whole UTC day, anything else the instant it names.
    ServiceError 400 invalid_timestamp for a bad time, invalid_range when since > until."""

    def one(name: str, value: str | date | None, end: bool) -> int | None:
        if value is None or value == "":
            return None
        if isinstance(value, str) and _DATE_ONLY.fullmatch(value.strip()):
            try:
                value = date.fromisoformat(value.strip())
            except ValueError as exc:
                raise ServiceError(f"{name}: '{value.strip()}' is not a date.", "invalid_timestamp") from exc
        if isinstance(value, date):
            return day_end(value) if end else day_start(value)
        return parse_time(name, value)

    lo, hi = one("since", since, False), one("until", until, True)
    if lo is not None and hi is not None and lo > hi:
        raise ServiceError(f"'since' ({since}) must not be after 'until' ({until}).", "invalid_range")
    return lo, hi


def history(table: Table, f: HistoryFilter | None = None) -> QuerySet[Commit]:
    """The table's cached commits, newest first, filtered (commitInfo left out: it is large)."""
    f = f or HistoryFilter()
    qs = Commit.objects.filter(table=table).order_by("-version").defer("commit_info")
    if f.operation:
        qs = qs.filter(operation__icontains=f.operation.strip())  # "WRI" finds WRITE
    if f.version_min is not None:
        qs = qs.filter(version__gte=f.version_min)
    if f.version_max is not None:
        qs = qs.filter(version__lte=f.version_max)
    if f.since is not None:
        qs = qs.filter(timestamp__gte=f.since)
    if f.until is not None:
        qs = qs.filter(timestamp__lte=f.until)
    if f.before is not None:
        qs = qs.filter(timestamp__lt=f.before)
    if f.user:
        who = f.user.strip()[:MAX_SEARCH]
        qs = qs.filter(Q(user_name__icontains=who) | Q(user_id__icontains=who))
    if f.params:
        # the parameters as the database's JSON text: a key, a value or part of a predicate
        qs = qs.alias(params_text=Cast("operation_parameters", TextField())).filter(
            params_text__icontains=f.params.strip()[:MAX_SEARCH]
        )
    if f.metric:
        qs = _metric_range(qs, f.metric, f.metric_min, f.metric_max)
    return qs


def _metric_range(qs: QuerySet[Commit], key: str, lo: float | None, hi: float | None) -> QuerySet[Commit]:
    """Commits whose operationMetrics has `key`, as a number within [lo, hi] (either open).
    Delta writes metrics as strings ("12"): only a value that reads as a decimal number is
    cast (a database refuses, or reads as 0, any other text), so "n/a" matches no range."""
    check_metric(key, lo, hi)
    number = r"^\s*-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?\s*$"
    # a CASE, not two conditions: a database may test a WHERE's conditions in any order, and
    # casting "n/a" is an error on PostgreSQL
    value = Case(
        When(metric_text__regex=number, then=Cast("metric_text", FloatField())),
        default=None,
        output_field=FloatField(),
    )
    qs = qs.alias(metric_text=KT(f"operation_metrics__{key}")).alias(metric_value=value)
    qs = qs.filter(metric_value__isnull=False)
    if lo is not None:
        qs = qs.filter(metric_value__gte=lo)
    if hi is not None:
        qs = qs.filter(metric_value__lte=hi)
    return qs


def synced_key(table: Table) -> str:
    """Names the table's cached history as of its last sync: answers keyed by it stay right
    until the next sync."""
    synced = table.last_synced_at.timestamp() if table.last_synced_at else None
    return f"{table.pk}:{table.last_synced_version}:{synced}"


def operations(table: Table, limit: int = 200) -> list[str]:
    """The distinct operations of the table's history (for the filter's suggestions), cached."""
    key = f"ops:{synced_key(table)}"
    ops = cache.get(key)
    if ops is None:
        qs = Commit.objects.filter(table=table).order_by("operation").values_list("operation", flat=True)
        ops = [o for o in qs.distinct()[:limit] if o]
        cache.set(key, ops, CACHE_SECONDS)
    return ops


METRIC_KEYS_SAMPLE = 1000  # the newest commits whose metric names the filter suggests


def metric_keys(table: Table, limit: int = 200) -> list[str]:
    """The operationMetrics names of the table's newest commits (the metric filter's
    suggestions), sorted, cached until the next sync."""
    key = f"metric-keys:{synced_key(table)}"
    keys = cache.get(key)
    if keys is None:
        found: set[str] = set()
        newest = Commit.objects.filter(table=table).order_by("-version")[:METRIC_KEYS_SAMPLE]
        for metrics in newest.values_list("operation_metrics", flat=True):
            if isinstance(metrics, dict):
                found.update(str(k)[:100] for k in metrics)
        keys = sorted(found)[:limit]
        cache.set(key, keys, CACHE_SECONDS)
    return keys


def has_expired(table: Table) -> bool:
    """Whether any cached commit's log file has expired, cached until the next sync (on
    SQLite the flag is not indexed: the question scans every commit of the table)."""
    key = f"expired:{synced_key(table)}"
    found = cache.get(key)
    if found is None:
        found = table.commits.filter(log_expired=True).exists()
        cache.set(key, found, CACHE_SECONDS)
    return found


def history_count(table: Table, qs: QuerySet[Commit]) -> int:
    """The number of rows of a history query, cached until the next sync: a COUNT over a
    100,000-commit table costs more than the page it paginates."""
    digest = hashlib.sha256(str(qs.query).encode()).hexdigest()[:32]
    key = f"hcount:{synced_key(table)}:{digest}"
    n = cache.get(key)
    if n is None:
        n = qs.count()
        cache.set(key, n, CACHE_SECONDS)
    return n
