"""deltaweb as a Unity Catalog, driven by the official SDK (unitycatalog-client) against a live server.

- create a catalogManaged table (staging table, the client's version 0, createTable) and load it;
- 200 versions from 8 threads, each with its own SDK client: contiguous, none lost, none twice;
- the unpublished commits read back (getCommits, loadTable, deltaweb's reader through its
  catalog); publishing a prefix and reporting it: the catalog keeps the rest, a filesystem
  reader sees exactly the published prefix (delta-rs refuses the table, as the protocol means
  filesystem readers to), the published files are the ratified ones byte for byte;
- a stale etag, a skipped version, a file that is not a staged commit: refused in UC's shape;
- deltaweb's policy (frozen table, RESTORE without an approved request): PermissionDenied, recorded.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token
from unitycatalog.client.exceptions import ApiException

from tables.delta.errors import CommitConflictError
from tables.delta.managed.owner import CommitConflict, CommitRefused, CommitResponse
from tables.delta.snapshot.state import load_snapshot
from tables.delta.write import catalog as cm
from tables.delta.write.managed import commit_via_owner
from tables.models import ManagedTable, OwnerRefusal, RatifiedCommit
from tables.services.access.roles import ANALYST, APPROVER, WRITER
from tables.services.owner.access import database_owner
from tables.services.owner.db import table_conf
from tables.services.sync import store as sync
from tests.web.pages.test_api import make_user
from tests.web.uc_sdk import SdkCatalogOwner, UcSession, error_type

deltalake = pytest.importorskip("deltalake")

pytestmark = pytest.mark.django_db(transaction=True)

CAT, SCH = "main", "default"
SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}


@pytest.fixture
def roots(settings, tmp_path):
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    settings.DELTAWEB_OWNER_AUTO_BACKFILL = False  # the clients publish, as UC's protocol has them do
    return tmp_path


@pytest.fixture
def token(roots) -> str:
    return Token.objects.create(user=make_user("svc", group=WRITER)).key


@pytest.fixture
def session(live_server, token):
    s = UcSession(live_server.url, token)
    yield s
    s.close()


def add(name: str) -> dict:
    return {"add": {"path": name, "partitionValues": {}, "size": 1, "modificationTime": 0, "dataChange": True}}


def create_table(s: UcSession, name: str, local: bool = True) -> tuple[str, str, Path | str]:
    """The three phases of creation: staging table, the client's 0.json, createTable. The third
    value is the table's path on disk (`local`), else its location as the catalog gave it."""
    staging = s.call("POST", f"/delta/v1/catalogs/{CAT}/schemas/{SCH}/staging-tables", {"name": name})
    assert staging.status == 200, staging.body
    table_id, location = staging.body["table-id"], staging.body["location"]
    assert staging.body["required-properties"][cm.TABLE_ID_KEY] == table_id
    assert cm.FEATURE in staging.body["required-protocol"]["reader-features"]
    path = Path(urlparse(location).path) if local else location
    first = cm.initial_commit(str(path), table_id, SCHEMA, properties={"delta.checkpointPolicy": "classic"})
    created = s.call(
        "POST",
        f"/delta/v1/catalogs/{CAT}/schemas/{SCH}/tables",
        {
            "name": name,
            "table-type": "MANAGED",
            "location": location,
            "columns": SCHEMA,
            "properties": {cm.TABLE_ID_KEY: table_id, "delta.enableInCommitTimestamps": "true"},
            "protocol": {
                "min-reader-version": 3,
                "min-writer-version": 7,
                "reader-features": first["protocol"]["readerFeatures"],
                "writer-features": first["protocol"]["writerFeatures"],
            },
            "last-commit-timestamp-ms": first["inCommitTimestamp"],
        },
    )
    assert created.status == 200, created.body
    assert created.body["latest-table-version"] == 0 and created.body["commits"] == []
    return table_id, location, path


