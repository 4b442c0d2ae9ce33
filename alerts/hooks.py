"""Where alerts hear from tables: the receiver of tables.signals.commits_stored (sent by the
sync after storing new commits). Light on imports on purpose: it runs inside every sync, and
must not pull in the rules."""

from __future__ import annotations

from django.db import transaction

from alerts import queue
from alerts.models import DeliveryStatus, Scan, ScanStatus
from tables.models import Table


def commits_stored(table: Table, versions: list[int], *, first_sync: bool) -> Scan | None:
    """New commits of `table` are stored: a Scan row, sent to a worker when the caller's
    transaction commits. The first sync of a table stores its past, which is no news: nothing
    is evaluated then. Never slows the sync: one row, one message."""
    if first_sync or not versions:
        return None
    scan = Scan.objects.create(table=table, first_version=min(versions), last_version=max(versions))
    transaction.on_commit(lambda: queue.send_quietly(queue.EVALUATE_TASK, scan.pk))
    return scan


def on_commits_stored(sender, *, table: Table, versions: list[int], first_sync: bool, **kwargs) -> None:
    """The signal's receiver (connected in AlertsConfig.ready)."""
    commits_stored(table, versions, first_sync=first_sync)


def on_files_removed(sender, *, table: Table, event, **kwargs) -> None:
    """The receiver of tables.signals.files_removed (the sync's look found referenced files
    gone): the file-removal rules fire once the sync's transaction commits. Here and not in a
    task: an event is rare, its rules read no log, and a broker that is down must not lose it.
    A failure is logged, never raised into the sync."""
    event_id = event.pk

    def fire() -> None:
        from alerts.detect.file_removal import fire_on_event  # the rules, only when needed

        fire_on_event(event_id)

    transaction.on_commit(fire, robust=True)


def on_history_rewritten(sender, *, table: Table, finding, **kwargs) -> None:
    """The receiver of tables.signals.history_rewritten (a look found a seen commit changed):
    the history rule fires once the look's transaction commits, here for the same reasons as
    file removals (rare, reads no log, must not be lost with the broker)."""
    finding_id = finding.pk

    def fire() -> None:
        from alerts.detect.history import fire_on_finding  # the rules, only when needed

        fire_on_finding(finding_id)

    transaction.on_commit(fire, robust=True)


def on_prune(sender, *, before, **kwargs) -> dict[str, int]:
    """tables' daily pruning (tables.signals.prune): finished scans, and finished deliveries
    with their attempt logs, older than `before`. Alerts themselves are the record: kept."""
    from alerts.models import Delivery

    scans, _ = Scan.objects.filter(status__in=(ScanStatus.DONE, ScanStatus.FAILED), finished_at__lt=before).delete()
    finished = (DeliveryStatus.DELIVERED, DeliveryStatus.FAILED)
    deliveries = (
        Delivery.objects.filter(status__in=finished, created_at__lt=before).delete()[1].get("alerts.Delivery", 0)
    )
    return {"alert_scans": scans, "alert_deliveries": deliveries}
