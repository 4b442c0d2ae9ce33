"""The alerts API fuzzed from its OpenAPI schema (Schemathesis, in-process through WSGI):
generated requests to every alerts operation, as an analyst; no 5xx, documented statuses,
bodies that match the schema. A fixed seed and a few examples per operation."""

from __future__ import annotations

import pyarrow as pa
import pytest
from django.contrib.auth.models import Group
from rest_framework.authtoken.models import Token

from alerts.detect import evaluate
from tables.services.access import roles
from tables.services.sync import store as sync
from tests.alerts.conftest import register_and_sync

schemathesis = pytest.importorskip("schemathesis")
deltalake = pytest.importorskip("deltalake")
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from schemathesis.specs.openapi.checks import positive_data_acceptance  # noqa: E402

OPERATIONS = r"^/api/(alerts|activity)"


@pytest.fixture
def alerts_schema(roots, django_user_model, settings):
    settings.DELTAWEB_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    path = roots / "orders"
    deltalake.write_deltalake(str(path), pa.table({"id": [1, 2, 3]}))
    table = register_and_sync("orders", path)
    deltalake.DeltaTable(str(path)).delete()
    sync.sync_table(table.pk)
    evaluate.evaluate(table, [1])
    user = django_user_model.objects.create_user("ana", email="ana@example.com", password="x-secret-pass-1")
    user.groups.add(Group.objects.get_or_create(name=roles.ANALYST)[0])
    token = Token.objects.create(user=user).key
    from deltaweb.wsgi import application

    schema = schemathesis.openapi.from_wsgi("/api/schema/", application, headers={"Authorization": f"Token {token}"})
    return schema.include(path_regex=OPERATIONS), token


@pytest.mark.django_db(transaction=True)
def test_alerts_api_conforms_to_its_schema(alerts_schema) -> None:
    schema, token = alerts_schema
    headers = {"Authorization": f"Token {token}"}
    seen = []
    for result in schema.get_all_operations():
        op = result.ok()
        seen.append(op.label)

        @seed(42)
        @settings(
            max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), database=None
        )
        @given(op.as_strategy())
        def run(case) -> None:
            # semantic checks (a rule needs a condition, an e-mail subscription an address) answer
            # 400 to bodies the schema allows: documented, so positive-data acceptance is not asked
            case.call_and_validate(headers=headers, excluded_checks=[positive_data_acceptance])

        run()
    assert len(seen) >= 15, seen