def previous_ict(s: UcSession, table_id: str, location: str, path: Path) -> tuple[int, int]:
    """(latest version, its ICT) from the catalog's answer; version 0's from its file."""
    answer = s.get_commits(table_id, location, 0)
    latest = answer.latest_table_version
    known = {c.version: c.timestamp for c in answer.commits}
    if latest in known:
        return latest, known[latest]
    data = (path / "_delta_log" / f"{latest:020d}.json").read_bytes()
    return latest, json.loads(data.splitlines()[0])["commitInfo"]["inCommitTimestamp"]


def test_create_load_and_config(session, roots) -> None:
    config = session.call("GET", "/delta/v1/config", query={"catalog": CAT, "protocol-versions": "1.0"})
    assert config.status == 200 and config.body["protocol-version"] == "1.0"
    assert "POST /v1/catalogs/{catalog}/schemas/{schema}/tables/{table}" in config.body["endpoints"]
    none = session.call("GET", "/delta/v1/config", query={"catalog": CAT, "protocol-versions": "2.0"})
    assert none.status == 400 and none.error_type == "InvalidParameterValueException"

    table_id, location, path = create_table(session, "events")
    loaded = session.load(CAT, SCH, "events")
    meta = loaded.body["metadata"]
    assert meta["table-uuid"] == table_id and meta["table-type"] == "MANAGED" and meta["location"] == location
    assert meta["properties"]["delta.feature.catalogManaged"] == "supported"
    assert meta["properties"][cm.TABLE_ID_KEY] == table_id
    assert meta["columns"]["fields"][0]["name"] == "id"
    # a second createTable of the same staging table, an unknown table, a duplicate name
    again = session.call("POST", f"/delta/v1/catalogs/{CAT}/schemas/{SCH}/tables", {"name": "events"})
    assert again.status in (400, 409) and again.error_type
    missing = session.load(CAT, SCH, "nope")
    assert missing.status == 404 and missing.body == {
        "error": {"type": "NoSuchTableException", "code": 404, "message": "Table 'main.default.nope' does not exist"}
    }
    dup = session.call("POST", f"/delta/v1/catalogs/{CAT}/schemas/{SCH}/staging-tables", {"name": "events"})
    assert dup.status == 409 and dup.error_type == "AlreadyExistsException"
    assert session.call("HEAD", f"/delta/v1/catalogs/{CAT}/schemas/{SCH}/tables/events").status == 204
    assert session.call("HEAD", f"/delta/v1/catalogs/{CAT}/schemas/{SCH}/tables/nope").status == 404
    creds = session.call(
        "GET", f"/delta/v1/catalogs/{CAT}/schemas/{SCH}/tables/events/credentials", query={"operation": "READ"}
    )
    assert creds.status == 200 and creds.body == {"storage-credentials": []}
    bad_op = session.call(
        "GET", f"/delta/v1/catalogs/{CAT}/schemas/{SCH}/tables/events/credentials", query={"operation": "ALL"}
    )
    assert bad_op.status == 400 and bad_op.error_type == "InvalidParameterValueException"
    # deltaweb's own reader sees the new table through its catalog
    assert load_snapshot(str(path), owner=database_owner()).version == 0


def test_a_storage_root_outside_the_allowed_roots_is_refused_in_ucs_shape(session, settings, tmp_path) -> None:
    settings.DELTAWEB_UC_STORAGE_ROOT = "/etc/deltaweb-tables"
    answer = session.call("POST", f"/delta/v1/catalogs/{CAT}/schemas/{SCH}/staging-tables", {"name": "x"})
    assert answer.status == 403 and answer.error_type == "PermissionDeniedException"
    assert "/etc" not in str(tmp_path) and not Path("/etc/deltaweb-tables").exists()


