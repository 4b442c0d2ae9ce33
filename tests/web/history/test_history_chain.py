"""The chain of what was seen: a commit rewritten in place, one deleted inside its retention and
one replaced by a different valid commit, each on local disk and on an S3 server (moto), found
on the next sync with exactly one alert; the rolling check and what it costs; the version page.

Tables are written by delta-rs (a peer); the log is changed behind deltaweb's back with plain
file writes or boto3, as a tool that "fixes" a log would."""

from __future__ import annotations

import hashlib
import json
import os
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from django.utils import timezone

from alerts.models import Alert
from tables.delta.history.chain import chain_entry
from tables.models import ChainLook, HistoryRewrite, SeenBlock, SeenChange, Table
from tables.models.chain import pack_ints, unpack_ints
from tables.services.catalog import registration
from tables.services.chain import look as chain
from tables.services.chain import seen as seen_store
from tables.services.sync import store as sync
from tests.conftest import s3_buckets
from tests.web.history.test_vacuum_record import synced

deltalake = pytest.importorskip("deltalake")
from deltalake import write_deltalake  # noqa: E402

pytestmark = pytest.mark.django_db
BUCKET = "history-chain"


class LocalLog:
    def __init__(self, root: Path) -> None:
        self.root, self.location, self.options = root, str(root), {}

    def key(self, v: int) -> Path:
        return self.root / "_delta_log" / f"{v:020d}.json"

    def read(self, v: int) -> bytes:
        return self.key(v).read_bytes()

    def write(self, v: int, data: bytes) -> None:
        self.key(v).write_bytes(data)

    def delete(self, v: int) -> None:
        self.key(v).unlink()


class S3Log:
    def __init__(self, client, name: str, options: dict) -> None:
        self.client, self.prefix = client, f"allowed/{name}"
        self.location, self.options = f"s3://{BUCKET}/{self.prefix}", {"storage_options": options}

    def key(self, v: int) -> str:
        return f"{self.prefix}/_delta_log/{v:020d}.json"

    def read(self, v: int) -> bytes:
        return self.client.get_object(Bucket=BUCKET, Key=self.key(v))["Body"].read()

    def write(self, v: int, data: bytes) -> None:
        self.client.put_object(Bucket=BUCKET, Key=self.key(v), Body=data)

    def delete(self, v: int) -> None:
        self.client.delete_object(Bucket=BUCKET, Key=self.key(v))


@pytest.fixture(params=["local", "s3"])
def log(request, settings, tmp_path):
    if request.param == "local":
        settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
        out = LocalLog(tmp_path / "t")
    else:
        s3_server = request.getfixturevalue("s3_server")
        client = s3_buckets(s3_server, request.getfixturevalue("monkeypatch"), settings, BUCKET)
        out = S3Log(client, f"t{time.time_ns()}", s3_server.storage_options())
    for i in range(4):
        write_deltalake(out.location, pa.table({"id": pa.array([i, i + 10], pa.int64())}), mode="append", **out.options)
    return out


def first_sync(log, capture) -> Table:
    table = synced(registration.register_table("t", log.location), capture)
    seen = seen_store.seen_commits(table)
    assert [s.version for s in seen] == [0, 1, 2, 3]
    for s in seen:  # each digest is the stored file's own SHA-256, the chain as documented
        assert s.sha256 == hashlib.sha256(log.read(s.version)).hexdigest()
    assert not HistoryRewrite.objects.exists()
    return table


def one_alert(table: Table, version: int, kind: str, first: str, found: str) -> None:
    finding = HistoryRewrite.objects.get(table=table)
    assert (finding.version, finding.kind, finding.first_sha256, finding.found_sha256) == (version, kind, first, found)
    alert = Alert.objects.get(table=table)
    assert (alert.rule, alert.version, alert.severity) == ("history_rewritten", version, "critical")
    assert first in alert.explanation and (found in alert.explanation if found else "vanished" in alert.explanation)
    assert finding.first_seen_at.strftime("%Y-%m-%d %H:%M:%S") in alert.explanation


def test_a_commit_rewritten_in_place(log, django_capture_on_commit_callbacks) -> None:
    table = first_sync(log, django_capture_on_commit_callbacks)
    first = hashlib.sha256(log.read(1)).hexdigest()
    time.sleep(0.01)  # another modification time, as any rewrite has
    log.write(1, log.read(1).replace(b'"WRITE"', b'"write"'))
    synced(table, django_capture_on_commit_callbacks)
    one_alert(table, 1, "rewritten", first, hashlib.sha256(log.read(1)).hexdigest())
    synced(table, django_capture_on_commit_callbacks)  # found once
    assert HistoryRewrite.objects.count() == 1 and Alert.objects.count() == 1


def test_a_commit_deleted_inside_its_retention(log, django_capture_on_commit_callbacks) -> None:
    table = first_sync(log, django_capture_on_commit_callbacks)
    first = hashlib.sha256(log.read(2)).hexdigest()
    log.delete(2)
    synced(table, django_capture_on_commit_callbacks)  # the log has a gap now: the look came first
    one_alert(table, 2, "vanished", first, "")
    synced(table, django_capture_on_commit_callbacks)
    assert HistoryRewrite.objects.count() == 1 and Alert.objects.count() == 1


