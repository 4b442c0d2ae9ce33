"""The API fuzzed from its own OpenAPI schema (Schemathesis) on the live server.

Every operation of /api/schema/ gets generated requests as an analyst, an approver and an
anonymous client, and every response is checked: no 5xx, a documented status code and
content type, a body that conforms to the documented schema. The data is real: a table
written by delta-rs with a few versions, synced, with a pending restore request; jobs go to a
real Redis broker that no worker serves (nothing runs Spark here).

Bounded in time: a fixed seed and FUZZ_EXAMPLES examples per operation and role
(DELTAWEB_FUZZ_EXAMPLES raises it for a longer run, DELTAWEB_FUZZ_SEED walks other requests;
each run prints how many requests it sent per role).
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
import schemathesis
from django.utils import timezone
from hypothesis import HealthCheck, Phase, given, seed, settings
from rest_framework.authtoken.models import Token
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tables.models import FileRemovalEvent
from tables.services.access.roles import ANALYST, APPROVER
from tables.services.catalog import registration
from tables.services.sync import store as sync

from .test_api import make_user

deltalake = pytest.importorskip("deltalake")
from deltalake import write_deltalake  # noqa: E402

FUZZ_EXAMPLES = int(os.environ.get("DELTAWEB_FUZZ_EXAMPLES", "6"))
FUZZ_SEED = int(os.environ.get("DELTAWEB_FUZZ_SEED", "20261128"))
# Every check runs on every operation, except "a schema-valid request is accepted" where
# validity depends on the server's state, which no schema can say: the credentials are right,
# the location is a Delta table under an allowed root; and the alert endpoints, whose request
# bodies do not yet say which strings must be non-empty (minLength).
STATEFUL_VALIDITY = {
    "POST /api/auth/token/",
    "POST /api/tables/",
    "POST /api/discover/",  # a prefix is valid when it exists under the roots: the disk decides
    "POST /api/tables/{id}/pins/",  # the version must be in the log, the name new to the table
    "POST /api/pins/{id}/unpin/",  # the pin must exist and be active
    "POST /api/pins/{id}/approve/",  # ... have a removal awaiting a decision
    "POST /api/pins/{id}/reject/",
    "POST /api/alerts/rules/",
    "POST /api/alerts/subscriptions/",
    "POST /api/alerts/webhooks/",
}
ROLES = ("analyst", "approver", "anonymous")


@pytest.fixture
def fuzz_site(live_server, redis_url, settings, tmp_path):
    """The live server with data and a broker; the tokens of an analyst and an approver."""
    from deltaweb.celery import app

    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    settings.DELTAWEB_PIN_STORE = str(tmp_path / "pins")  # pins the fuzzer makes stay in the test's directory
    old = app.conf.broker_url, app.conf.task_always_eager
    app.conf.broker_url, app.conf.task_always_eager = redis_url, False
    app._pool = None
    app.amqp._producer_pool = None
    path = tmp_path / "sales"
    for i in range(4):
        write_deltalake(str(path), pa.table({"id": pa.array([i], pa.int64()), "s": [f"r{i}"]}), mode="append")
    table = registration.register_table("sales", str(path))
    sync.sync_table(table.pk)
    # a file removal on the record (its answers are checked against the schema too)
    FileRemovalEvent.objects.create(
        table=table,
        noticed_at=timezone.now(),
        version=3,
        previous_version=2,
        files=1,
        bytes=10,
        paths=["part-0.parquet"],
        unreadable=[[0, 2]],
        unreadable_count=3,
        unreadable_from=0,
        unreadable_to=2,
        vacuum_end_version=3,
        vacuum_user="ops",
    )
    tokens = {
        "analyst": Token.objects.create(user=make_user("ana", group=ANALYST)).key,
        "approver": Token.objects.create(user=make_user("apo", group=APPROVER)).key,
    }
    from tables.services.restores import requests as restore_requests

    restore_requests.request_restore(table, make_user("ana2", group=ANALYST), version=1, reason="fuzz")
    yield live_server.url, tokens
    app.conf.broker_url, app.conf.task_always_eager = old
    app._pool = None
    app.amqp._producer_pool = None


def checked(operation, url: str, headers: dict[str, str], excluded: list, sent: list[int]):
    """A Hypothesis test of one operation: FUZZ_EXAMPLES generated requests (FUZZ_SEED), each
    sent to the live server and validated with every check but `excluded`; `sent` counts them."""

    @seed(FUZZ_SEED)
    @settings(
        max_examples=FUZZ_EXAMPLES,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
        database=None,
        phases=[Phase.explicit, Phase.generate],  # no shrinking: the report names the case
    )
    @given(case=operation.as_strategy())
    def check(case) -> None:
        sent[0] += 1
        case.call_and_validate(base_url=url, headers=headers, timeout=60, excluded_checks=excluded)

    return check


def fuzz(fuzz_site, role: str) -> None:
    """Every operation of the schema, FUZZ_EXAMPLES generated requests each (FUZZ_SEED), sent to
    the live server as `role`; all failures are collected and reported together."""
    url, tokens = fuzz_site
    auth = {"Authorization": f"Token {tokens['analyst']}"}
    api = schemathesis.openapi.from_url(f"{url}/api/schema/", headers=auth, timeout=60)
    headers = {"Authorization": f"Token {tokens[role]}"} if role in tokens else {}
    failures: list[str] = []
    operations = 0
    sent = [0]
    for result in api.get_all_operations():
        operation = result.ok()
        operations += 1
        excluded = [positive_data_acceptance] if operation.label in STATEFUL_VALIDITY else []
        try:
            checked(operation, url, headers, excluded, sent)()
        except (Exception, BaseExceptionGroup) as exc:  # one operation's failures must not hide the others'
            failures.append(f"{operation.label}: {str(exc)[:1500]}")
    print(f"schemathesis as {role}: {sent[0]} requests to {operations} operations (seed {FUZZ_SEED})")
    assert operations >= 40  # the whole API, not an empty or unreadable schema
    assert not failures, f"{len(failures)} of {operations} operations as {role}:\n\n" + "\n\n".join(failures)


@pytest.mark.django_db(transaction=True)
def test_api_as_an_analyst(fuzz_site) -> None:
    fuzz(fuzz_site, "analyst")


@pytest.mark.django_db(transaction=True)
def test_api_as_an_approver(fuzz_site) -> None:
    fuzz(fuzz_site, "approver")


@pytest.mark.django_db(transaction=True)
def test_api_anonymously(fuzz_site) -> None:
    fuzz(fuzz_site, "anonymous")
