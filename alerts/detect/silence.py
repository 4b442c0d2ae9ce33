"""Silence without a new commit: the commit-rate rule fires on silence only when the next
commit arrives, so a periodic check (the beat's "alerts-silence" entry) looks at every synced
table and fires when the time since its latest commit exceeds N times its usual (median)
interval.

The alert is recorded on the latest version under the key SILENCE_RULE, so the table/version/
rule uniqueness makes it once per silence: later checks of the same silence add nothing, and
the next silence (after a new commit) is a new alert. It obeys the table's "commit_rate"
setting (switch, factor, severity) and is delivered like any other alert.
"""

from __future__ import annotations

import time
from typing import Any

from alerts.detect.evaluate import record
from alerts.detect.facts import HISTORY_WINDOW
from alerts.detect.rules import BUILTIN, rate_factor, usual_interval
from alerts.models import RuleSetting
from tables.models import Commit, SyncState, Table

RATE_RULE = "commit_rate"
SILENCE_RULE = "silence"
SILENCE_NAME = "Commit silence (no new commit)"


def _now_ms() -> int:
    return int(time.time() * 1000)


def silence_of(times: list[int], now_ms: int, factor: float | None) -> str | None:
    """The explanation when `now_ms` is more than N usual intervals after the newest of `times`
    (newest first), else None."""
    n = rate_factor(factor)
    usual = usual_interval(times)
    if usual is None:
        return None
    gap = now_ms - times[0]
    if gap <= n * usual:
        return None
    return f"no commit for {gap / 1000:.0f} s (usually one every {usual / 1000:.0f} s; {n:g}x)"


def check_tables(now_ms: int | None = None) -> dict[str, Any]:
    """Fire the silence alert on every synced table that is silent beyond its threshold, as of
    its last sync. Tables whose sync failed are left out: their silence may be ours, not the
    writers'."""
    now = _now_ms() if now_ms is None else now_ms
    rule = BUILTIN[RATE_RULE]
    settings = {s.table_id: s for s in RuleSetting.objects.filter(rule=RATE_RULE)}
    checked = fired = 0
    tables = Table.objects.filter(last_synced_version__isnull=False).exclude(sync_state=SyncState.ERROR)
    for table in tables.iterator():
        s = settings.get(table.pk)
        if s is not None and not s.enabled:
            continue
        checked += 1
        rows = list(
            Commit.objects.filter(table=table, timestamp__isnull=False)
            .order_by("-version")
            .only("pk", "version", "timestamp", "operation", "table_id")[: HISTORY_WINDOW + 1]
        )
        if not rows:
            continue
        # the log is known only up to the last sync: a stalled sync is not a silent table
        seen_until = min(now, int(table.last_synced_at.timestamp() * 1000)) if table.last_synced_at else now
        text = silence_of([c.timestamp for c in rows], seen_until, s.threshold if s is not None else rule.threshold)
        if text is None:
            continue
        latest = rows[0]
        severity = s.severity if s is not None and s.severity else rule.severity
        firing = (SILENCE_RULE, SILENCE_NAME, severity, f"after version {latest.version}: {text}")
        if record(table, latest, latest.version, "", firing) is not None:
            fired += 1
    return {"checked": checked, "alerts": fired}
