"""`manage.py delta snapshot --version N` follows the one rule for where a version is read:
on a registered table's location, a version delta-rs removed (zero-retention VACUUM, then a
checkpoint and log cleanup) that a pin keeps is read from the pin, numbered as the table's
version, with a note on stderr; its JSON equals the same command's before the VACUUM and never
names the pin store's directory. A version no pin keeps fails as it did. The standalone `delta`
reads only the path it is given."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from django.core.management import call_command

from tables.delta import cli
from tables.models import Table
from tables.services.pins import lifecycle as pins
from tables.services.pins import queries as pin_queries
from tables.services.sync import store as sync
from tests.web.kept_tables import orders_table, pin_place, register

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable  # noqa: E402

pytestmark = pytest.mark.django_db
PINNED = 3  # kept by a pin; its files are removed by the overwrite at version 4
LOST = 1  # no pin: its files are removed by the overwrite at version 2
PIN_NAME = "quarter-end"
DESCRIBING = ("version", "numFiles", "sizeBytes", "metadata", "protocol", "files")


def _manage_delta(capsys, *args: str) -> tuple[int, str, str]:
    """`manage.py delta ARGS`: (exit status, stdout, stderr)."""
    capsys.readouterr()
    try:
        call_command("delta", *args)
        code = 0
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def vacuumed(settings, tmp_path, analyst, capsys) -> tuple[Table, Path, dict, str]:
    """The table pinned at PINNED; the snapshots of PINNED and LOST before; then delta-rs's
    zero-retention VACUUM, checkpoint and log cleanup, and a sync."""
    # the log keeps no history past a checkpoint, so cleanup_metadata removes every older commit
    path = orders_table(pin_place(settings, tmp_path) / "orders", {"delta.logRetentionDuration": "interval 0 seconds"})
    table = register(path)
    before = {}
    for v in (PINNED, LOST):
        code, out, err = _manage_delta(capsys, "snapshot", str(path), "--version", str(v), "--json")
        assert (code, err) == (0, "")
        before[v] = json.loads(out)
    adds = DeltaTable(str(path), version=PINNED).get_add_actions(flatten=True)
    adds = adds.to_pydict() if hasattr(adds, "to_pydict") else pa.table(adds).to_pydict()
    before["delta-rs"] = sorted(adds["path"])  # delta-rs's own reading of the version
    pins.create_pin(table, PINNED, PIN_NAME, "Q3 close", analyst)
    dt = DeltaTable(str(path))
    dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    dt.create_checkpoint()
    dt.cleanup_metadata()
    assert not (path / "_delta_log" / f"{PINNED:020d}.json").exists()  # the log lost it too
    from tables.services.versions import read as versions

    versions._SNAPSHOTS.clear()
    sync.sync_table(table.pk)
    table.refresh_from_db()
    return table, path, before, pin_queries.holding_pin(table, PINNED).store_location


def test_manage_delta_snapshot_reads_a_kept_version_from_its_pin(vacuumed, capsys) -> None:
    _table, path, before, store = vacuumed
    # any spelling of the registered location: a trailing slash, a '..'
    spelled = f"{path.parent}/../{path.parent.name}/{path.name}/"
    code, out, err = _manage_delta(capsys, "snapshot", spelled, "--version", str(PINNED), "--json")
    assert code == 0, err
    assert err == f"note: version {PINNED} of orders read from pin {PIN_NAME}: its files were removed by VACUUM\n"
    after = json.loads(out)
    assert {k: after[k] for k in DESCRIBING} == {k: before[PINNED][k] for k in DESCRIBING}
    assert str(Path(store)) not in out and "pins" not in out  # the store's directory is never told
    # the pinned version's files as delta-rs listed them before the VACUUM
    assert sorted(f["path"] for f in after["files"]) == before["delta-rs"] and after["numFiles"] > 0

    code, out, err = _manage_delta(capsys, "snapshot", str(path), "--version", str(PINNED))
    assert code == 0 and f"version      {PINNED}" in out and f"from pin {PIN_NAME}" in err


def test_an_unpinned_vacuumed_version_fails_as_the_standalone_command_does(vacuumed, capsys) -> None:
    _table, path, _before, _store = vacuumed
    code, out, err = _manage_delta(capsys, "snapshot", str(path), "--version", str(LOST), "--json")
    assert code == cli.EXIT_FAILED and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1 and "note:" not in err
    assert f"version {LOST} cannot be rebuilt" in err
    # the standalone `delta` reads only the path it is given: the same refusal, for both
    assert cli.main(["snapshot", str(path), "--version", str(LOST), "--json"]) == cli.EXIT_FAILED
    assert capsys.readouterr().err == err
    assert cli.main(["snapshot", str(path), "--version", str(PINNED), "--json"]) == cli.EXIT_FAILED
    assert "error: " in capsys.readouterr().err
