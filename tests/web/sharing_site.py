"""What the Delta Sharing tests share: tables registered and shared with windows, a recipient
with a token and its profile file, and the peers the answers are compared with: delta-rs, or
for the tables delta-rs cannot read (deletion vectors, type widening) the Delta kernel itself
(delta-kernel-rs, the connector's own reader) on the table's log cut at the version."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa

from tables.models import Recipient, Share, SharedTable, Table
from tables.services.sharing.recipients import issue_token, profile


@dataclass
class Site:
    base: str  # the live server's URL
    profile: Path
    token: str
    recipient: Recipient
    share: Share

    def url(self, name: str, schema: str = "default") -> str:
        return f"{self.profile}#{self.share.name}.{schema}.{name}"


def register(name: str, location: str | Path) -> Table:
    return Table.objects.create(name=name, slug=name, location=str(location))


def share_tables(base: str, tmp: Path, tables: dict[str, dict], share: str = "s1") -> Site:
    """A share holding each table (name -> {table, first_version, last_version, change_data}),
    a recipient of it with a fresh token, and its profile file under `tmp`."""
    found = Share.objects.create(name=share)
    for name, spec in tables.items():
        SharedTable.objects.create(share=found, name=name, **spec)
    recipient = Recipient.objects.create(name=f"partner-{share}")
    recipient.shares.add(found)
    token = issue_token(recipient)
    path = tmp / f"{share}.share"
    path.write_text(json.dumps(profile(recipient, token, f"{base}/delta-sharing/")))
    return Site(base, path, token, recipient, found)


def sorted_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Rows in one order, columns by name, plain values: the answer is a multiset of rows."""
    cols = sorted(df.columns)
    out = df[cols].astype(object).where(df[cols].notna(), None)
    return out.sort_values(cols, kind="stable", key=lambda s: s.map(repr)).reset_index(drop=True)


def assert_same_rows(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert len(got) == len(want), (len(got), len(want))
    pd.testing.assert_frame_equal(sorted_frame(got), sorted_frame(want), check_dtype=False)


def kernel_rows(path: Path, version: int, tmp: Path) -> pd.DataFrame:
    return kernel_table(path, version, tmp).to_pandas()


def kernel_table(path: Path, version: int, tmp: Path) -> pa.Table:
    """The Delta kernel's rows of `path` at `version`: the kernel reads a table's latest version,
    so it reads a copy of the log cut at `version` beside links to the data."""
    import delta_kernel_rust_sharing_wrapper as kernel

    cut = tmp / f"cut-{path.name}-{version}"
    if cut.exists():
        shutil.rmtree(cut)
    (cut / "_delta_log").mkdir(parents=True)
    for entry in path.iterdir():
        if entry.name != "_delta_log":
            os.symlink(entry, cut / entry.name)
    for entry in (path / "_delta_log").iterdir():
        head = entry.name.split(".")[0]
        if head.isdigit() and int(head) <= version:
            shutil.copy(entry, cut / "_delta_log" / entry.name)
    uri = f"file://{cut}"
    interface = kernel.PythonInterface(uri)
    scan = kernel.ScanBuilder(kernel.Table(uri).snapshot(interface)).build()
    return pa.Table.from_batches(scan.execute(interface))


def peer_rows(path: Path, version: int, tmp: Path, kernel: bool = False) -> pd.DataFrame:
    """delta-rs's rows at `version`; the kernel's where delta-rs refuses the table's features
    (or `kernel`: where it misreads them)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaProtocolError

    if kernel:
        return kernel_rows(path, version, tmp)
    try:
        return DeltaTable(str(path), version=version).to_pandas()
    except DeltaProtocolError:
        return kernel_rows(path, version, tmp)
