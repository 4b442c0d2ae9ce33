"""`manage.py create_roles [--demo-users]`: create the analyst, approver and writer groups
(writer: service accounts that commit to managed tables through /api/owner/).

Approvers decide on restores in the admin console: the approver group may view and change
restore requests (approve/reject; nothing else about them is editable there) and view their
audit trail. The console itself needs staff status, which an administrator grants to each
approver (it also lets them unregister tables).

With --demo-users, also create users analyst, approver (staff, for the console) and admin
(staff and superuser) with the password from DELTAWEB_DEMO_PASSWORD, or a random one that is
printed once. Existing users keep their passwords. Demo users only when asked: never in a real
deployment.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from tables.services.access import roles

# (app label, codename) of the model permissions each role's group holds.
GROUP_PERMISSIONS = {
    roles.APPROVER: [
        ("tables", "view_restorerequest"),
        ("tables", "change_restorerequest"),
        ("tables", "view_restoreevent"),
        ("tables", "view_pin"),
        ("tables", "change_pin"),
        ("tables", "view_pinevent"),
    ],
}


class Command(BaseCommand):
    help = "Create the analyst and approver groups; --demo-users adds demo accounts."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--demo-users",
            action="store_true",
            help="also create users analyst, approver and admin (password from DELTAWEB_DEMO_PASSWORD or random)",
        )

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        groups = {}
        for name in roles.ROLES:
            groups[name], created = Group.objects.get_or_create(name=name)
            perms = [
                Permission.objects.get(content_type__app_label=app, codename=codename)
                for app, codename in GROUP_PERMISSIONS.get(name, [])
            ]
            groups[name].permissions.add(*perms)
            self.stdout.write(f"group {name}: {'created' if created else 'exists'}")
        if not options["demo_users"]:
            return
        password = os.environ.get("DELTAWEB_DEMO_PASSWORD", "")
        generated = not password
        if generated:
            password = secrets.token_urlsafe(12)
        User = get_user_model()
        made = []
        for username, group, staff, superuser in (
            ("analyst", roles.ANALYST, False, False),
            ("approver", roles.APPROVER, True, False),
            ("admin", None, True, True),
        ):
            user, created = User.objects.get_or_create(username=username)
            if created:
                user.set_password(password)
                user.is_staff, user.is_superuser = staff, superuser
                user.save()
                made.append(username)
            if group:
                user.groups.add(groups[group])
            self.stdout.write(f"user {username}: {'created' if created else 'exists (password unchanged)'}")
        if made and generated:
            self.stdout.write(f"password for {', '.join(made)}: {password}")
