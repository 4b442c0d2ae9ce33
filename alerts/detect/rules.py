"""The rules: built-in ones (each switchable per table, some with a threshold) and users'
own. A rule looks at one commit's facts and answers a one-line explanation, or None.

Explanations quote values from the table's log: they are bounded here and escaped wherever
they are shown (templates autoescape; e-mail is plain text; webhooks are JSON).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from alerts.detect.facts import CommitFacts
from alerts.models import CustomRule, MetricOp, Severity
from tables.delta.snapshot.diff import schema_changes
from tables.delta.write.commit import ENGINE_INFO
from tables.services.errors import printable

ICT_KEY = "delta.enableInCommitTimestamps"
# the sync's per-version anomalies that are about In-Commit Timestamps (file times out of order
# are common after a copy and are not news)
ICT_ANOMALIES = ("ict_missing", "commitinfo_not_first", "ict_not_increasing")


COMMIT, FILE_REMOVAL, HISTORY = "commit", "file_removal", "history"


@dataclass(frozen=True)
class Builtin:
    key: str
    name: str
    severity: str
    # facts in (a commit's CommitFacts; for a rule `on` FILE_REMOVAL, a tables FileRemovalEvent;
    # `on` HISTORY, a tables HistoryRewrite)
    check: Callable[[Any, float | None], str | None]
    threshold: float | None = None  # the default; what it means is in `threshold_help`
    threshold_help: str = ""
    on: str = COMMIT  # what the rule looks at: each new commit, or the sync's file-removal events


def _q(value: object, limit: int = 80) -> str:
    return printable(value, limit)


def _no_predicate(facts: CommitFacts) -> bool:
    pred = facts.parameters.get("predicate")
    if pred is None:
        return True
    text = str(pred).strip()
    return text in ("", "[]", '[""]', "true", "TRUE", '["true"]')


def overwrite(facts: CommitFacts, _t: float | None) -> str | None:
    op = facts.operation.upper()
    mode = str(facts.parameters.get("mode", "")).strip().lower()
    if op in ("TRUNCATE", "TRUNCATE TABLE"):
        return f"version {facts.version}: {op} removed every row"
    if op == "DELETE" and _no_predicate(facts) and facts.version > 0:
        return f"version {facts.version}: DELETE without a predicate removed every row"
    if mode == "overwrite" and facts.version > 0:
        return f"version {facts.version}: {_q(facts.operation)} in Overwrite mode replaced the table's data"
    if op in (
        "CREATE OR REPLACE TABLE",
        "REPLACE TABLE",
        "CREATE OR REPLACE TABLE AS SELECT",
        "REPLACE TABLE AS SELECT",
    ):
        if facts.version > 0:
            return f"version {facts.version}: {op} replaced the table"
    return None


def _byte_share(facts: CommitFacts) -> tuple[float, str] | None:
    """(percent of the bytes lost, how it was counted): the files' sizes the log records (the
    cached growth of every commit), else operationMetrics."""
    prev = facts.previous
    before = prev.size_bytes if prev is not None and prev.version == facts.version - 1 else None
    if not before:
        return None
    after = facts.commit.size_bytes
    if after is not None:
        lost, source = before - after, "file statistics"
    else:
        removed, added = facts.metric("numRemovedBytes"), facts.metric("numAddedBytes")
        if removed is None:
            return None
        lost, source = int(removed - (added or 0)), "operationMetrics"
    if lost <= 0:
        return None
    return 100.0 * lost / before, f"{lost} of {before} bytes, from {source}"


def _row_share(facts: CommitFacts) -> tuple[float, str] | None:
    """(percent of the rows removed, how it was counted): removed rows from operationMetrics,
    else from the files' statistics; the rows before from the statistics of the version before.
    Only commits that remove data are counted (an append never reads the state before)."""
    if not facts.removes_data():
        return None
    removed = facts.rows_removed()
    if removed is None or removed[0] <= 0:
        return None
    before = facts.rows_before
    if not before:
        return None
    return 100.0 * min(removed[0], before) / before, f"{removed[0]} of {before} rows, from {removed[1]}"


def large_removal(facts: CommitFacts, threshold: float | None) -> str | None:
    """A commit that removes at least `threshold` percent of the table's rows or bytes."""
    pct = threshold if threshold is not None else 50.0
    shares = {"bytes": _byte_share(facts), "rows": _row_share(facts)}
    if not any(share is not None and share[0] >= pct for share in shares.values()):
        return None
    said = [
        f"{share:.1f}% of the table's {what} ({how})"
        for what, s in shares.items()
        if s is not None
        for share, how in [s]
    ]
    return (
        f"version {facts.version}: {_q(facts.operation) or 'a commit'} removed "
        + " and ".join(said)
        + f"; threshold {pct:g}%"
    )


