"""Evaluating the rules on newly stored commits: the sync's hook makes a Scan row (enqueued
when the sync's transaction commits), a worker claims it, fires the rules, stores each
firing as an Alert and fans it out to the subscribers (alerts.notify.fanout).

A sync never waits for any of this: the hook only writes one row and sends one message.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from alerts.detect.facts import CommitFacts, commit_facts
from alerts.detect.rules import BUILTIN, COMMIT, custom
from alerts.models import Alert, CustomRule, RuleSetting, Scan, ScanStatus
from alerts.notify import fanout
from tables.models import Commit, Table
from tables.services.errors import one_line
from tables.services.jobs import faults

logger = logging.getLogger("alerts")

# a scan of more commits than this (a table that was away for long) is cut to the newest ones
MAX_SCAN_COMMITS = 5000


def _claim(scan_id: int) -> bool:
    queued = Scan.objects.filter(pk=scan_id, status=ScanStatus.QUEUED)
    return queued.update(status=ScanStatus.RUNNING, claimed_at=timezone.now()) == 1


def run_scan(scan_id: int) -> dict[str, Any]:
    """The worker's side: claim the scan (queued -> running once), evaluate, record the outcome."""
    if not _claim(scan_id):
        return {"skipped": True}
    faults.reached("scan-claimed")
    scan = Scan.objects.select_related("table").get(pk=scan_id)
    lo = max(scan.first_version, scan.last_version - MAX_SCAN_COMMITS + 1)
    try:
        alerts = evaluate(scan.table, list(range(lo, scan.last_version + 1)))
    except Exception as exc:
        Scan.objects.filter(pk=scan.pk).update(
            status=ScanStatus.FAILED, error=one_line(f"{type(exc).__name__}: {exc}"), finished_at=timezone.now()
        )
        logger.exception("alert scan %s of table %s failed", scan.pk, scan.table_id)
        return {"error": str(exc)}
    Scan.objects.filter(pk=scan.pk).update(status=ScanStatus.DONE, alerts=len(alerts), finished_at=timezone.now())
    return {"alerts": len(alerts)}


@dataclass(frozen=True)
class RulesInForce:
    """What runs on a table: its built-in rule settings and the users' enabled rules (read
    once per scan, not once per commit)."""

    settings: dict[str, RuleSetting]
    custom: list[CustomRule]

    @classmethod
    def of(cls, table: Table) -> RulesInForce:
        return cls(
            {s.rule: s for s in RuleSetting.objects.filter(table=table)},
            list(CustomRule.objects.filter(Q(table=table) | Q(table__isnull=True), enabled=True)),
        )


def fire(rules: RulesInForce, facts: CommitFacts) -> list[tuple[str, str, str, str]]:
    """(rule key, rule name, severity, explanation) of every rule that fires on one commit."""
    out = []
    for key, rule in BUILTIN.items():
        s = rules.settings.get(key)
        if rule.on != COMMIT or (s is not None and not s.enabled):
            continue
        threshold = s.threshold if s is not None and s.threshold is not None else rule.threshold
        text = rule.check(facts, threshold)
        if text:
            out.append((key, rule.name, (s.severity if s is not None and s.severity else rule.severity), text))
    for r in rules.custom:
        text = custom(r, facts)
        if text:
            out.append((f"custom:{r.pk}", r.name, r.severity, text))
    return out


def record(table: Table, commit: Commit | None, version: int, operation: str, firing: tuple[str, str, str, str]):
    """Store one firing (rule key, rule name, severity, explanation) as an Alert and fan it out
    to the subscribers; None when that rule fired on that version already."""
    key, name, severity, text = firing
    try:
        with transaction.atomic():
            alert = Alert.objects.create(
                table=table,
                commit=commit,
                version=version,
                operation=operation[:200],
                rule=key,
                rule_name=name[:200],
                severity=severity,
                explanation=one_line(text, 500),
            )
            fanout.fan_out(alert)
    except IntegrityError:
        return None  # fired already (a scan redelivered, a rebuilt history, a second silence check)
    return alert


def evaluate(table: Table, versions: list[int]) -> list[Alert]:
    """Fire the rules on the stored commits of `versions`; each firing is stored once (a scan
    run twice adds nothing) and fanned out to the subscribers when it is new."""
    created = []
    rules = RulesInForce.of(table)
    for facts in commit_facts(table, versions):
        for firing in fire(rules, facts):
            alert = record(table, facts.commit, facts.version, facts.operation, firing)
            if alert is not None:
                created.append(alert)
    return created
