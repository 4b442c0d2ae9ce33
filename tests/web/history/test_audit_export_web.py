"""The server's signed audit export: from the History tab, what deltaweb first saw (so an export
made before a rewrite proves it afterwards), who approved which restore, checked by the core's
verifier and `delta audit-verify`; without a key the page says exports are unavailable."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import pyarrow as pa
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.contrib.auth.models import User
from django.utils import timezone

from tables.delta.cli import main
from tables.delta.history.audit import export_table, verify_export
from tables.models import RestoreRequest, RestoreStatus, VersionChecksum
from tables.services.access.roles import APPROVER
from tables.services.catalog import registration
from tables.services.sync import store as sync

from ..pages.test_api import assert_error, make_user, token_client

deltalake = pytest.importorskip("deltalake")
from deltalake import write_deltalake  # noqa: E402

pytestmark = pytest.mark.django_db


@pytest.fixture
def table(roots):
    path = roots / "t"
    for i in range(3):
        write_deltalake(str(path), pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    t = registration.register_table("t", str(path))
    sync.sync_table(t.pk)
    return t


@pytest.fixture
def key(settings):
    k = Ed25519PrivateKey.generate()
    settings.DELTAWEB_AUDIT_KEY = k.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return k


@pytest.fixture(autouse=True)
def var_dir(settings, tmp_path) -> Path:
    """The development key's directory: the test's own, never the checkout's var/."""
    settings.DELTAWEB_VAR_DIR = tmp_path / "var"
    return settings.DELTAWEB_VAR_DIR


def test_production_without_a_key_refuses(table, browser, settings) -> None:
    settings.DELTAWEB_AUDIT_KEY, settings.DELTAWEB_AUDIT_KEY_FILE = "", ""
    settings.DELTAWEB_PRODUCTION = True
    page = browser.get(f"/t/{table.slug}/history/").content.decode()
    assert "Signed audit exports are unavailable: no signing key is configured: a production deployment sets" in page
    response = browser.get(f"/t/{table.slug}/audit-export/")
    assert response.status_code == 503 and b"unavailable" in response.content and b"Traceback" not in response.content
    api = token_client(User.objects.get(username="ana"))
    refused = api.get(f"/api/tables/{table.pk}/audit-export/")
    assert "DELTAWEB_AUDIT_KEY" in assert_error(refused, 503, "audit_unavailable")
    assert not (Path(settings.DELTAWEB_VAR_DIR) / "audit-signing.key").exists()  # no key made in production
    settings.DELTAWEB_AUDIT_KEY = "not a key"
    assert "neither PEM nor the base64" in browser.get(f"/t/{table.slug}/history/").content.decode()


def test_development_signs_with_a_kept_key_and_the_rest_export_round_trips(
    table, browser, settings, var_dir, tmp_path, capsys
) -> None:
    """No key configured outside production: one is made on first use under var/ (mode 0600,
    the same for every later export), the page says so and shows its public key; the REST
    download, named by table and range, passes `delta audit-verify` with that public key."""
    settings.DELTAWEB_AUDIT_KEY, settings.DELTAWEB_AUDIT_KEY_FILE = "", ""
    settings.DELTAWEB_PRODUCTION = False
    keyfile = Path(var_dir) / "audit-signing.key"
    assert not keyfile.exists()
    page = browser.get(f"/t/{table.slug}/history/").content.decode()
    assert keyfile.exists() and stat.S_IMODE(keyfile.stat().st_mode) == 0o600
    assert f"Signed with a development key kept in {keyfile}" in page
    assert "set DELTAWEB_AUDIT_KEY in production" in page and "Download signed audit export" in page
    public = re.search(r'<code id="audit-public-key">([A-Za-z0-9+/=]+)</code>', page).group(1)
    first_key = keyfile.read_bytes()

    api = token_client(User.objects.get(username="ana"))
    response = api.get(f"/api/tables/{table.pk}/audit-export/", {"from": "0", "to": "2"})
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/x-ndjson"
    assert response["Content-Disposition"] == 'attachment; filename="t-audit-v0-v2.jsonl"'
    page_download = browser.get(f"/t/{table.slug}/audit-export/", {"from": "1", "to": "2"})
    assert page_download["Content-Disposition"] == 'attachment; filename="t-audit-v1-v2.jsonl"'
    assert keyfile.read_bytes() == first_key  # kept, not made again

    (tmp_path / "t-audit-v0-v2.jsonl").write_bytes(response.content)
    (tmp_path / "audit.pub").write_text(public + "\n")
    argv = ["audit-verify", str(tmp_path / "t-audit-v0-v2.jsonl"), "--public-key", str(tmp_path / "audit.pub")]
    capsys.readouterr()
    assert main([*argv, "--table", table.location]) == 0
    out = capsys.readouterr().out
    assert "signature: ok" in out and "versions still matching: 3 of 3" in out and out.endswith("ok\n")