def test_unauthenticated_and_read_only_users_get_ucs_errors(live_server, roots) -> None:
    anon = UcSession(live_server.url, "not-a-token")
    try:
        answer = anon.load(CAT, SCH, "events")
        assert answer.status == 401 and answer.error_type == "NotAuthorizedException"
    finally:
        anon.close()
    reader = UcSession(live_server.url, Token.objects.create(user=make_user("ana", group=ANALYST)).key)
    try:
        denied = reader.call("POST", f"/delta/v1/catalogs/{CAT}/schemas/{SCH}/staging-tables", {"name": "x"})
        assert denied.status == 403 and denied.error_type == "PermissionDeniedException"
    finally:
        reader.close()
    # the token's query also answers whether its user writes: a disabled writer is not let in
    former = make_user("gone", group=WRITER)
    former.is_active = False
    former.save()
    disabled = UcSession(live_server.url, Token.objects.create(user=former).key)
    try:
        answer = disabled.call("POST", f"/delta/v1/catalogs/{CAT}/schemas/{SCH}/staging-tables", {"name": "x"})
        assert answer.status == 401 and answer.error_type == "NotAuthorizedException"
    finally:
        disabled.close()


def test_eight_sdk_writers_200_versions_then_publish_a_prefix(live_server, token, roots) -> None:
    setup = UcSession(live_server.url, token)
    table_id, location, path = create_table(setup, "events")
    writers, total = 8, 200
    won: dict[str, tuple[int, str]] = {}  # txnId -> (version, staged file) the catalog accepted
    conflicts = [0]
    failures: list[BaseException] = []
    lock = threading.Lock()

    def writer(i: int) -> None:
        s = UcSession(live_server.url, token)
        try:
            for k in range(total // writers):
                txn = f"w{i}-{k}"
                while True:
                    latest, ict = previous_ict(s, table_id, location, path)
                    staged = cm.stage_commit(
                        str(path), latest + 1, [add(f"{txn}.parquet")], "WRITE", previous_ict=ict, txn_id=txn
                    )
                    try:
                        s.commit(table_id, location, staged)
                    except ApiException as exc:
                        assert exc.status == 409 and error_type(exc) == "CommitVersionConflictException", exc.body
                        with lock:
                            conflicts[0] += 1
                        continue  # the answer is at once: reload and retry, no backoff
                    with lock:
                        assert txn not in won
                        won[txn] = (staged.version, staged.file_name)
                    break
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)
        finally:
            s.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, f"{failures[0]!r}: {getattr(failures[0], 'body', '')}"
    assert sorted(v for v, _ in won.values()) == list(range(1, total + 1))  # contiguous, none lost, none twice
    rows = {r.version: r for r in RatifiedCommit.objects.filter(table__managed__owner_table_id=table_id)}
    assert {r.txn_id: r.version for r in rows.values()} == {t: v for t, (v, _) in won.items()}
    assert all(r.committed_by == "svc" for r in rows.values())

    # the unpublished commits read back: getCommits, loadTable, deltaweb's reader through its catalog
    answer = setup.get_commits(table_id, location, 0)
    assert answer.latest_table_version == total
    assert sorted(c.version for c in answer.commits) == list(range(1, total + 1))
    assert {c.version: c.file_name for c in answer.commits} == {v: f for v, f in won.values()}
    loaded = setup.load(CAT, SCH, "events").body
    assert [c["version"] for c in loaded["commits"]] == list(range(total, 0, -1))
    snap = load_snapshot(str(path), owner=database_owner())
    assert snap.version == total and len(snap.files) == total

    # publish 1..120 and report it: the catalog forgets those, keeps 121..200
    published = 120
    assert cm.publish(str(path), [(v, f) for v, f in won.values() if v <= published]) == published
    setup.commit(table_id, location, None, backfilled=published)
    rest = setup.get_commits(table_id, location, 0)
    assert sorted(c.version for c in rest.commits) == list(range(published + 1, total + 1))
    assert rest.latest_table_version == total
    for v, f in won.values():  # the published files are the ratified ones, byte for byte
        if v <= published:
            assert (path / "_delta_log" / f"{v:020d}.json").read_bytes() == (
                path / "_delta_log" / "_staged_commits" / f
            ).read_bytes()
    assert not (path / "_delta_log" / f"{published + 1:020d}.json").exists()
    # a filesystem reader sees exactly the published prefix; delta-rs refuses a catalog-managed table
    fs = load_snapshot(str(path))
    assert fs.version == published and len(fs.files) == published
    assert "catalogManaged" in (fs.staleness_warning or "")
    with pytest.raises(Exception, match="catalog"):
        deltalake.DeltaTable(str(path))
    # through the catalog, the newest version still
    assert load_snapshot(str(path), owner=database_owner()).version == total
    # reporting a version not published yet is refused, nothing changes
    with pytest.raises(ApiException) as bad:
        setup.commit(table_id, location, None, backfilled=published + 5)
    assert bad.value.status == 400 and error_type(bad.value) == "InvalidParameterValueException"
    assert ManagedTable.objects.get(owner_table_id=table_id).backfilled_version == published
    # publishing past 100 wrote a checkpoint there (published versions only); readers start from it
    assert (path / "_delta_log" / f"{100:020d}.checkpoint.parquet").exists()
    assert not (path / "_delta_log" / f"{200:020d}.checkpoint.parquet").exists()
    through = load_snapshot(str(path), owner=database_owner())
    assert through.segment.checkpoint_version == 100 and len(through.files) == total
    # staged files of published versions go after the retention; the unpublished ones stay
    mt = ManagedTable.objects.select_related("table").get(owner_table_id=table_id)
    staged_dir = path / "_delta_log" / "_staged_commits"
    assert database_owner().cleanup_staged(table_conf(mt), retention_seconds=3600) == 0
    deleted = database_owner().cleanup_staged(table_conf(mt), retention_seconds=0)
    left = sorted(int(p.name[:20]) for p in staged_dir.iterdir())
    assert deleted >= published and left and min(left) == published + 1
    assert {v for v, _ in won.values() if v > published} <= set(left)
    assert load_snapshot(str(path), owner=database_owner()).version == total
    setup.close()