def schema_change(facts: CommitFacts, _t: float | None) -> str | None:
    new = facts.new_metadata
    if new is None or facts.version == 0:
        return None
    before = facts.before
    if before is None:
        return None
    try:
        changes = schema_changes(before.metadata, new)
    except Exception:  # an unreadable schemaString: the sync reports it
        return None
    dropped = [c["column"] for c in changes if c["change"] == "removed"]
    retyped = [
        f"{c['column']} {_q((c['from'] or {}).get('type'), 40)} -> {_q((c['to'] or {}).get('type'), 40)}"
        for c in changes
        if c["change"] == "changed" and (c["from"] or {}).get("type") != (c["to"] or {}).get("type")
    ]
    parts = []
    if dropped:
        parts.append("dropped " + ", ".join(_q(d, 60) for d in dropped[:10]))
    if retyped:
        parts.append("retyped " + ", ".join(retyped[:10]))
    if not parts:
        return None
    return f"version {facts.version}: schema change: " + "; ".join(parts)


def protocol_upgrade(facts: CommitFacts, _t: float | None) -> str | None:
    new = facts.new_protocol
    if new is None or facts.version == 0:
        return None
    before = facts.before
    if before is None:
        return None
    old = before.protocol
    said = []
    if new.min_reader_version > old.min_reader_version or new.min_writer_version > old.min_writer_version:
        said.append(
            f"protocol {old.min_reader_version}/{old.min_writer_version} -> {new.min_reader_version}/{new.min_writer_version}"
        )
    added = sorted(set(new.reader_features or ()) | set(new.writer_features or ()))
    had = set(old.reader_features or ()) | set(old.writer_features or ())
    fresh = [f for f in added if f not in had]
    if fresh:
        said.append("new table features " + ", ".join(_q(f, 40) for f in fresh[:10]))
    if not said:
        return None
    return f"version {facts.version}: " + "; ".join(said) + " (older readers or writers may stop working)"


def ict(facts: CommitFacts, _t: float | None) -> str | None:
    new = facts.new_metadata
    if new is not None and facts.version > 0:
        before = facts.before
        was_on = before is not None and str(before.metadata.configuration.get(ICT_KEY, "")).lower() == "true"
        if was_on and str(new.configuration.get(ICT_KEY, "")).lower() != "true":
            return f"version {facts.version}: In-Commit Timestamps disabled"
    found = [a for a in facts.anomalies if a.kind in ICT_ANOMALIES]
    if found:
        first = found[0]
        return f"version {facts.version}: commit timestamp anomaly {_q(first.kind, 60)}: {_q(first.detail, 200)}"
    return None


def restore(facts: CommitFacts, _t: float | None) -> str | None:
    if facts.operation.upper() != "RESTORE":
        return None
    target = facts.parameters.get("version", facts.parameters.get("timestamp"))
    return f"version {facts.version}: RESTORE to {_q(target, 60)}"


def vacuum(facts: CommitFacts, _t: float | None) -> str | None:
    op = facts.operation.upper()
    if op == "VACUUM END" or op == "VACUUM":
        deleted = facts.metric("numDeletedFiles")
        files = f", {int(deleted)} files deleted" if deleted is not None else ""
        return f"version {facts.version}: VACUUM{files} (older versions may no longer be readable)"
    return None


def _versions(ranges: list[list[int]]) -> str:
    """[[0, 4], [7, 7]] -> "0..4, 7" (at most 10 runs named)."""
    said = [f"{a}..{b}" if a != b else f"{a}" for a, b in ranges[:10]]
    return ", ".join(said) + (f" and {len(ranges) - 10} more runs" if len(ranges) > 10 else "")


def vacuum_unreadable(event: Any, threshold: float | None) -> str | None:
    """Files the log still references found gone (a FileRemovalEvent) that made at least
    `threshold` versions unreadable."""
    least = threshold if threshold is not None and threshold >= 1 else 1
    if event.unreadable_count < least or not event.unreadable:
        return None
    what = "VACUUM" if event.vacuum_end_version is not None or event.vacuum_start_version is not None else None
    text = f"{what or 'Files removed outside the log'} made versions {_versions(event.unreadable)} unreadable"
    text += f" ({event.files} files, {event.bytes} bytes gone"
    if event.vacuum_end_version is not None or event.vacuum_start_version is not None:
        at = event.vacuum_end_version if event.vacuum_end_version is not None else event.vacuum_start_version
        text += f"; VACUUM {'END' if event.vacuum_end_version is not None else 'START'} at version {at}"
        if event.vacuum_user:
            text += f" by {_q(event.vacuum_user, 60)}"
    return text + f"; noticed after version {event.version})"


