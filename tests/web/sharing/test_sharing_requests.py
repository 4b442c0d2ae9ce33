"""A recipient's requests that must never be a 5xx nor tell one refusal from another: JSON
nested at any depth in a query's body, and bearer tokens that are unknown, expired or revoked
(answered alike), wrong ones counted per address and refused with 429 past
DELTAWEB_SHARING_TOKEN_RATE, a good token from elsewhere still served."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from tables.models import Recipient, Share, SharedTable, Table
from tables.services.sharing.recipients import issue_token, revoke
from tests.conftest import golden_path

URL = "/delta-sharing/shares/s1/schemas/default/tables/t"


@pytest.fixture
def shared(db, settings):
    path = golden_path("time-travel-partition-changes-b")
    settings.DELTAWEB_ALLOWED_ROOTS = [str(path.parent)]
    settings.DELTAWEB_SHARING_TOKEN_RATE = "5/minute"
    table = Table.objects.create(name="t", slug="t", location=str(path))
    share = Share.objects.create(name="s1")
    SharedTable.objects.create(share=share, name="t", table=table)
    recipient = Recipient.objects.create(name="partner")
    recipient.shares.add(share)
    return recipient, issue_token(recipient)


def nested(depth: int) -> dict:
    """{"op": "and", "children": [{"op": "and", "children": [...]}]}, `depth` objects deep."""
    node: dict = {"op": "equal", "children": [{"op": "column", "name": "x"}, {"op": "literal", "value": "1"}]}
    for _ in range(depth - 1):
        node = {"op": "and", "children": [node]}
    return node


def test_json_nested_at_any_depth_is_answered_without_a_server_error(shared) -> None:
    _recipient, token = shared
    client = Client()
    statuses = {}
    for depth in (10, 30, 100, 130, 255, 256, 400, 600, 1000, 10_000):
        body = '{"jsonPredicateHints": ' + _dumps(nested(depth)) + "}"
        r = client.post(f"{URL}/query", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
        statuses[depth] = r.status_code
        assert r.status_code < 500, (depth, r.content[:200])
        if r.status_code >= 400:
            assert r.json()["errorCode"] == "INVALID_PARAMETER_VALUE", r.json()
    # shallow hints are applied (or ignored) and answered; deep ones are refused as a client's error
    assert statuses[10] == statuses[30] == 200
    assert {statuses[d] for d in (130, 255, 256, 400, 600, 1000, 10_000)} == {400}
    # the same depth as a string hint: parsed and bounded the same way
    deep = _dumps(nested(400))
    r = client.post(
        f"{URL}/query",
        {"jsonPredicateHints": deep},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert r.status_code == 200


def _dumps(node: dict) -> str:
    """Without recursion (json.dumps and orjson both stop short of 10,000 levels)."""
    opened, closed, leaf = [], [], None
    while node.get("op") == "and":
        opened.append('{"op": "and", "children": [')
        closed.append("]}")
        node = node["children"][0]
    import json

    leaf = json.dumps(node)
    return "".join(opened) + leaf + "".join(reversed(closed))


def test_unknown_expired_and_revoked_tokens_are_answered_alike(shared) -> None:
    recipient, token = shared
    client = Client()

    def answer(tok: str) -> tuple[int, bytes]:
        r = client.get("/delta-sharing/shares", HTTP_AUTHORIZATION=f"Bearer {tok}", REMOTE_ADDR="10.0.0.1")
        return r.status_code, r.content

    unknown = answer("not-a-token")
    recipient.expires_at = timezone.now() - timedelta(seconds=1)
    recipient.save()
    expired = answer(token)
    recipient.expires_at = timezone.now() + timedelta(days=1)
    recipient.save()
    assert answer(token)[0] == 200
    revoke(recipient)
    revoked = answer(token)
    assert unknown == expired == revoked
    assert unknown[0] == 401


def test_wrong_tokens_are_throttled_per_address(shared) -> None:
    _recipient, token = shared
    client = Client()

    def get(tok: str, address: str):
        return client.get("/delta-sharing/shares", HTTP_AUTHORIZATION=f"Bearer {tok}", REMOTE_ADDR=address)

    assert [get(f"wrong-{i}", "10.0.0.2").status_code for i in range(5)] == [401] * 5
    throttled = get("wrong-5", "10.0.0.2")
    assert throttled.status_code == 429 and throttled.json()["errorCode"] == "RESOURCE_EXHAUSTED"
    assert int(throttled["Retry-After"]) == 60
    # while the address is throttled no token is looked at, a good one neither
    assert get(token, "10.0.0.2").status_code == 429
    # another address is not: its good token is served, and a missing token is not a guess
    assert get(token, "10.0.0.3").status_code == 200
    assert client.get("/delta-sharing/shares", REMOTE_ADDR="10.0.0.4").status_code == 401
