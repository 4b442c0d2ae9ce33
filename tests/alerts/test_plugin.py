"""The alerts app contributes to the host's pages and metrics through tables.plugins alone."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tables import plugins

pytestmark = pytest.mark.django_db


def test_alerts_registers_its_filter_column_panel_includes_and_collector() -> None:
    assert [f.key for f in plugins.table_filters()] == ["alerts"]
    assert [c.header for c in plugins.table_columns()] == ["Alerts"]
    assert [p.template for p in plugins.overview_panels()] == ["alerts/_overview_panel.html"]
    assert plugins.includes("nav") == ["alerts/_nav.html"]
    assert plugins.includes("frame") == ["alerts/_live_commits.html"]


def test_its_deliveries_are_in_the_metrics(client) -> None:
    r = client.get("/metrics")
    assert r.status_code == 200
    names = {f.name for f in text_string_to_metric_families(r.content.decode())}
    assert "deltaweb_alert_deliveries" in names
