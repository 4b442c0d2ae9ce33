"""API tokens: one per user, expiring, shown once, rotated and revoked from the account page;
an expired token is refused by the API, and the token endpoint then hands out a new one."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tables.models import TokenExpiry

pytestmark = pytest.mark.django_db


def api(key: str) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return c


def test_the_account_page_issues_shows_once_rotates_and_revokes(browser, analyst) -> None:
    page = browser.get("/account/").content.decode()
    assert "You have no API token." in page and "analyst" in page
    made = browser.post("/account/", {"action": "issue", "days": "30"})
    key = re.search(r'<code id="token-key">([0-9a-f]{40})</code>', made.content.decode())[1]
    assert made["Cache-Control"] == "no-store"
    assert api(key).get("/api/tables/").status_code == 200
    expires = TokenExpiry.objects.get(token_id=key).expires_at
    assert timedelta(days=29) < expires - timezone.now() <= timedelta(days=30)
    again = browser.get("/account/").content.decode()
    assert key not in again and key[:4] in again and "works until" in again  # never shown twice

    rotated = browser.post("/account/", {"action": "issue", "days": "7"}).content.decode()
    new_key = re.search(r'<code id="token-key">([0-9a-f]{40})</code>', rotated)[1]
    assert new_key != key and api(key).get("/api/tables/").status_code == 401
    assert api(new_key).get("/api/tables/").status_code == 200

    assert browser.post("/account/", {"action": "revoke"}).status_code == 302
    assert api(new_key).get("/api/tables/").status_code == 401
    assert not Token.objects.filter(user=analyst).exists()


def test_an_expired_token_is_refused_and_the_endpoint_gives_a_new_one(analyst) -> None:
    anon = APIClient()
    first = anon.post("/api/auth/token/", {"username": "ana", "password": "secret-pass-1"}, format="json").json()[
        "token"
    ]
    assert api(first).get("/api/tables/").status_code == 200
    same = anon.post("/api/auth/token/", {"username": "ana", "password": "secret-pass-1"}, format="json").json()[
        "token"
    ]
    assert same == first  # still valid: the same token
    TokenExpiry.objects.filter(token_id=first).update(expires_at=timezone.now() - timedelta(seconds=1))
    refused = api(first).get("/api/tables/")
    assert refused.status_code == 401 and refused.json()["error"]["message"] == "Invalid token."
    fresh = anon.post("/api/auth/token/", {"username": "ana", "password": "secret-pass-1"}, format="json").json()[
        "token"
    ]
    assert fresh != first and api(fresh).get("/api/tables/").status_code == 200
