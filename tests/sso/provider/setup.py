"""Set the provider up: its tables, a signing key, deltaweb as a client, and users in groups.

python -m tests.sso.provider.setup CLIENT_REDIRECT_URI  (OIDC_PROVIDER_DB set)
"""

import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.sso.provider.settings")

import django

django.setup()

from django.contrib.auth.models import Group, User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from oidc_provider.models import Client, ResponseType  # noqa: E402

# "admin" has the name and e-mail of deltaweb's local superuser in the tests: a clash, not a match
USERS = {
    "dana": ["data-analysts"],
    "pete": ["data-approvers"],
    "root": ["platform-admins"],
    "olga": ["marketing"],
    "admin": ["data-analysts"],
    # the same name in capitals: another person to the provider, a look-alike to deltaweb
    "ADMIN": ["data-analysts"],
}
PASSWORD = "provider-pass-123"


def main(redirect_uri: str) -> None:
    call_command("migrate", verbosity=0)
    call_command("creatersakey")
    code = ResponseType.objects.get(value="code")
    client = Client.objects.create(
        name="deltaweb",
        client_type="confidential",
        client_id="deltaweb",
        client_secret="deltaweb-client-secret",
        _redirect_uris=redirect_uri,
        require_consent=False,
        _scope="openid email profile groups",
    )
    client.response_types.add(code)
    for name, groups in USERS.items():
        user = User.objects.create_user(name, email=f"{name}@example.com", password=PASSWORD)
        for g in groups:
            user.groups.add(Group.objects.get_or_create(name=g)[0])


def set_groups(username: str, groups: list[str]) -> None:
    user = User.objects.get(username=username)
    user.groups.set([Group.objects.get_or_create(name=g)[0] for g in groups])


if __name__ == "__main__":
    if sys.argv[1] == "groups":
        set_groups(sys.argv[2], [g for g in sys.argv[3].split(",") if g])
    else:
        main(sys.argv[1])