def history_rewritten(finding: Any, _t: float | None) -> str | None:
    """An already-seen commit found other than first seen (a tables HistoryRewrite): other
    bytes, gone before its log retention, or back with new content; both digests and when."""
    when = finding.first_seen_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    first = f"first seen {when} with sha256 {_q(finding.first_sha256, 64)}"
    if finding.kind == "vanished":
        return f"version {finding.version}: history rewritten: the commit vanished before its log retention allowed ({first})"
    what = "came back with other bytes" if finding.kind == "reappeared" else "was rewritten"
    return f"version {finding.version}: history rewritten: the commit {what} (sha256 now {_q(finding.found_sha256, 64)}; {first})"


def pinned_vacuum(event: Any, _t: float | None) -> str | None:
    """Files removed outside the log (a VACUUM) that pinned versions need: the VACUUM's
    commit, each pin and the bytes it alone now keeps (the version stays readable from the
    pin store)."""
    from tables.services.pins.queries import pins_met

    met = pins_met(event.table)
    if not met:
        return None
    at = event.vacuum_end_version if event.vacuum_end_version is not None else event.vacuum_start_version
    if at is not None:
        head = f"VACUUM {'END' if event.vacuum_end_version is not None else 'START'} at version {at}"
        head += f" by {_q(event.vacuum_user, 60)}" if event.vacuum_user else ""
    else:
        head = f"Files removed outside the log (noticed after version {event.version})"
    said = [
        f"pin {_q(pin.name, 60)} (version {pin.version}) alone now keeps {nbytes} bytes in {files} files"
        for pin, files, nbytes in met[:5]
    ]
    more = f" and {len(met) - 5} more pins" if len(met) > 5 else ""
    return f"{head} deleted files pinned versions need: {'; '.join(said)}{more}; they stay readable from the pin store"


def _engine(text: str) -> str:
    """The products of an engineInfo without their versions ('Apache-Spark/3.4.0 Delta-Lake/3.0.0'
    -> 'Apache-Spark Delta-Lake'): an upgrade is not a new writer."""
    return " ".join(part.split("/", 1)[0] for part in text.split())


DELTAWEB_ENGINE = ENGINE_INFO.split("/")[0] + "/"  # the engineInfo of deltaweb's own commits


def unknown_writer(facts: CommitFacts, _t: float | None) -> str | None:
    if not facts.earlier:
        return None
    if facts.commit.operation == "RESTORE" and (facts.commit.engine_info or "").startswith(DELTAWEB_ENGINE):
        return None  # deltaweb's own approved restore: on record as its request, not a stranger
    said = []
    engine = _engine(facts.commit.engine_info or "")
    engines = {_engine(c.engine_info) for c in facts.earlier if c.engine_info}
    if engine and engines and engine not in engines:
        said.append(f"writer {_q(facts.commit.engine_info)} never wrote to this table before")
    user = facts.commit.user_name or facts.commit.user_id
    users = {c.user_name or c.user_id for c in facts.earlier if c.user_name or c.user_id}
    if user and users and user not in users:
        said.append(f"user {_q(user)} never committed to this table before")
    if not said:
        return None
    return f"version {facts.version}: " + "; ".join(said)


MIN_INTERVALS = 5
DEFAULT_RATE_FACTOR = 10.0
# A median interval under a second tells no cadence one could be late on: it is what a copied
# table's commits show (every file time the copy's instant, equal, or moved 1 ms apart by the
# sync's monotonizing), or a burst of commits written at once, and "silent 10x longer" would
# then fire seconds after the copy ("no commit for 0 s, usually one every 0 s").
MIN_USUAL_MS = 1000


def rate_factor(factor: float | None) -> float:
    """N of "N times the usual interval": the setting when it means anything (above 1)."""
    return factor if factor is not None and factor > 1 else DEFAULT_RATE_FACTOR


def usual_interval(times: list[int]) -> float | None:
    """The median interval (ms) between commits at `times` (newest first); None when it tells
    nothing: fewer than MIN_INTERVALS intervals between distinct times (times all equal, as a
    copied table's are), or a median under MIN_USUAL_MS (a copy's times a millisecond apart)."""
    if len(times) < MIN_INTERVALS + 1:
        return None
    intervals = [a - b for a, b in itertools.pairwise(times) if a - b > 0]
    if len(intervals) < MIN_INTERVALS:
        return None
    usual = statistics.median(intervals)
    return usual if usual >= MIN_USUAL_MS else None


def commit_rate(facts: CommitFacts, factor: float | None) -> str | None:
    """A commit much sooner (burst) or much later (silence) than the median interval of the
    commits before it."""
    n = rate_factor(factor)
    now = facts.commit.timestamp
    times = [c.timestamp for c in facts.earlier if c.timestamp is not None]
    usual = usual_interval(times)
    if now is None or usual is None:
        return None
    gap = now - times[0]
    if gap > n * usual:
        return f"version {facts.version}: first commit after {gap / 1000:.0f} s of silence (usually {usual / 1000:.0f} s; {n:g}x)"
    if 0 <= gap * n < usual:
        return f"version {facts.version}: commit burst, {gap / 1000:.1f} s after the last (usually {usual / 1000:.0f} s; {n:g}x)"
    return None