def test_skipped_version_stale_etag_and_bad_files_are_refused(session, roots) -> None:
    table_id, location, path = create_table(session, "events")
    latest, ict = previous_ict(session, table_id, location, path)
    skip = cm.stage_commit(str(path), latest + 2, [add("a.parquet")], "WRITE", previous_ict=ict)
    with pytest.raises(ApiException) as exc:
        session.commit(table_id, location, skip)
    assert exc.value.status == 400 and error_type(exc.value) == "InvalidParameterValueException"

    # resending an accepted commit is a no-op in the preview API; v1 answers a conflict
    one = cm.stage_commit(str(path), 1, [add("b.parquet")], "WRITE", previous_ict=ict)
    session.commit(table_id, location, one)
    session.commit(table_id, location, one)
    assert session.get_commits(table_id, location, 0).latest_table_version == 1

    etag = session.load(CAT, SCH, "events").body["metadata"]["etag"]
    uuid_req = {"type": "assert-table-uuid", "uuid": table_id}

    def add_commit(staged, *reqs, extra=()):
        commit = {
            "version": staged.version,
            "timestamp": staged.in_commit_timestamp,
            "file-name": staged.file_name,
            "file-size": staged.size,
            "file-modification-timestamp": staged.modification_time,
        }
        return session.update(
            CAT,
            SCH,
            "events",
            {"requirements": list(reqs), "updates": [{"action": "add-commit", "commit": commit}, *extra]},
        )

    resent = add_commit(one, uuid_req)
    assert resent.status == 409 and resent.error_type == "CommitVersionConflictException"
    # a data commit keeps the etag
    two = cm.stage_commit(str(path), 2, [add("c.parquet")], "WRITE", previous_ict=one.in_commit_timestamp)
    ok = add_commit(two, uuid_req, {"type": "assert-etag", "etag": etag})
    assert ok.status == 200, ok.body
    assert ok.body["metadata"]["etag"] == etag and ok.body["latest-table-version"] == 2
    # a metadata commit moves it; the old etag is then stale
    meta = session.load(CAT, SCH, "events").body["metadata"]
    first = json.loads((path / "_delta_log" / f"{0:020d}.json").read_text().splitlines()[2])["metaData"]
    changed = {**first, "configuration": {**first["configuration"], "team": "data"}}
    three = cm.stage_commit(
        str(path), 3, [{"metaData": changed}], "SET TBLPROPERTIES", previous_ict=two.in_commit_timestamp
    )
    moved = add_commit(
        three,
        uuid_req,
        {"type": "assert-etag", "etag": meta["etag"]},
        extra=[{"action": "set-properties", "updates": {"team": "data"}}],
    )
    assert moved.status == 200, moved.body
    assert moved.body["metadata"]["etag"] != etag and moved.body["metadata"]["properties"]["team"] == "data"
    four = cm.stage_commit(str(path), 4, [add("d.parquet")], "WRITE", previous_ict=three.in_commit_timestamp)
    stale = add_commit(four, uuid_req, {"type": "assert-etag", "etag": etag})
    assert stale.status == 409 and stale.error_type == "UpdateRequirementConflictException"
    wrong_uuid = add_commit(four, {"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"})
    assert wrong_uuid.status == 409 and wrong_uuid.error_type == "UpdateRequirementConflictException"
    no_uuid = add_commit(four)
    assert no_uuid.status == 400 and no_uuid.error_type == "InvalidParameterValueException"
    # a file name outside _staged_commits/, or a size that is not the file's
    for name in ("../00000000000000000000.json", f"{4:020d}.not-a-uuid.json"):
        bogus = session.update(
            CAT,
            SCH,
            "events",
            {
                "requirements": [uuid_req],
                "updates": [
                    {
                        "action": "add-commit",
                        "commit": {
                            "version": 4,
                            "timestamp": four.in_commit_timestamp,
                            "file-name": name,
                            "file-size": 10,
                            "file-modification-timestamp": 1,
                        },
                    }
                ],
            },
        )
        assert bogus.status == 400 and bogus.error_type == "InvalidParameterValueException"
    assert session.load(CAT, SCH, "events").body["latest-table-version"] == 3
    assert add_commit(four, uuid_req).status == 200