def test_the_rest_export_is_for_analysts_and_approvers_and_in_the_schema(table, key, analyst) -> None:
    from rest_framework.test import APIClient

    url = f"/api/tables/{table.pk}/audit-export/"
    assert_error(APIClient().get(url), 401)
    assert_error(token_client(make_user("someone")).get(url), 403)
    api = token_client(User.objects.get(username="ana"))
    assert "not within the versions seen, 0..2" in assert_error(api.get(url, {"from": "2", "to": "9"}), 400)
    assert_error(api.get(url, {"from": "x"}), 400)
    approver = token_client(make_user("approver", group=APPROVER))
    assert_error(approver.get(url, {"from": "5"}), 400)
    assert approver.get(url).status_code == 200
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    op = schema["paths"]["/api/tables/{id}/audit-export/"]["get"]
    assert {p["name"] for p in op["parameters"]} == {"id", "from", "to"}
    assert "application/x-ndjson" in op["responses"]["200"]["content"]
    assert {"403", "503"} <= set(op["responses"])


def test_audit_verify_fails_on_a_recorded_mismatch_from_the_rest_export(table, key, analyst, tmp_path, capsys) -> None:
    wrong = [{"field": "numFiles", "expected": 7, "found": 2}]  # as the sync stores a disagreeing .crc
    VersionChecksum.objects.create(table=table, version=2, ok=False, mismatches=wrong, checked_at=timezone.now())
    data = token_client(User.objects.get(username="ana")).get(f"/api/tables/{table.pk}/audit-export/").content
    (tmp_path / "e.jsonl").write_bytes(data)
    (tmp_path / "k.pub").write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    argv = ["audit-verify", str(tmp_path / "e.jsonl"), "--public-key", str(tmp_path / "k.pub")]
    capsys.readouterr()
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "recorded checksum mismatch at version 2: numFiles expected 7, found 2" in out and "FAILED" in out
    assert main([*argv, "--accept-recorded"]) == 0
    assert "recorded checksum mismatch at version 2" in capsys.readouterr().out


