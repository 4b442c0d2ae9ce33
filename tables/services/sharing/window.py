"""A shared table as a recipient sees it: its storage, its log and the window of its history
the share gives (first..last version), versions and timestamps resolved by the core's rules
(TIMESTAMP AS OF with In-Commit Timestamps), and each answer's format chosen."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from tables.delta.errors import DeltaError, TimestampOutOfRangeError
from tables.delta.history.timestamps import CommitTimes, commit_times, format_ms, parse_timestamp, resolve_timestamp
from tables.delta.log.actions import Protocol
from tables.delta.log.listing import LogListing, available_versions, list_log
from tables.delta.storage.boundary import Storage, as_storage
from tables.models import SharedTable
from tables.services.sharing.errors import INVALID, MISSING, UNSUPPORTED, SharingError, from_core

PARQUET, DELTA = "parquet", "delta"


@dataclass(slots=True)
class Resolved:
    """A version a request asked for (by number or time), and how a timestamp was resolved."""

    version: int
    rule: str | None = None
    commit_timestamp: int | None = None


@dataclass
class SharedView:
    shared: SharedTable
    storage: Storage = field(init=False)

    def __post_init__(self) -> None:
        self.storage = as_storage(self.shared.table.location)

    @cached_property
    def listing(self) -> LogListing:
        return list_log(self.storage)

    @cached_property
    def times(self) -> CommitTimes:
        return commit_times(self.storage, self.listing)

    @cached_property
    def _range(self) -> tuple[int, int]:
        found = available_versions(self.listing)
        if found is None:
            raise SharingError(MISSING, f"Table {self.shared} has no readable version.")
        return found

    @property
    def first(self) -> int:
        """The earliest version the recipient may read."""
        return max(self._range[0], self.shared.first_version or 0)

    @property
    def latest(self) -> int:
        """The table's latest version as the recipient sees it: the window's end when set."""
        last = self.shared.last_version
        return self._range[1] if last is None else min(self._range[1], last)

    def window_text(self) -> str:
        first, last = self.shared.first_version, self.shared.last_version
        if first is None and last is None:
            return "every version"
        return f"versions {first if first is not None else 0}..{last if last is not None else 'latest'}"

    def check(self, version: int, what: str = "version") -> int:
        """`version` when the window shares it, else refused in the protocol's shape."""
        first, last = self.shared.first_version, self.shared.last_version
        if (first is not None and version < first) or (last is not None and version > last):
            raise SharingError(
                INVALID, f"{what} {version} is outside the history shared for {self.shared}: {self.window_text()}"
            )
        if version > self._range[1] or version < self._range[0]:
            raise SharingError(
                MISSING,
                f"{what} {version} of {self.shared} cannot be read: the versions available are "
                f"{self._range[0]}..{self._range[1]}",
            )
        return version

    def timestamp_of(self, version: int) -> int | None:
        return self.times.timestamp(version)[0]

    def at_or_before(self, text: str) -> Resolved:
        """TIMESTAMP AS OF `text` as deltaweb resolves it (the latest version committed at or
        before it; ICT where the table uses them), then checked against the window."""
        try:
            found = resolve_timestamp(self.times, parse_timestamp(text), alternatives=False)
        except DeltaError as exc:
            raise from_core(exc, self.shared.table) from exc
        return Resolved(self.check(found["version"]), found["rule"], found["commitTimestamp"])

    def at_or_after(self, text: str) -> Resolved:
        """The earliest version committed at or after `text` (startingTimestamp): a time before
        the first commit is its first version; one after the latest is refused."""
        try:
            t = parse_timestamp(text)
            found = resolve_timestamp(self.times, t, allow_latest=True, alternatives=False)
        except TimestampOutOfRangeError as exc:
            if exc.details.get("reason") != "before_earliest":
                raise from_core(exc, self.shared.table) from exc
            return Resolved(self.first, "the time is before the first version shared: its first version")
        except DeltaError as exc:
            raise from_core(exc, self.shared.table) from exc
        version = found["version"] if found["commitTimestamp"] == t else found["version"] + 1
        if version > self.latest:
            raise SharingError(INVALID, f"No version of {self.shared} was committed at or after {format_ms(t)}.")
        return Resolved(max(version, self.first), found["rule"], self.timestamp_of(max(version, self.first)))


def needs_delta(protocol: Protocol) -> bool:
    """Deletion vectors, column mapping and every other reader feature need the delta format."""
    return protocol.min_reader_version > 1


def capabilities(header: str | None) -> dict[str, list[str]]:
    """`delta-sharing-capabilities: responseformat=delta,parquet;readerfeatures=...`, lowercased."""
    out: dict[str, list[str]] = {}
    for part in (header or "")[:2000].split(";"):
        key, _, values = part.partition("=")
        if key.strip():
            out[key.strip().lower()] = [v.strip().lower() for v in values.split(",") if v.strip()]
    return out


def response_format(caps: dict[str, list[str]], protocol: Protocol) -> str:
    """The format of an answer: parquet unless the client asks for delta; delta when it accepts
    both and the table needs it; refused when the table needs delta and the client cannot."""
    asked = [f for f in caps.get("responseformat", []) if f in (PARQUET, DELTA)] or [PARQUET]
    if needs_delta(protocol):
        if DELTA not in asked:
            raise SharingError(
                UNSUPPORTED,
                "This table uses reader features (deletion vectors, column mapping, ...) that need "
                "responseformat=delta; the client asked only for parquet.",
            )
        return DELTA
    return asked[0] if len(asked) == 1 else PARQUET


def int_param(value: Any, name: str, minimum: int = 0) -> int | None:
    """A Long parameter (query string or JSON body); None when absent."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise SharingError(INVALID, f"{name} must be an integer")
    try:
        number = int(value) if isinstance(value, int) or len(value) <= 20 else None
    except ValueError:
        number = None
    if number is None or not minimum <= number <= 2**63 - 1:
        raise SharingError(INVALID, f"{name} must be an integer from {minimum} to 2^63-1")
    return number