def test_policy_frozen_table_and_unapproved_restore_are_refused_and_recorded(session, roots) -> None:
    table_id, location, path = create_table(session, "events")
    mt = ManagedTable.objects.get(owner_table_id=table_id)
    _, ict = previous_ict(session, table_id, location, path)
    restore = cm.stage_commit(str(path), 1, [add("r.parquet")], "RESTORE", previous_ict=ict)
    with pytest.raises(ApiException) as exc:
        session.commit(table_id, location, restore)
    assert exc.value.status == 403 and error_type(exc.value) == "PermissionDeniedException"
    assert "approved restore request" in json.loads(exc.value.body)["error"]["message"]

    ManagedTable.objects.filter(pk=mt.pk).update(frozen=True, frozen_reason="audit")
    write = cm.stage_commit(str(path), 1, [add("w.parquet")], "WRITE", previous_ict=ict)
    with pytest.raises(ApiException) as exc:
        session.commit(table_id, location, write)
    assert exc.value.status == 403 and "frozen" in json.loads(exc.value.body)["error"]["message"]
    codes = list(OwnerRefusal.objects.filter(table_id=mt.table_id).values_list("code", "operation"))
    assert sorted(codes) == [("policy", "RESTORE"), ("policy", "WRITE")]
    assert session.get_commits(table_id, location, 0).latest_table_version == 0

    # the owner card: staged against published versions, the lag, refusals, who committed
    ManagedTable.objects.filter(pk=mt.pk).update(frozen=False)
    ok = cm.stage_commit(str(path), 1, [add("w.parquet")], "WRITE", previous_ict=ict)
    session.commit(table_id, location, ok)
    sync.sync_table(mt.table_id)
    web = Client()
    web.force_login(make_user("appr", group=APPROVER))
    page = web.get(f"/t/{mt.table.slug}/").content.decode()
    assert "Catalog: deltaweb (Unity Catalog API)" in page and "main.default.events" in page
    assert 'id="owner-staged">1 version (1)' in page and "the oldest unpublished commit waits for" in page
    assert "<dt>Refusals</dt><dd>2</dd>" in page
    clients = page[page.index('id="owner-clients"') :]
    assert "<td>svc</td><td>deltaweb/0.1.0</td><td>1</td><td>1</td>" in clients


