"""The hash chain and the signed audit export (`delta audit-export`, `delta audit-verify`):
a round trip on a table delta-rs writes, a rewrite named by version, forged exports refused."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tables.delta.cli import main
from tables.delta.history.audit import export_table, load_public_key, sign_export, verify_export
from tables.delta.history.chain import GENESIS, broken_links, build_chain, chain_entries, chain_entry

REPO = Path(__file__).resolve().parents[2]


def _keys(tmp_path: Path) -> tuple[Path, Path]:
    key = Ed25519PrivateKey.generate()
    priv, pub = tmp_path / "audit.pem", tmp_path / "audit.pub"
    priv.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    pub.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return priv, pub


def _table(tmp_path: Path, commits: int = 3) -> Path:
    """A table delta-rs writes (a peer): `commits` appends."""
    pa = pytest.importorskip("pyarrow")
    deltalake = pytest.importorskip("deltalake")
    path = tmp_path / "t"
    for i in range(commits):
        deltalake.write_deltalake(str(path), pa.table({"id": [i, i + 10], "v": [f"a{i}", "b"]}), mode="append")
    return path


def test_the_chain_is_the_documented_sha256_construction() -> None:
    digest = hashlib.sha256(b"x").hexdigest()
    want = hashlib.sha256(b"deltaweb-chain-v1\n" + bytes(32) + (7).to_bytes(8, "big") + bytes.fromhex(digest))
    assert chain_entry(None, 7, digest) == want.hexdigest() == chain_entry(GENESIS, 7, digest)
    links = build_chain([(0, digest, 1), (1, digest, 1)])
    assert links[1].entry == chain_entry(links[0].entry, 1, digest)
    assert broken_links([(lk.version, lk.digest, lk.entry) for lk in links]) == []
    assert broken_links([(0, digest, links[0].entry), (1, GENESIS, links[1].entry)]) == [1]
    assert chain_entries(None, [(0, digest), (1, digest)]) == [lk.entry for lk in links]


def test_round_trip_then_a_rewrite_is_named_and_forgeries_fail(tmp_path: Path, capsys) -> None:
    table = _table(tmp_path)
    priv, pub = _keys(tmp_path)
    out = tmp_path / "export.jsonl"
    assert main(["audit-export", str(table), "--out", str(out), "--key", str(priv)]) == 0
    capsys.readouterr()
    body = json.loads(out.read_bytes().split(b"\n")[0])
    assert [c["version"] for c in body["commits"]] == [0, 1, 2]
    for c in body["commits"]:  # each digest is the file's own SHA-256
        data = (table / "_delta_log" / f"{c['version']:020d}.json").read_bytes()
        assert c["sha256"] == hashlib.sha256(data).hexdigest() and c["size"] == len(data)
        assert c["files"]["added"] >= 1 and c["files"]["addedBytes"] > 0 and c["operation"]
    assert main(["audit-verify", str(out), "--public-key", str(pub), "--table", str(table), "--json"]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["ok"] and {v["status"] for v in verdict["versions"]} == {"match"}

    # a new commit (delta-rs again) leaves the exported range matching
    import deltalake
    import pyarrow as pa

    deltalake.write_deltalake(str(table), pa.table({"id": [99], "v": ["z"]}), mode="append")
    assert main(["audit-verify", str(out), "--public-key", str(pub), "--table", str(table)]) == 0
    capsys.readouterr()

    # version 1 rewritten in place: the export proves it, naming the version with both digests
    v1 = table / "_delta_log" / f"{1:020d}.json"
    v1.write_bytes(v1.read_bytes().replace(b"WRITE", b"write"))
    assert main(["audit-verify", str(out), "--public-key", str(pub), "--table", str(table), "--json"]) == 1
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["differing"] == [1] and verdict["signature"] == "ok"
    row = next(v for v in verdict["versions"] if v["version"] == 1)
    assert row["status"] == "differs" and row["found"] == hashlib.sha256(v1.read_bytes()).hexdigest()

    # one byte changed anywhere in the export: verification fails
    data = out.read_bytes()
    i = data.index(body["commits"][1]["sha256"].encode())
    forged = tmp_path / "forged.jsonl"
    forged.write_bytes(data[:i] + (b"0" if data[i : i + 1] != b"0" else b"1") + data[i + 1 :])
    assert main(["audit-verify", str(forged), "--public-key", str(pub)]) == 1
    assert "FAILED" in capsys.readouterr().out
    key = load_public_key(pub.read_bytes())
    for pos in range(0, len(data), max(1, len(data) // 97)):
        flipped = data[:pos] + bytes([data[pos] ^ 0x01]) + data[pos + 1 :]
        try:
            assert not verify_export(flipped, key)["ok"], pos
        except ValueError:
            pass  # not an export any more: refused as such


def test_another_key_or_an_unsigned_file_is_refused(tmp_path: Path, capsys) -> None:
    table = _table(tmp_path, commits=2)
    (tmp_path / "other").mkdir()
    _priv, pub = _keys(tmp_path / "other")
    data = sign_export(export_table(str(table), 1, 1), Ed25519PrivateKey.generate())
    out = tmp_path / "e"
    out.write_bytes(data)
    assert main(["audit-verify", str(out), "--public-key", str(pub)]) == 1
    assert "another key" in capsys.readouterr().out
    out.write_bytes(data.split(b"\n")[0] + b"\n")
    assert main(["audit-verify", str(out), "--public-key", str(pub)]) == 1
    assert main(["audit-verify", str(tmp_path / "absent"), "--public-key", str(pub)]) == 2
    body = json.loads(data.split(b"\n")[0])
    assert body["range"] == {"from": 1, "to": 1} and body["chain"]["previous"] != GENESIS


def test_the_key_from_the_environment_and_the_console_script(tmp_path: Path, monkeypatch, capsys) -> None:
    table = _table(tmp_path, commits=1)
    priv, pub = _keys(tmp_path)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "DELTAWEB_AUDIT_KEY": priv.read_text()}
    done = subprocess.run(
        [sys.executable, "-m", "tables.delta.cli", "audit-export", str(table), "--out", str(tmp_path / "e")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert main(["audit-verify", str(tmp_path / "e"), "--public-key", str(pub), "--table", str(table)]) == 0
    monkeypatch.delenv("DELTAWEB_AUDIT_KEY", raising=False)
    capsys.readouterr()
    assert main(["audit-export", str(table), "--out", str(tmp_path / "f")]) == 2
    err = capsys.readouterr().err
    assert "DELTAWEB_AUDIT_KEY" in err and "Traceback" not in err and not (tmp_path / "f").exists()


def test_the_export_carries_the_checksum_files_results(golden_copy, tmp_path: Path) -> None:
    from tests.core.test_checksums import TXN_TABLE, edit_crc

    table = golden_copy(TXN_TABLE)  # versions 0..2, each with its _delta_log/N.crc
    edit_crc(table, 1, lambda b: b.update(tableSizeBytes=b["tableSizeBytes"] + 1))
    body = export_table(str(table))
    checks = {c["version"]: c for c in body["checksums"]}
    assert sorted(checks) == [0, 1, 2] and checks[0]["ok"] and checks[2]["ok"]
    assert not checks[1]["ok"]
    [m] = checks[1]["mismatches"]
    assert m["field"] == "tableSizeBytes" and m["expected"] == m["found"] + 1
    key = Ed25519PrivateKey.generate()
    data = sign_export(body, key)
    verdict = verify_export(data, key.public_key(), str(table))
    assert not verdict["ok"] and verdict["signature"] == "ok" and verdict["chain"] == "ok"
    assert verdict["recorded"]["checksumMismatches"] == [{"version": 1, "mismatches": [m]}]
    assert verify_export(data, key.public_key(), str(table), accept_recorded=True)["ok"]  # the record holds


def test_audit_verify_fails_on_a_recorded_checksum_mismatch_unless_accepted(golden_copy, tmp_path, capsys) -> None:
    """An export that records a checksum file disagreeing with the replay is not "ok": the
    command names the version and the field, exits 1, and passes only with --accept-recorded."""
    from tests.core.test_checksums import TXN_TABLE, edit_crc

    table = golden_copy(TXN_TABLE)
    edit_crc(table, 1, lambda b: b.update(numFiles=b["numFiles"] + 5))
    priv, pub = _keys(tmp_path)
    out = tmp_path / "export.jsonl"
    assert main(["audit-export", str(table), "--out", str(out), "--key", str(priv)]) == 0
    capsys.readouterr()
    argv = ["audit-verify", str(out), "--public-key", str(pub), "--table", str(table)]
    assert main(argv) == 1
    text = capsys.readouterr().out
    assert "recorded checksum mismatch at version 1: numFiles expected" in text and "FAILED" in text
    assert "--accept-recorded" in text
    assert main([*argv, "--json"]) == 1
    verdict = json.loads(capsys.readouterr().out)
    assert [m["version"] for m in verdict["recorded"]["checksumMismatches"]] == [1] and not verdict["ok"]
    assert main([*argv, "--accept-recorded"]) == 0
    text = capsys.readouterr().out
    assert "recorded checksum mismatch at version 1" in text and "accepted" in text and text.endswith("ok\n")
