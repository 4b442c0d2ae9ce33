"""RESTORE from a pin on S3 (moto's server): a table written by delta-rs, version 1 kept in the
pin store's prefix by server-side copies, then delta-rs's zero-retention VACUUM and log cleanup.
The plan reads version 1 from the kept table and names the objects to bring back without
copying any; bringing them back is one CopyObject each (the bytes never pass through deltaweb),
each checked by its size, and an object already there with the size is not copied again.
delta-rs then reads the restored table's new version with version 1's rows."""

from __future__ import annotations

import uuid

import pytest

from tables.delta.errors import RestoreError
from tables.delta.restore.commit import commit_restore
from tables.delta.restore.from_pin import bring_back
from tables.delta.restore.plan import plan_restore
from tables.delta.storage.opening import as_storage
from tables.delta.write.keep import keep_version
from tests.core.test_keep_s3 import PLAIN, rows, s3, write_table  # noqa: F401 (the fixture)

deltalake = pytest.importorskip("deltalake")


def test_restore_from_a_pin_on_s3(s3):  # noqa: F811 (the fixture)
    prefix = f"s3://{PLAIN}/t-{uuid.uuid4().hex[:8]}"
    table, kept = f"{prefix}/table", f"{prefix}/pins/v1"
    write_table(s3, table)
    expected = rows(s3, table, 1)
    keep_version(table, 1, kept)
    dt = deltalake.DeltaTable(table, storage_options=s3.storage_options())
    assert dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    deltalake.DeltaTable(table, storage_options=s3.storage_options()).cleanup_metadata()

    plan = plan_restore(table, version=1, pinned=kept)
    back = plan.pinned_files
    assert back and plan.from_pin["bytes"] == sum(f.size for f in back)
    storage = as_storage(table)
    assert not any(storage.exists(f.path) for f in back)  # planning copies nothing

    # one object is there already with its size (an earlier attempt's copy): not copied again
    storage.place(as_storage(kept), back[0].path, back[0].path)
    done = bring_back(as_storage(table), as_storage(kept), back)
    assert done["placed"] == {"present": 1, **({"server-copy": len(back) - 1} if len(back) > 1 else {})}
    assert done["copied"] == len(back) - 1 and done["bytes"] == sum(f.size for f in back[1:])
    result = commit_restore(table, plan)
    assert result["verified"]
    assert rows(s3, table) == expected


def test_an_object_of_another_size_is_never_replaced(s3):  # noqa: F811 (the fixture)
    prefix = f"s3://{PLAIN}/t-{uuid.uuid4().hex[:8]}"
    table, kept = f"{prefix}/table", f"{prefix}/pins/v1"
    write_table(s3, table)
    keep_version(table, 1, kept)
    dt = deltalake.DeltaTable(table, storage_options=s3.storage_options())
    dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    plan = plan_restore(table, version=1, pinned=kept)
    victim = plan.pinned_files[0]
    storage = as_storage(table)
    storage.put(victim.path, b"not the pinned bytes")
    head = deltalake.DeltaTable(table, storage_options=s3.storage_options()).version()
    with pytest.raises(RestoreError, match="exists already"):
        bring_back(storage, as_storage(kept), plan.pinned_files)
    assert storage.read(victim.path) == b"not the pinned bytes"
    assert deltalake.DeltaTable(table, storage_options=s3.storage_options()).version() == head