def test_a_row_that_moved_after_the_request_read_it_is_read_again(session, roots) -> None:
    """The owner checks a commit on the row as the request read it and ratifies with a
    conditional UPDATE; when the row moved in between (frozen, or the version taken), it is read
    again: the freeze refuses (recorded), the taken version is a conflict naming the winner."""
    table_id, location, path = create_table(session, "moving")
    owner = database_owner()
    read = ManagedTable.objects.select_related("table").get(owner_table_id=table_id)  # the request's read
    _, ict = previous_ict(session, table_id, location, path)
    ManagedTable.objects.filter(pk=read.pk).update(frozen=True, frozen_reason="audit")  # after the read
    staged = cm.stage_commit(str(path), 1, [add("a.parquet")], "WRITE", previous_ict=ict)
    out = owner.commit_staged(table_conf(read), 1, staged.file_name, known=read)
    assert isinstance(out, CommitRefused) and out.code == "policy" and "frozen" in out.reason
    assert OwnerRefusal.objects.filter(table_id=read.table_id, code="policy").count() == 1
    assert not RatifiedCommit.objects.filter(table_id=read.table_id, version=1).exists()

    ManagedTable.objects.filter(pk=read.pk).update(frozen=False)
    read = ManagedTable.objects.select_related("table").get(pk=read.pk)
    winner = cm.stage_commit(str(path), 1, [add("w.parquet")], "WRITE", previous_ict=ict)
    assert isinstance(owner.commit_staged(table_conf(read), 1, winner.file_name), CommitResponse)
    loser = cm.stage_commit(str(path), 1, [add("l.parquet")], "WRITE", previous_ict=ict)
    assert owner.commit_staged(table_conf(read), 1, loser.file_name, known=read) == CommitConflict(1, 1)
    (row,) = RatifiedCommit.objects.filter(table_id=read.table_id, version=1)
    assert row.path.endswith(winner.file_name)
    assert ManagedTable.objects.get(pk=read.pk).latest_version == 1


def test_the_cores_writer_and_readers_run_through_the_official_client(session, roots) -> None:
    """commit_via_owner and load_snapshot with the SDK as their CommitOwner: commits, a conflict
    naming the winner, history with ICTs, publishing through the client."""
    table_id, location, path = create_table(session, "events")
    owner = SdkCatalogOwner(session, table_id, location, str(path))
    assert commit_via_owner(str(path), owner, [add("a.parquet")], "WRITE").version == 1
    assert commit_via_owner(str(path), owner, [add("b.parquet")], "WRITE", txn_id="txn-b").version == 2
    with pytest.raises(CommitConflictError) as lost:
        commit_via_owner(str(path), owner, [add("c.parquet")], "WRITE", read_version=1)
    assert lost.value.details["version"] == 2
    # another writer takes version 3 first: the owner's answer names the winner at once
    other = cm.stage_commit(str(path), 3, [add("d.parquet")], "WRITE", previous_ict=10**13)
    session.commit(table_id, location, other)
    late = owner.commit(None, 3, b'{"commitInfo":{"inCommitTimestamp":1,"txnId":"x"}}\n')
    assert isinstance(late, CommitConflict) and late.winning_version == 3
    snap = load_snapshot(str(path), owner=owner)
    assert snap.version == 3 and set(snap.file_paths()) == {"a.parquet", "b.parquet", "d.parquet"}
    assert RatifiedCommit.objects.get(table__managed__owner_table_id=table_id, version=2).txn_id == "txn-b"
    assert load_snapshot(str(path)).version == 0  # nothing published yet
    assert owner.backfill_to_version(None, 3) == 3
    assert load_snapshot(str(path)).version == 3
    assert session.get_commits(table_id, location, 0).commits == []
    assert ManagedTable.objects.get(owner_table_id=table_id).backfilled_version == 3
