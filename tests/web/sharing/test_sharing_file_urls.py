"""The file URLs of shared local tables cannot be forged or stretched: a URL made by hand from the
old recipe (an HMAC keyed by the SECRET_KEY, once derived from the checkout's path) is refused,
a URL signed for another recipient, share, table or version range than it was issued for is
refused, so is one whose expiry is past its stated life, a log file, and every URL issued before
the key was rotated. A genuine URL keeps working until any of those change."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path

import pyarrow as pa
import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.test import Client

from tables.models import Recipient, Share, SharedTable, Table
from tables.services.sharing import file_urls
from tables.services.sharing.recipients import issue_token

deltalake = pytest.importorskip("deltalake")
TABLE = "/delta-sharing/shares/{share}/schemas/default/tables/{name}"


def write(path: Path, versions: int) -> Path:
    for v in range(versions):
        data = pa.table({"id": pa.array([v], pa.int64())})
        deltalake.write_deltalake(str(path), data, mode="append" if v else "error")
    return path


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def old_recipe(secret: str, table_id: int, key: str, expires: int = 99999999999999) -> str:
    """A URL made by hand the way they were signed before: HMAC over payload and expiry with a
    key derived from the SECRET_KEY."""
    payload = b64(json.dumps([table_id, key]).encode())
    mac_key = hashlib.sha256(b"deltaweb.sharing.file-url" + secret.encode()).digest()
    sig = b64(hmac.new(mac_key, f"{payload}.{expires}".encode(), hashlib.sha256).digest())
    return f"/delta-sharing/files/{payload}?sv=1&se={expires}&sr=b&sp=r&sig={sig}"


@pytest.fixture
def site(db, settings, tmp_path):
    settings.DELTAWEB_SHARING_KEY_DIR = str(tmp_path / "keys")
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    t = Table.objects.create(name="t", slug="t", location=str(write(tmp_path / "t", 10)))
    o = Table.objects.create(name="o", slug="o", location=str(write(tmp_path / "o", 2)))
    s1, s2 = Share.objects.create(name="s1"), Share.objects.create(name="s2")
    shared = SharedTable.objects.create(share=s1, name="t", table=t, first_version=2, last_version=6)
    other = SharedTable.objects.create(share=s2, name="o", table=o)
    alice, bob = Recipient.objects.create(name="alice"), Recipient.objects.create(name="bob")
    alice.shares.add(s1)
    bob.shares.add(s2)
    return {
        "t": t,
        "o": o,
        "shared": shared,
        "other": other,
        "alice": alice,
        "bob": bob,
        "alice_token": issue_token(alice),
        "bob_token": issue_token(bob),
    }


def urls(client: Client, token: str, share: str, name: str, body: dict) -> list[str]:
    response = client.post(
        TABLE.format(share=share, name=name) + "/query",
        body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 200, response.content
    lines = [json.loads(x) for x in response.content.decode().splitlines()]
    return [x["file"]["url"].replace("http://testserver", "") for x in lines if "file" in x]


def status(client: Client, url: str) -> int:
    return client.get(url).status_code


def test_a_url_forged_from_the_old_recipe_is_refused(site) -> None:
    client = Client()
    t, o = site["t"], site["o"]
    data_file = next(p.name for p in Path(t.location).glob("*.parquet"))
    for secret in (django_settings.SECRET_KEY, "dev-only-" + str(Path(django_settings.BASE_DIR) / "manage.py")):
        # version 9's commit of a table shared up to version 6, another share's log, a data file
        assert status(client, old_recipe(secret, t.pk, "_delta_log/00000000000000000009.json")) == 403
        assert status(client, old_recipe(secret, o.pk, "_delta_log/00000000000000000000.json")) == 403
        assert status(client, old_recipe(secret, t.pk, data_file)) == 403


def test_a_url_serves_only_what_it_was_issued_for(site) -> None:
    client = Client()
    t, shared, other = site["t"], site["shared"], site["other"]
    genuine = urls(client, site["alice_token"], "s1", "t", {"version": 3})
    assert genuine and all(status(client, u) == 200 for u in genuine)
    key = genuine[0].split("?")[0].split("/files/")[1]
    path = json.loads(base64.urlsafe_b64decode(key + "=" * (-len(key) % 4)))[-1]
    real = file_urls.Grant(site["alice"].pk, shared.pk, t.pk, 3, 3)
    expires = int(genuine[0].split("se=")[1].split("&")[0])

    def signed(grant: file_urls.Grant, file: str = path, until: int = expires) -> str:
        return "/delta-sharing/" + file_urls.signed_path(grant, file, until)

    assert status(client, signed(real)) == 200
    refused = {
        "another recipient": signed(file_urls.Grant(site["bob"].pk, shared.pk, t.pk, 3, 3)),
        "another share's shared table": signed(file_urls.Grant(site["alice"].pk, other.pk, t.pk, 3, 3)),
        "another table": signed(file_urls.Grant(site["alice"].pk, shared.pk, site["o"].pk, 3, 3)),
        "versions past the window": signed(file_urls.Grant(site["alice"].pk, shared.pk, t.pk, 3, 9)),
        "versions before the window": signed(file_urls.Grant(site["alice"].pk, shared.pk, t.pk, 0, 3)),
        "an expiry past the URL's life": signed(real, until=99999999999999),
        "a log file": signed(real, "_delta_log/00000000000000000009.json"),
    }
    assert {what: status(client, url) for what, url in refused.items()} == {
        **{what: 403 for what in refused},
        "a log file": 404,
    }
    # the window narrowed below the version the URL was issued for: it stops at once
    shared.last_version = 2
    shared.save()
    assert status(client, genuine[0]) == 403
    shared.last_version = 6
    shared.save()
    assert status(client, genuine[0]) == 200
    # the recipient no longer given the share, then revoked
    site["alice"].shares.remove(shared.share)
    assert status(client, genuine[0]) == 403
    site["alice"].shares.add(shared.share)
    assert status(client, genuine[0]) == 200
    site["alice"].revoked_at = site["alice"].created_at
    site["alice"].save()
    assert status(client, genuine[0]) == 403


def test_a_rotated_key_refuses_every_url_issued_before(site, tmp_path) -> None:
    client = Client()
    before = urls(client, site["alice_token"], "s1", "t", {})
    assert status(client, before[0]) == 200
    kept = tmp_path / "keys" / "sharing-url.key"
    assert kept.stat().st_mode & 0o777 == 0o600
    old = kept.read_text()
    call_command("sharing_rotate_key")
    assert kept.read_text() != old and kept.stat().st_mode & 0o777 == 0o600
    assert status(client, before[0]) == 403
    after = urls(client, site["alice_token"], "s1", "t", {})
    assert status(client, after[0]) == 200
    # the file-URL key is its own secret: the SECRET_KEY does not sign URLs
    assert django_settings.SECRET_KEY not in {old.strip(), kept.read_text().strip()}
