"""The Delta Sharing server checked with the official `delta-sharing` connector against
delta-rs reading the same version."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import golden_path

from .sharing_site import register, share_tables

delta_sharing = pytest.importorskip("delta_sharing")
deltalake = pytest.importorskip("deltalake")


def sorted_frame(df: pd.DataFrame) -> pd.DataFrame:
    cols = sorted(df.columns)
    return df[cols].sort_values(cols, kind="stable").reset_index(drop=True)


def test_smoke(live_server, settings, tmp_path):
    path = golden_path("time-travel-partition-changes-b")
    settings.DELTAWEB_ALLOWED_ROOTS = [str(path.parent)]
    t = register("tt", path)
    site = share_tables(live_server.url, tmp_path, {"tt": {"table": t}})
    client = delta_sharing.SharingClient(str(site.profile))
    print(client.list_all_tables())
    got = delta_sharing.load_as_pandas(site.url("tt"))
    want = deltalake.DeltaTable(str(path)).to_pandas()
    pd.testing.assert_frame_equal(sorted_frame(got), sorted_frame(want), check_dtype=False)
