"""Per-location storage credentials against a real S3-compatible server (moto, auth on): the
app opens a table with the options of the longest matching prefix, else the environment's
variables; secrets are encrypted at rest and never shown in the admin, the API or a log."""

from __future__ import annotations

import logging
import os

import pyarrow as pa
import pytest
from cryptography.fernet import Fernet
from django.db import connection

from credentials.admin import StorageCredentialForm
from credentials.lookup import options_for
from credentials.models import StorageCredential
from tables.delta.errors import StorageError
from tables.delta.storage.opening import open_storage
from tables.models import Table
from tables.services.sync.store import sync_table

from ..pages.test_api import assert_error, make_user, token_client

deltalake = pytest.importorskip("deltalake")
pytest.importorskip("obstore")
from deltalake import write_deltalake  # noqa: E402

pytestmark = pytest.mark.django_db
BUCKET = "cred-tables"


@pytest.fixture
def s3(s3_server, monkeypatch, settings):
    """The server reachable (endpoint, plain HTTP) but with no keys in the environment: the
    stored credential is the only way in."""
    for name in list(os.environ):
        if name.startswith(("AWS_", "AZURE_", "GOOGLE_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    monkeypatch.setenv("AWS_REGION", s3_server.region)
    monkeypatch.setenv("DELTAWEB_CREDENTIALS_KEY", Fernet.generate_key().decode())
    client = s3_server.boto3()
    if BUCKET not in [b["Name"] for b in client.list_buckets()["Buckets"]]:
        client.create_bucket(Bucket=BUCKET)
    settings.DELTAWEB_ALLOWED_ROOTS = [f"s3://{BUCKET}/lake"]
    return s3_server


def write_table(s3, name: str) -> str:
    uri = f"s3a://{BUCKET}/{name}"
    for i in range(2):
        write_deltalake(uri, pa.table({"id": [i]}), mode="append", storage_options=s3.storage_options())
    return uri


def save(prefix: str, secrets: dict[str, str], options: dict | None = None, instance=None) -> StorageCredential:
    form = StorageCredentialForm(
        data={
            "prefix": prefix,
            "description": "",
            "options": "{}" if options is None else str(options).replace("'", '"'),
            **secrets,
        },
        instance=instance,
    )
    assert form.is_valid(), form.errors
    return form.save()


def test_the_longest_matching_prefix_opens_the_table(s3, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    uri = write_table(s3, "lake/sales/orders")
    good = {"aws_access_key_id": s3.access_key_id, "aws_secret_access_key": s3.secret_access_key}
    save(f"s3://{BUCKET}/lake", good)
    save(f"s3://{BUCKET}/lake/sales", {"aws_access_key_id": "AKIAWRONG", "aws_secret_access_key": "wrong-secret-123"})
    save(f"s3://{BUCKET}/lake/sales/orders", good)
    save(f"s3://{BUCKET}/lake/sal", {"aws_access_key_id": "AKIANOTAPREFIX", "aws_secret_access_key": "never-used-99"})

    # the exact prefix wins over both shorter ones; s3a:// matches the s3:// prefix
    assert options_for(uri)["aws_secret_access_key"] == s3.secret_access_key
    api = token_client(make_user("ana", group="analyst"))
    r = api.post("/api/tables/", {"name": "orders", "location": uri}, format="json")
    assert r.status_code == 201, r.content
    table = Table.objects.get(name="orders")
    sync_table(table.pk)
    table.refresh_from_db()
    assert table.last_synced_version == 1

    # a sibling below /lake/sales gets the wrong keys of that prefix (not /lake's right ones),
    # is refused as S3 refuses them, and the message does not carry the secret
    other = write_table(s3, "lake/sales/returns")
    assert options_for(other)["aws_access_key_id"] == "AKIAWRONG"
    body = assert_error(api.post("/api/tables/", {"name": "returns", "location": other}, format="json"), 403)
    assert "wrong-secret-123" not in body and s3.secret_access_key not in body
    assert not Table.objects.filter(name="returns").exists()
    # a location no prefix covers uses the environment (no keys there: refused)
    assert options_for(f"s3://{BUCKET}/elsewhere/t") is None
    assert options_for("/tmp/local") is None
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert s3.secret_access_key not in logged and "wrong-secret-123" not in logged


def test_secrets_are_encrypted_at_rest_and_never_shown(s3, client) -> None:
    secret = "s3cr3t-value-that-must-not-leak"
    cred = save(
        f"s3://{BUCKET}/lake",
        {"aws_access_key_id": "AKIAID", "aws_secret_access_key": secret},
        {"aws_region": "eu-west-1"},
    )
    with connection.cursor() as cur:
        cur.execute("SELECT * FROM credentials_storagecredential")
        raw = repr(cur.fetchall())
    assert secret not in raw and "AKIAID" not in raw and "eu-west-1" in raw
    assert cred.secret_names == ["aws_access_key_id", "aws_secret_access_key"]
    assert secret not in repr(cred) and secret not in str(cred)

    client.force_login(make_user("root", staff=True, superuser=True))
    listing = client.get("/admin/credentials/storagecredential/").content.decode()
    change = client.get(f"/admin/credentials/storagecredential/{cred.pk}/change/").content.decode()
    for page in (listing, change):
        assert secret not in page and cred.secrets_token not in page
    assert "S3 secret access key: ********" in listing
    assert "set (hidden); leave blank to keep it" in change

    # saving the change page with blank secret fields keeps them; "clear" removes one
    r = client.post(
        f"/admin/credentials/storagecredential/{cred.pk}/change/",
        {"prefix": cred.prefix, "description": "edited", "options": '{"aws_region": "eu-west-1"}',
         "aws_access_key_id": "", "aws_secret_access_key": "", "clear_secrets": ["aws_access_key_id"]},
    )  # fmt: skip
    assert r.status_code == 302, r.content.decode()[:2000]
    cred.refresh_from_db()
    assert cred.description == "edited" and cred.secrets() == {"aws_secret_access_key": secret}
    history = client.get(f"/admin/credentials/storagecredential/{cred.pk}/history/").content.decode()
    assert secret not in history


def test_no_key_in_the_environment_is_a_clear_error_and_nothing_is_saved(s3, monkeypatch) -> None:
    monkeypatch.delenv("DELTAWEB_CREDENTIALS_KEY")
    form = StorageCredentialForm(
        data={"prefix": f"s3://{BUCKET}/lake", "options": "{}", "aws_secret_access_key": "abcd1234"}
    )
    assert not form.is_valid()
    assert "DELTAWEB_CREDENTIALS_KEY is not set" in str(form.errors)
    assert not StorageCredential.objects.exists()


def test_bad_prefixes_and_secrets_in_plain_options_are_refused(s3) -> None:
    for prefix, options, message in [
        ("/var/data", "{}", "not an object-store location"),
        (f"s3://{BUCKET}/lake", '{"aws_secret_access_key": "x"}', "look like secrets"),
        (f"s3://{BUCKET}/lake", "[1]", "JSON object"),
    ]:
        form = StorageCredentialForm(data={"prefix": prefix, "options": options})
        assert not form.is_valid()
        assert message in str(form.errors)
    assert not StorageCredential.objects.exists()
    cred = save(f"s3a://{BUCKET}/lake/", {"aws_secret_access_key": "abcd1234"})
    assert cred.prefix == f"s3://{BUCKET}/lake"  # one canonical spelling, so the prefix is unique


def test_a_changed_key_is_a_named_error_not_a_leak(s3, monkeypatch) -> None:
    save(f"s3://{BUCKET}/lake", {"aws_access_key_id": "AKIAID", "aws_secret_access_key": "abcd1234"})
    monkeypatch.setenv("DELTAWEB_CREDENTIALS_KEY", Fernet.generate_key().decode())
    with pytest.raises(StorageError, match="not the key they were saved with") as info:
        open_storage(f"s3://{BUCKET}/lake/t")
    assert "abcd1234" not in str(info.value)
