"""The register_table and create_roles management commands."""

from __future__ import annotations

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command

from tables.models import Commit, Table
from tests.web.ui_tables import history_table

pytest.importorskip("deltalake")

pytestmark = pytest.mark.django_db


@pytest.fixture
def roots(settings, tmp_path):
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    return tmp_path


def test_register_table_prints_the_id_and_syncs(roots, capsys) -> None:
    path = history_table(roots / "sales")
    call_command("register_table", "Sales", str(path), "--description", "orders", "--sync")
    out = capsys.readouterr()
    table = Table.objects.get()
    assert out.out.strip() == str(table.pk)
    assert "synced Sales: 4 commits, latest version 3" in out.err
    assert (table.description, table.last_synced_version) == ("orders", 3)
    assert Commit.objects.filter(table=table).count() == 4


def test_register_table_without_sync_only_registers(roots, capsys) -> None:
    call_command("register_table", "Sales", str(history_table(roots / "sales")))
    assert capsys.readouterr().out.strip() == str(Table.objects.get().pk)
    assert Commit.objects.count() == 0


def test_register_table_errors_exit_2_with_one_line(roots, tmp_path_factory, capsys) -> None:
    outside = tmp_path_factory.mktemp("elsewhere")
    with pytest.raises(SystemExit) as exc:
        call_command("register_table", "x", str(outside))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "outside the allowed roots" in err
    (roots / "plain").mkdir()
    with pytest.raises(SystemExit):
        call_command("register_table", "x", str(roots / "plain"))
    assert "is not a Delta table" in capsys.readouterr().err
    assert Table.objects.count() == 0


def test_create_roles_makes_groups_only(capsys) -> None:
    call_command("create_roles")
    assert set(Group.objects.values_list("name", flat=True)) == {"analyst", "approver", "writer"}
    assert get_user_model().objects.count() == 0
    call_command("create_roles")  # idempotent
    assert Group.objects.count() == 3


def test_create_roles_demo_users_with_password_from_env(monkeypatch, capsys) -> None:
    monkeypatch.setenv("DELTAWEB_DEMO_PASSWORD", "demo-pass-123")
    call_command("create_roles", "--demo-users")
    assert "demo-pass-123" not in capsys.readouterr().out
    analyst = authenticate(username="analyst", password="demo-pass-123")
    approver = authenticate(username="approver", password="demo-pass-123")
    admin = authenticate(username="admin", password="demo-pass-123")
    assert list(analyst.groups.values_list("name", flat=True)) == ["analyst"]
    assert list(approver.groups.values_list("name", flat=True)) == ["approver"]
    assert admin.is_staff and admin.is_superuser and not analyst.is_staff


def test_create_roles_demo_users_with_a_printed_random_password(monkeypatch, capsys) -> None:
    monkeypatch.delenv("DELTAWEB_DEMO_PASSWORD", raising=False)
    call_command("create_roles", "--demo-users")
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("password for "))
    password = line.split(": ", 1)[1]
    assert len(password) >= 12 and authenticate(username="admin", password=password) is not None
    call_command("create_roles", "--demo-users")  # existing users keep their password
    assert "password for" not in capsys.readouterr().out
    assert authenticate(username="analyst", password=password) is not None


def test_a_relative_allowed_root_is_the_project_directorys(tmp_path) -> None:
    """`DELTAWEB_ALLOWED_ROOTS=var/tables` (as the configuration page shows it) means the
    project's var/tables, whatever directory the process starts in; URIs stay as they are."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    code = "import django; django.setup(); from django.conf import settings; print(settings.DELTAWEB_ALLOWED_ROOTS)"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "deltaweb.settings",
        "PYTHONPATH": str(REPO),
        "DELTAWEB_ALLOWED_ROOTS": "var/tables,s3://bucket/tables,/srv/abs",
    }
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == str([str(REPO / "var" / "tables"), "s3://bucket/tables", "/srv/abs"])