def test_a_commit_replaced_by_another_valid_one(log, django_capture_on_commit_callbacks) -> None:
    table = first_sync(log, django_capture_on_commit_callbacks)
    first = hashlib.sha256(log.read(3)).hexdigest()
    info = {"timestamp": int(time.time() * 1000), "operation": "OPTIMIZE", "operationParameters": {}}
    log.delete(3)
    log.write(3, json.dumps({"commitInfo": info}).encode() + b"\n")
    synced(table, django_capture_on_commit_callbacks)
    one_alert(table, 3, "rewritten", first, hashlib.sha256(log.read(3)).hexdigest())
    # delta-rs writes on: the new version is chained after the replaced one's first entry
    write_deltalake(log.location, pa.table({"id": pa.array([99], pa.int64())}), mode="append", **log.options)
    synced(table, django_capture_on_commit_callbacks)
    three, four = seen_store.seen_commits(table, 3, 4)
    assert four.entry == chain_entry(three.entry, 4, four.sha256) and three.sha256 == first
    assert Alert.objects.count() == 1


def test_a_commit_past_its_retention_is_no_finding(log, django_capture_on_commit_callbacks) -> None:
    table = first_sync(log, django_capture_on_commit_callbacks)
    block = SeenBlock.objects.get(table=table, first_version=0)
    stamps = unpack_ints(block.timestamps, block.count)
    block.timestamps = pack_ints([0, *stamps[1:]])  # version 0 as if years old
    block.save()
    log.delete(0)  # log cleanup takes the oldest commit (the table stays readable from 1: all adds)
    chain.look(table)
    assert [s.expired for s in seen_store.seen_commits(table)] == [True, False, False, False]
    assert not HistoryRewrite.objects.exists() and not SeenChange.objects.exists()


def test_the_rolling_check_rehashes_what_a_listing_cannot_tell(tmp_path, settings) -> None:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    log = LocalLog(tmp_path / "t")
    for i in range(3):
        write_deltalake(log.location, pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    hour_ago = time.time() - 3600
    for v in range(3):  # written an hour ago: their times vouch for them once hashed
        os.utime(log.key(v), (hour_ago, hour_ago))
    table = registration.register_table("t", log.location)
    sync.sync_table(table.pk)
    assert ChainLook.objects.filter(table=table).count() == 0  # the first sync records, no look
    # the same size and time: only reading the bytes again tells
    st = os.stat(log.key(1))
    log.write(1, log.read(1).replace(b'"WRITE"', b'"XRITE"'))
    os.utime(log.key(1), ns=(st.st_atime_ns, st.st_mtime_ns))
    settings.DELTAWEB_CHAIN_REHASH_PER_LOOK = 0
    assert chain.check_due()["tables"] == 0  # scheduled now, spread over the interval
    ChainLook.objects.filter(table=table).update(next_at=timezone.now() - timedelta(seconds=1))
    cost = chain.check_due()
    assert (cost["tables"], cost["requests"], cost["hashed"], cost["findings"]) == (1, 1, 0, 0)
    settings.DELTAWEB_CHAIN_REHASH_PER_LOOK = 3
    ChainLook.objects.filter(table=table).update(next_at=timezone.now() - timedelta(seconds=1))
    cost = chain.check_due()
    assert (cost["requests"], cost["hashed"], cost["findings"]) == (4, 3, 1)
    assert HistoryRewrite.objects.get(table=table).found_by == "daily"
    look = ChainLook.objects.get(table=table)
    assert look.next_at > timezone.now() + timedelta(hours=23)


def test_the_version_page_says_whether_the_bytes_still_match(tmp_path, settings, browser) -> None:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    log = LocalLog(tmp_path / "t")
    for i in range(2):
        write_deltalake(log.location, pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    table = registration.register_table("t", log.location)
    sync.sync_table(table.pk)
    page = browser.get(f"/t/{table.slug}/v/1/").content.decode()
    (seen,) = seen_store.seen_commits(table, 1, 1)
    assert "still match what was first seen" in page and seen.sha256 in page
    first = seen.sha256
    log.write(1, log.read(1).replace(b'"WRITE"', b'"write"'))
    sync.sync_table(table.pk)
    page = browser.get(f"/t/{table.slug}/v/1/").content.decode()
    assert "differ from what was first seen" in page
    assert first in page and hashlib.sha256(log.read(1)).hexdigest() in page


def test_a_long_logs_sync_looks_at_its_window_and_the_rolling_check_at_all(tmp_path, settings) -> None:
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    settings.DELTAWEB_CHAIN_SYNC_WINDOW = 2
    log = LocalLog(tmp_path / "t")
    for i in range(4):
        write_deltalake(log.location, pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    table = registration.register_table("t", log.location)
    sync.sync_table(table.pk)
    # a table synced before the chain was kept: the rolling check records it as it is now
    SeenBlock.objects.filter(table=table).delete()
    ChainLook.objects.all().delete()
    chain.check_due()
    assert [s.version for s in seen_store.seen_commits(table)] == [0, 1, 2, 3]
    look = ChainLook.objects.get(table=table)
    assert (look.requests, look.hashed) == (5, 4)
    time.sleep(0.01)
    log.write(0, log.read(0).replace(b'"WRITE"', b'"write"'))
    sync.sync_table(table.pk)  # versions 2 and 3 only
    assert not HistoryRewrite.objects.exists()
    ChainLook.objects.filter(table=table).update(next_at=timezone.now() - timedelta(seconds=1))
    assert chain.check_due()["findings"] == 1
    assert HistoryRewrite.objects.get(table=table).version == 0
    # or by its next sync, when that comes first
    SeenBlock.objects.filter(table=table).delete()
    write_deltalake(log.location, pa.table({"id": pa.array([9], pa.int64())}), mode="append")
    sync.sync_table(table.pk)
    seen = seen_store.seen_commits(table)
    assert [s.version for s in seen] == [0, 1, 2, 3, 4]
    assert seen[4].entry == chain_entry(seen[3].entry, 4, seen[4].sha256)
