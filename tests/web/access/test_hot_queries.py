"""The written-out lookups every request makes give the instances the ORM gives: every field's
value and type (dates with their zone and microseconds, booleans, 64-bit numbers, nulls), on
the database the suite runs on (SQLite, and PostgreSQL in its pass), and None where the ORM
finds nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Group
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.utils import timezone

from tables.models import Table
from tables.services.access import hot_queries, roles

pytestmark = pytest.mark.django_db


def _values(obj) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields}


def _same(found, expected) -> None:
    assert found is not None
    assert _values(found) == _values(expected)
    assert {k: type(v) for k, v in _values(found).items()} == {k: type(v) for k, v in _values(expected).items()}


def test_a_table_by_slug_or_id_equals_the_orms_row(analyst) -> None:
    when = datetime(2026, 11, 26, 4, 5, 6, 789012, tzinfo=UTC)
    table = Table.objects.create(
        name="Sales <daily>",
        slug="sales-daily",
        location="/data/sales",
        description="ünïcode",
        created_by=analyst,
        sync_lease_until=when,
        last_synced_version=2**40,
        last_synced_at=when + timedelta(days=1),
        ict_enabled=True,
        ict_enablement_version=7,
        ict_enablement_timestamp=1_795_665_156_061,
        earliest_version=0,
        num_files=None,
        size_bytes=2**62,
    )
    other = Table.objects.create(name="Other", slug="other", location="/data/other")
    expected = Table.objects.get(pk=table.pk)
    for found in (hot_queries.table_row(slug="sales-daily"), hot_queries.table_row(pk=table.pk)):
        _same(found, expected)
        assert found.last_synced_at == when + timedelta(days=1) and found.ict_enabled is True
        assert found.created_by == analyst  # the related row loads on first use
    _same(hot_queries.table_row(slug="other"), Table.objects.get(pk=other.pk))
    assert hot_queries.table_row(slug="missing") is None
    assert hot_queries.table_row(pk=other.pk + 1000) is None


def test_a_user_by_id_or_token_equals_the_orms_row_with_its_roles(analyst, django_user_model) -> None:
    from rest_framework.authtoken.models import Token

    analyst.groups.add(Group.objects.get_or_create(name=roles.APPROVER)[0])
    analyst.last_login = timezone.now()
    analyst.save()
    key = Token.objects.create(user=analyst).key
    expected = django_user_model.objects.get(pk=analyst.pk)
    for found in (hot_queries.user_row(analyst.pk), hot_queries.user_row(str(analyst.pk)), hot_queries.token_user(key)):
        _same(found, expected)
        assert found.known_groups == {role: role in (roles.ANALYST, roles.APPROVER) for role in roles.ROLES}
    assert hot_queries.user_row(analyst.pk + 1000) is None
    assert hot_queries.user_row("not a number") is None
    assert hot_queries.token_user("0" * 40) is None


def test_a_session_is_found_until_it_expires() -> None:
    store = SessionStore()
    store["answer"] = 42
    store.create()
    found = hot_queries.session_row(store.session_key)
    _same(found, Session.objects.get(session_key=store.session_key))
    assert found.get_decoded()["answer"] == 42
    Session.objects.filter(session_key=store.session_key).update(expire_date=timezone.now() - timedelta(seconds=1))
    assert hot_queries.session_row(store.session_key) is None
    assert hot_queries.session_row("") is None
    assert hot_queries.session_row("x" * 32) is None
