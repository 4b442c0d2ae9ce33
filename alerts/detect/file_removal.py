"""Rules on files removed outside the log: the sync's look at a table's files stores a
FileRemovalEvent and sends tables.signals.files_removed; the built-in rules `on` FILE_REMOVAL
look at the event (not at a commit) and each firing is stored as an Alert on the VACUUM's
version when the event is attributed to one, else on the version it was noticed after."""

from __future__ import annotations

from alerts.detect.evaluate import record
from alerts.detect.rules import BUILTIN, FILE_REMOVAL
from alerts.models import Alert, RuleSetting
from tables.models import Commit, FileRemovalEvent


def alert_version(event: FileRemovalEvent) -> int:
    """The version an event's alert is stored on: its VACUUM END, START, or where it was noticed."""
    for v in (event.vacuum_end_version, event.vacuum_start_version, event.version):
        if v is not None:
            return v
    return event.version


def fire_on_event(event_id: int) -> list[Alert]:
    """Fire the file-removal rules in force on the table on one event; each firing stored once."""
    event = FileRemovalEvent.objects.select_related("table").filter(pk=event_id).first()
    if event is None:
        return []
    table = event.table
    settings = {s.rule: s for s in RuleSetting.objects.filter(table=table)}
    version = alert_version(event)
    commit = Commit.objects.filter(table=table, version=version).first()
    created = []
    for key, rule in BUILTIN.items():
        s = settings.get(key)
        if rule.on != FILE_REMOVAL or (s is not None and not s.enabled):
            continue
        threshold = s.threshold if s is not None and s.threshold is not None else rule.threshold
        text = rule.check(event, threshold)
        if not text:
            continue
        severity = s.severity if s is not None and s.severity else rule.severity
        alert = record(table, commit, version, commit.operation if commit else "", (key, rule.name, severity, text))
        if alert is not None:
            created.append(alert)
    return created
