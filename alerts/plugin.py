"""What the alerts app contributes to the host's pages and metrics (tables.plugins), registered
in AlertsConfig.ready(): the table list's "with alerts" filter and Alerts column, the Overview's
Alerts card, the Activity and Alert rules links in the navigation, the live commits feed in
every tab of a table, and the deliveries by channel and state in /metrics."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily

from tables import plugins

ALERTS_SHOWN = 5  # the Overview card's latest alerts


def _with_alerts(tables: Any) -> Any:
    return tables.filter(alerts__isnull=False)


def _alert_counts(ids: list[int]) -> dict[int, int]:
    from alerts.models import Alert

    return dict(Alert.objects.filter(table_id__in=ids).values_list("table_id").annotate(n=Count("id")))


def _overview(table: Any) -> dict[str, Any]:
    from alerts.models import Alert

    alerts = Alert.objects.filter(table=table)
    return {"alerts": list(alerts[:ALERTS_SHOWN]), "total": alerts.count()}


def _deliveries() -> Iterator[object]:
    from alerts.models import Delivery

    out = GaugeMetricFamily(
        "deltaweb_alert_deliveries", "alert deliveries by channel and state", labels=["channel", "state"]
    )
    for channel, state, n in Delivery.objects.values_list("channel", "status").annotate(n=Count("id")):
        out.add_metric([channel, state], n)
    yield out


def register() -> None:
    plugins.register(
        plugins.TableFilter("alerts", "with alerts", _with_alerts),
        plugins.TableColumn("alerts", "Alerts", _alert_counts),
        plugins.OverviewPanel("alerts", "alerts/_overview_panel.html", _overview),
        plugins.Include("alerts-nav", "alerts/_nav.html", "nav"),
        plugins.Include("alerts-live", "alerts/_live_commits.html", "frame"),
        plugins.Collector("alerts-deliveries", _deliveries),
    )
