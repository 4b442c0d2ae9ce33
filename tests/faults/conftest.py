"""Fixtures of the fault suite: the webhook receiver the alerts tests use."""

from tests.alerts.receivers import receiver  # noqa: F401 (a fixture)
