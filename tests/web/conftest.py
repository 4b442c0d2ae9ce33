"""Fixtures the page tests share: allowed roots under tmp_path, an analyst who signs in with a
password, and a browser client signed in as that analyst."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from tables.services.access import roles


@pytest.fixture
def roots(settings, tmp_path):
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    return tmp_path


@pytest.fixture
def analyst(django_user_model):
    user = django_user_model.objects.create_user("ana", password="secret-pass-1")
    user.groups.add(Group.objects.get_or_create(name=roles.ANALYST)[0])
    return user


@pytest.fixture
def browser(client, analyst):
    client.force_login(analyst)
    return client


@pytest.fixture
def eager_celery():
    """Tasks run in the caller's process when sent (a job enqueued on commit runs then)."""
    from deltaweb.celery import app

    old = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = old