def test_an_export_from_the_page_proves_a_rewrite_afterwards(table, browser, key, roots, tmp_path, capsys) -> None:
    from django.contrib.auth.models import User

    boss = User.objects.create_user("boss")
    RestoreRequest.objects.create(
        table=table,
        target_version=0,
        resolved_version=0,
        reason="bad load",
        status=RestoreStatus.SUCCEEDED,
        requested_by=User.objects.get(username="ana"),
        approver=boss,
        approver_comment="ok, go",
        result_version=2,
        decided_at=timezone.now(),
    )
    wrong = [{"field": "numFiles", "expected": 7, "found": 2}]  # as the sync stores a disagreeing .crc
    VersionChecksum.objects.create(table=table, version=2, ok=False, mismatches=wrong, checked_at=timezone.now())
    page = browser.get(f"/t/{table.slug}/history/").content.decode()
    assert "Download signed audit export" in page
    response = browser.get(f"/t/{table.slug}/audit-export/", {"from": "1", "to": "2"})
    assert response.status_code == 200 and "attachment" in response["Content-Disposition"]
    data = response.content
    body = json.loads(data.split(b"\n")[0])
    assert [c["version"] for c in body["commits"]] == [1, 2] and body["madeBy"] == "deltaweb"
    assert body["approvals"][0]["approver"] == "boss" and body["approvals"][0]["requestedBy"] == "ana"
    assert body["checksums"] == [{"version": 2, "ok": False, "mismatches": wrong}]
    assert body["commits"][0]["operation"] == "WRITE" and body["commits"][0]["timestamp"]
    # the same chain as the command line's, made from the bytes on disk
    cli = export_table(str(roots / "t"), 1, 2)
    assert [c["entry"] for c in cli["commits"]] == [c["entry"] for c in body["commits"]]
    assert cli["chain"]["previous"] == body["chain"]["previous"]

    pub = key.public_key()
    recorded = verify_export(data, pub, str(roots / "t"))  # the export records version 2's mismatch
    assert not recorded["ok"] and recorded["recorded"]["checksumMismatches"][0]["version"] == 2
    assert verify_export(data, pub, str(roots / "t"), accept_recorded=True)["ok"]
    log1 = roots / "t" / "_delta_log" / f"{1:020d}.json"
    log1.write_bytes(log1.read_bytes().replace(b'"WRITE"', b'"write"'))
    verdict = verify_export(data, pub, str(roots / "t"), accept_recorded=True)
    assert not verdict["ok"] and verdict["differing"] == [1]
    # and with the command line, from a public key file
    (tmp_path / "e.jsonl").write_bytes(data)
    (tmp_path / "k.pub").write_bytes(
        pub.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    argv = ["audit-verify", str(tmp_path / "e.jsonl"), "--public-key", str(tmp_path / "k.pub"), "--accept-recorded"]
    assert main(argv) == 0 and main([*argv, "--table", str(roots / "t")]) == 1
    # an export made now still carries what was first seen, and says the bytes no longer match
    sync.sync_table(table.pk)
    later_data = browser.get(f"/t/{table.slug}/audit-export/").content
    later = json.loads(later_data.split(b"\n")[0])
    one = next(c for c in later["commits"] if c["version"] == 1)
    assert one["sha256"] == body["commits"][0]["sha256"] and one["stillMatches"] is False
    # audit-verify names the rewrite the export records, and fails unless it is accepted
    (tmp_path / "later.jsonl").write_bytes(later_data)
    later_argv = ["audit-verify", str(tmp_path / "later.jsonl"), "--public-key", str(tmp_path / "k.pub")]
    capsys.readouterr()
    assert main([*later_argv, "--json"]) == 1
    rewrites = json.loads(capsys.readouterr().out)["recorded"]["rewrites"]
    assert [w["version"] for w in rewrites] == [1] and rewrites[0]["firstSeen"] == body["commits"][0]["sha256"]
    assert main(later_argv) == 1 and "recorded history rewrite at version 1" in capsys.readouterr().out
    assert main([*later_argv, "--accept-recorded"]) == 0


def test_who_may_download_and_bad_ranges(table, key, browser, django_user_model) -> None:
    from django.test import Client

    someone = Client()
    someone.force_login(django_user_model.objects.create_user("someone"))
    assert someone.get(f"/t/{table.slug}/audit-export/").status_code == 403
    assert "Analysts and approvers may download" in someone.get(f"/t/{table.slug}/history/").content.decode()
    assert browser.get(f"/t/{table.slug}/audit-export/", {"from": "x"}).status_code == 400
    response = browser.get(f"/t/{table.slug}/audit-export/", {"from": "2", "to": "9"})
    assert response.status_code == 400 and b"not within the versions seen, 0..2" in response.content


def test_the_key_from_a_file(table, settings, browser, tmp_path: Path) -> None:
    k = Ed25519PrivateKey.generate()
    keyfile = tmp_path / "audit.pem"
    keyfile.write_bytes(
        k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    settings.DELTAWEB_AUDIT_KEY, settings.DELTAWEB_AUDIT_KEY_FILE = "", str(keyfile)
    data = browser.get(f"/t/{table.slug}/audit-export/").content
    assert verify_export(data, k.public_key())["ok"]