CHECKSUM_FIELDS_SAID = 5  # the differing fields an explanation names; the version page lists them all


def _value(value: object) -> str:
    if isinstance(value, (dict, list)):
        return _q(orjson.dumps(value).decode(), 60)
    return "absent" if value is None else _q(value, 60)


def checksum_mismatch(facts: CommitFacts, _t: float | None) -> str | None:
    """A version whose checksum file (`_delta_log/N.crc`) disagrees with the log's replay."""
    row = facts.checksum
    if row is None or row.ok:
        return None
    if row.error:
        return f"version {facts.version}: its checksum file cannot be read: {_q(row.error, 200)}"
    said = "; ".join(
        f"{_q(m.get('field'), 80)}: {_value(m.get('expected'))} in the checksum, {_value(m.get('found'))} in the log"
        for m in row.mismatches[:CHECKSUM_FIELDS_SAID]
    )
    more = len(row.mismatches) - CHECKSUM_FIELDS_SAID
    tail = f" (and {more} more field{'s' if more > 1 else ''})" if more > 0 else ""
    return f"version {facts.version}: the checksum file disagrees with the log: {said}{tail}"


BUILTIN: dict[str, Builtin] = {
    b.key: b
    for b in (
        Builtin("overwrite", "Overwrite, TRUNCATE or DELETE without a predicate", Severity.CRITICAL, overwrite),
        Builtin(
            "large_removal",
            "Large removal",
            Severity.CRITICAL,
            large_removal,
            50.0,
            "percent of the table's rows or bytes",
        ),
        Builtin("schema_change", "Column dropped or retyped", Severity.WARNING, schema_change),
        Builtin("protocol_upgrade", "Protocol upgrade or new table features", Severity.WARNING, protocol_upgrade),
        Builtin("ict", "In-Commit Timestamps disabled or a timestamp anomaly", Severity.WARNING, ict),
        Builtin("restore", "RESTORE", Severity.WARNING, restore),
        Builtin("vacuum", "VACUUM", Severity.INFO, vacuum),
        Builtin("unknown_writer", "Unknown writer or user", Severity.WARNING, unknown_writer),
        Builtin("checksum_mismatch", "Checksum file disagrees with the log", Severity.CRITICAL, checksum_mismatch),
        Builtin("commit_rate", "Commit burst or silence", Severity.INFO, commit_rate, 10.0, "times the usual interval"),
        Builtin(
            "vacuum_unreadable",
            "VACUUM (or files removed outside the log) made versions unreadable",
            Severity.CRITICAL,
            vacuum_unreadable,
            1.0,
            "versions made unreadable (at least)",
            on=FILE_REMOVAL,
        ),
        Builtin(
            "history_rewritten",
            "History rewritten (a seen commit changed, vanished before its retention, or came back different)",
            Severity.CRITICAL,
            history_rewritten,
            on=HISTORY,
        ),
        Builtin("pinned_vacuum", "VACUUM met a pin", Severity.WARNING, pinned_vacuum, on=FILE_REMOVAL),
    )
}


_OPS: dict[str, Callable[[float, float], bool]] = {
    MetricOp.GT: lambda a, b: a > b,
    MetricOp.GE: lambda a, b: a >= b,
    MetricOp.LT: lambda a, b: a < b,
    MetricOp.LE: lambda a, b: a <= b,
    MetricOp.EQ: lambda a, b: a == b,
}


def custom(rule: CustomRule, facts: CommitFacts) -> str | None:
    """A user's rule: every condition it sets must hold; the explanation says which did."""
    said = []
    if rule.operation:
        if facts.operation.upper() != rule.operation.strip().upper():
            return None
        said.append(f"operation {_q(facts.operation)}")
    if rule.user:
        who = {facts.commit.user_name, facts.commit.user_id} - {""}
        if rule.user not in who:
            return None
        said.append(f"by {_q(rule.user)}")
    if rule.metric:
        value = facts.metric(rule.metric)
        op = _OPS.get(rule.metric_op)
        if value is None or op is None or rule.metric_value is None or not op(value, rule.metric_value):
            return None
        said.append(f"{_q(rule.metric)}={value:g} {MetricOp(rule.metric_op).label} {rule.metric_value:g}")
    if rule.partition:
        key, _, value = rule.partition.partition("=")
        if (key.strip(), value.strip()) not in facts.partitions_touched():
            return None
        said.append(f"touched partition {_q(rule.partition)}")
    if not said:
        return None  # a rule with no condition would fire on everything
    return f"version {facts.version}: " + ", ".join(said)
