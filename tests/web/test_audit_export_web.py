"""The server's signed audit export: from the History tab, what deltaweb first saw (so an export
made before a rewrite proves it afterwards), who approved which restore, checked by the core's
verifier and `delta audit-verify`; without a key the page says exports are unavailable."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.utils import timezone

from tables.delta.cli import main
from tables.delta.history.audit import export_table, verify_export
from tables.models import RestoreRequest, RestoreStatus, VersionChecksum
from tables.services import registration
from tables.services.sync import store as sync

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


def test_without_a_key_the_page_says_exports_are_unavailable(table, browser, settings) -> None:
    settings.DELTAWEB_AUDIT_KEY, settings.DELTAWEB_AUDIT_KEY_FILE = "", ""
    page = browser.get(f"/t/{table.slug}/history/").content.decode()
    assert "Signed audit exports are unavailable: no signing key is configured (DELTAWEB_AUDIT_KEY)" in page
    response = browser.get(f"/t/{table.slug}/audit-export/")
    assert response.status_code == 503 and b"unavailable" in response.content and b"Traceback" not in response.content
    settings.DELTAWEB_AUDIT_KEY = "not a key"
    assert "neither PEM nor the base64" in browser.get(f"/t/{table.slug}/history/").content.decode()


def test_an_export_from_the_page_proves_a_rewrite_afterwards(table, browser, key, roots, tmp_path) -> None:
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
    assert verify_export(data, pub, str(roots / "t"))["ok"]
    log1 = roots / "t" / "_delta_log" / f"{1:020d}.json"
    log1.write_bytes(log1.read_bytes().replace(b'"WRITE"', b'"write"'))
    verdict = verify_export(data, pub, str(roots / "t"))
    assert not verdict["ok"] and verdict["differing"] == [1]
    # and with the command line, from a public key file
    (tmp_path / "e.jsonl").write_bytes(data)
    (tmp_path / "k.pub").write_bytes(
        pub.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    argv = ["audit-verify", str(tmp_path / "e.jsonl"), "--public-key", str(tmp_path / "k.pub")]
    assert main(argv) == 0 and main([*argv, "--table", str(roots / "t")]) == 1
    # an export made now still carries what was first seen, and says the bytes no longer match
    sync.sync_table(table.pk)
    later = json.loads(browser.get(f"/t/{table.slug}/audit-export/").content.split(b"\n")[0])
    one = next(c for c in later["commits"] if c["version"] == 1)
    assert one["sha256"] == body["commits"][0]["sha256"] and one["stillMatches"] is False


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
