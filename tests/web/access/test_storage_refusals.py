"""An object store that refuses our credentials is a refusal the user (or an administrator) can
fix, not a failing server: registering or discovering an s3:// or abfss:// location with keys
the store refuses (a real moto S3 server with authentication on, a real Azurite) answers 403
`storage_access_denied`, on the API, the pages and the catalog's shape alike, naming no secret;
a store that does not answer stays 503 `storage_unavailable`."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from tables.models import Table
from tests.conftest import free_port, use_store_environment

from ..pages.test_api import make_user, token_client

deltalake = pytest.importorskip("deltalake")
pytest.importorskip("obstore")

pytestmark = pytest.mark.django_db
BUCKET = "refusals"
WRONG = "wrong-secret-that-must-not-leak"


@pytest.fixture
def s3_table(s3_server, monkeypatch, settings) -> str:
    """A real table in S3, written with the right keys; the app's environment holds wrong ones."""
    client = s3_server.boto3()
    if BUCKET not in [b["Name"] for b in client.list_buckets()["Buckets"]]:
        client.create_bucket(Bucket=BUCKET)
    uri = f"s3://{BUCKET}/allowed/orders"
    deltalake.write_deltalake(
        uri, pa.table({"id": [1, 2]}), mode="overwrite", storage_options=s3_server.storage_options()
    )
    use_store_environment(monkeypatch, {**s3_server.env(), "AWS_SECRET_ACCESS_KEY": WRONG})
    settings.DELTAWEB_ALLOWED_ROOTS = [f"s3://{BUCKET}/allowed"]
    return uri


def test_registering_or_discovering_with_refused_credentials_is_a_403_everywhere(s3_table, client) -> None:
    analyst = make_user("ana", group="analyst")
    api = token_client(analyst)
    registered = api.post("/api/tables/", {"name": "orders", "location": s3_table}, format="json")
    assert registered.status_code == 403, registered.content[:400]
    body = registered.json()["error"]
    assert body["code"] == "storage_access_denied" and WRONG not in registered.content.decode()
    discovered = api.post("/api/discover/", {"prefix": f"s3://{BUCKET}/allowed"}, format="json")
    assert discovered.status_code == 403 and discovered.json()["error"]["code"] == "storage_access_denied"
    assert WRONG not in discovered.content.decode()

    client.force_login(analyst)
    page = client.post("/tables/register/", {"name": "orders", "location": s3_table})
    assert page.status_code in (400, 403) and WRONG not in page.content.decode()
    listing = client.get("/tables/discover/", {"prefix": f"s3://{BUCKET}/allowed"})
    assert listing.status_code == 403, listing.status_code
    assert WRONG not in listing.content.decode()
    assert not Table.objects.exists()


def test_a_store_that_does_not_answer_stays_a_503(monkeypatch, settings, s3_server) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    use_store_environment(monkeypatch, {**s3_server.env(), "AWS_ENDPOINT_URL": dead})
    settings.DELTAWEB_ALLOWED_ROOTS = [f"s3://{BUCKET}/allowed"]
    api = token_client(make_user("ana", group="analyst"))
    r = api.post("/api/tables/", {"name": "orders", "location": f"s3://{BUCKET}/allowed/orders"}, format="json")
    assert r.status_code == 503 and r.json()["error"]["code"] == "storage_unavailable", r.content[:400]


def test_an_azure_location_with_a_refused_key_is_a_403(azure_server, monkeypatch, settings) -> None:
    from cryptography.fernet import Fernet

    from credentials.admin import StorageCredentialForm

    for name in list(os.environ):
        if name.startswith(("AWS_", "AZURE_", "GOOGLE_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("DELTAWEB_CREDENTIALS_KEY", Fernet.generate_key().decode())
    container, host = "refusals", "devstoreaccount1.dfs.core.windows.net"
    box = azure_server.blob_service().get_container_client(container)
    if not box.exists():
        box.create_container()
    peer = f"az://{container}/lake/events"
    deltalake.write_deltalake(
        peer, pa.table({"id": [1]}), mode="overwrite", storage_options=azure_server.storage_options()
    )
    settings.DELTAWEB_ALLOWED_ROOTS = [f"abfss://{container}@{host}/lake"]
    wrong_key = "d3Jvbmcta2V5LXRoYXQtbXVzdC1ub3QtbGVhaw=="
    form = StorageCredentialForm(
        data={
            "prefix": f"abfss://{container}@{host}/lake",
            "options": f'{{"azure_storage_endpoint": "{azure_server.endpoint}", "azure_allow_http": "true"}}',
            "azure_storage_account_key": wrong_key,
        }
    )
    assert form.is_valid(), form.errors
    form.save()
    api = token_client(make_user("ana", group="analyst"))
    r = api.post(
        "/api/tables/", {"name": "events", "location": f"abfss://{container}@{host}/lake/events"}, format="json"
    )
    assert r.status_code == 403, r.content[:400]
    assert r.json()["error"]["code"] == "storage_access_denied" and wrong_key not in r.content.decode()
