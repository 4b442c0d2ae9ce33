"""A shared table as a recipient sees it: its storage, its log and the window of its history
the share gives (first..last version), versions and timestamps resolved by the core's rules
(TIMESTAMP AS OF with In-Commit Timestamps), and each answer's format chosen.

The window is the table as far as the recipient can tell: a timestamp is resolved over the
shared versions only, and every refusal, rule and metadata line speaks of those versions and
their times, never of the versions outside it, their times or how many there are.

A version is read where the one rule says (tables.services.versions.source): from the table
while it has the version, else from the pin that keeps it (`source`). A window may therefore
end, or begin, at a pinned version whose log or files the table lost; a version neither the
table nor a pin gives is refused as missing (`readable`), never answered with URLs of files
that are gone."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from tables.delta.errors import DeltaError, TimestampOutOfRangeError
from tables.delta.history.timestamps import CommitTimes, commit_times, format_ms, parse_timestamp, resolve_timestamp
from tables.delta.log.actions import Metadata, Protocol
from tables.delta.log.ict import TIMESTAMP_KEYS, VERSION_KEYS, IctConfig
from tables.delta.log.listing import LogListing, available_versions, list_log
from tables.delta.storage.api import Storage
from tables.delta.storage.opening import as_storage
from tables.models import SharedTable
from tables.services.sharing.errors import INVALID, MISSING, UNSUPPORTED, SharingError, from_core
from tables.services.versions.source import Source

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
    recipient_id: int = 0  # whom its file URLs are issued to
    storage: Storage = field(init=False)

    def __post_init__(self) -> None:
        self.storage = as_storage(self.shared.table.location)

    @cached_property
    def listing(self) -> LogListing:
        return list_log(self.storage)

    @cached_property
    def times(self) -> CommitTimes:
        """The commits' times as the window shows them: only its versions are searched, and
        In-Commit Timestamps enabled before it are on for all of it (after it, off)."""
        full = commit_times(self.storage, self.listing)
        ict, ev = full.ict, full.ict.enablement_version
        if ict.enabled and ev is not None and ev <= self.first:
            ict = IctConfig(True, None, None)
        elif ict.enabled and ev is not None and ev > self.latest:
            ict = IctConfig(False, None, None)
        return replace(full, earliest=self.first, latest=self.latest, ict=ict)

    @cached_property
    def pinned(self) -> list[int]:
        """The versions of the window a pin holds (each readable from its pin store)."""
        from tables.services.pins.queries import pins_by_version

        first, last = self.shared.first_version, self.shared.last_version
        return sorted(
            v
            for v in pins_by_version(self.shared.table)
            if (first is None or v >= first) and (last is None or v <= last)
        )

    @cached_property
    def _range(self) -> tuple[int, int]:
        found = available_versions(self.listing)
        first, last = self.shared.first_version, self.shared.last_version
        if found is not None and self.pinned:  # a pinned version older than the log is readable
            found = (min(found[0], self.pinned[0]), found[1])
        if found is None or (first is not None and found[1] < first) or (last is not None and found[0] > last):
            raise SharingError(MISSING, f"Table {self.shared} has no readable version in the history shared.")
        return found

    def source(self, version: int) -> Source:
        """Where `version` is read from (the one rule), refused in the protocol's shape when
        neither the table nor a pin gives it: its files are gone (VACUUM) or its log is."""
        from tables.services.versions.source import source_of, table_has

        found = source_of(self.shared.table, version, wait=True)
        if not found.from_pin and table_has(self.shared.table, version, wait=True) is False:
            raise SharingError(
                MISSING,
                f"Version {version} of {self.shared} cannot be read: files it needs were removed from the "
                "table's storage (VACUUM) and no pin keeps it.",
            )
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
        """`version` when the window shares it, else refused in the protocol's shape; the
        refusal names the window, not the version asked nor what the table holds beyond it."""
        first, last = self.shared.first_version, self.shared.last_version
        if (first is not None and version < first) or (last is not None and version > last):
            raise SharingError(
                INVALID, f"The {what} asked is outside the history shared for {self.shared}: {self.window_text()}"
            )
        if version > self.latest or version < self.first:
            raise SharingError(
                MISSING,
                f"The {what} asked of {self.shared} cannot be read: the versions available are "
                f"{self.first}..{self.latest}",
            )
        return version

    def metadata_body(self, md: Metadata) -> dict[str, Any]:
        """A metaData action as the window shows it: without the time the table was created nor
        when In-Commit Timestamps were enabled, where those lie before the window."""
        body = {k: v for k, v in md.to_dict().items() if v is not None}
        if self.first > 0:
            body.pop("createdTime", None)
            conf = body.get("configuration") or {}
            enabled_at = next((conf[k] for k in VERSION_KEYS if k in conf), None)
            if enabled_at is not None and (not str(enabled_at).isdigit() or int(enabled_at) <= self.first):
                body["configuration"] = {
                    k: v for k, v in conf.items() if k not in VERSION_KEYS and k not in TIMESTAMP_KEYS
                }
        return body

    def timestamp_of(self, version: int) -> int | None:
        return self.times.timestamp(version)[0]

    def _resolve(self, t: int, **allow: bool) -> dict[str, Any]:
        """The core's TIMESTAMP AS OF over the window's versions, its rule said of them only."""
        found = resolve_timestamp(self.times, t, alternatives=False, **allow)
        lo, hi = found["searchRange"]
        by = "inCommitTimestamp" if found["source"] == "ict" else "commit file modification time (monotonized)"
        found["rule"] = (
            f"versions {lo}..{hi - 1} of the history shared were searched by {by}: version {found['version']} "
            f"is the latest committed at or before {format_ms(t)}"
        )
        return found

    def at_or_before(self, text: str) -> Resolved:
        """TIMESTAMP AS OF `text` as deltaweb resolves it (the latest version committed at or
        before it; ICT where the table uses them), over the window's versions."""
        try:
            found = self._resolve(parse_timestamp(text))
        except DeltaError as exc:
            raise from_core(exc, self.shared.table) from exc
        return Resolved(self.check(found["version"]), found["rule"], found["commitTimestamp"])

    def at_or_after(self, text: str) -> Resolved:
        """The earliest version committed at or after `text` (startingTimestamp): a time before
        the first commit is its first version; one after the latest is refused."""
        try:
            t = parse_timestamp(text)
            found = self._resolve(t, allow_latest=True)
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
