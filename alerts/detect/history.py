"""The rule on rewritten history: a look at a table's log (tables.services.chain.look) stores
a HistoryRewrite and sends tables.signals.history_rewritten; the built-in rules `on` HISTORY
look at the finding and each firing is stored as an Alert on its version (once per version)."""

from __future__ import annotations

from alerts.detect.evaluate import record
from alerts.detect.rules import BUILTIN, HISTORY
from alerts.models import Alert, RuleSetting
from tables.models import Commit, HistoryRewrite


def fire_on_finding(finding_id: int) -> list[Alert]:
    """Fire the history rules in force on the table on one finding; each firing stored once."""
    finding = HistoryRewrite.objects.select_related("table").filter(pk=finding_id).first()
    if finding is None:
        return []
    table = finding.table
    settings = {s.rule: s for s in RuleSetting.objects.filter(table=table)}
    commit = Commit.objects.filter(table=table, version=finding.version).first()
    created = []
    for key, rule in BUILTIN.items():
        s = settings.get(key)
        if rule.on != HISTORY or (s is not None and not s.enabled):
            continue
        text = rule.check(finding, s.threshold if s is not None else rule.threshold)
        if not text:
            continue
        severity = s.severity if s is not None and s.severity else rule.severity
        firing = (key, rule.name, severity, text)
        alert = record(table, commit, finding.version, commit.operation if commit else "", firing)
        if alert is not None:
            created.append(alert)
    return created
