"""`delta snapshot`: a version's state (protocol, metadata, files), as JSON or text."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from typing import Any

from tables.delta.cli.base import VersionSource, compact, text_table, warn_incomplete


def snapshot_payload(path: str, opts: Mapping[str, Any], version_source: VersionSource | None = None) -> Any:
    """The snapshot's summary, with its file list unless --no-files."""
    return _snapshot(path, opts.get("version"), version_source).summary(files=not opts.get("no_files"))


def _snapshot(path: str, version: int | None, version_source: VersionSource | None = None) -> Any:
    """The snapshot at `version`; the latest is the last complete commit's (with a warning
    when a newer one is still being written). A version asked for by number is read as is,
    or where `version_source` says, numbered as asked."""
    from tables.delta.snapshot.state import load_snapshot

    if version is not None:
        elsewhere = version_source(path, version) if version_source is not None else None
        if elsewhere is None:
            return load_snapshot(path, version)
        location, there, note = elsewhere
        snap = dataclasses.replace(load_snapshot(location, there), version=version)
        sys.stderr.write(f"note: {note}\n")
        return snap
    storage, listing = _latest_listing(path)
    return load_snapshot(storage, None, listing=listing)


def _latest_listing(path: str) -> tuple[Any, Any]:
    """The table's storage and its log up to the last complete commit, warning about a newer one."""
    from tables.delta.log.listing import tail_listing
    from tables.delta.storage.opening import as_storage

    storage = as_storage(path)
    listing = tail_listing(storage)  # without a commit its writer has not finished
    warn_incomplete(listing)
    return storage, listing


def snapshot_text(p: Any) -> str:
    proto = p["protocol"]
    head = [
        f"version      {p['version']}",
        f"protocol     reader {proto['minReaderVersion']}, writer {proto['minWriterVersion']}"
        + (
            f", features {', '.join(proto.get('readerFeatures') or [])} / {', '.join(proto.get('writerFeatures') or [])}"
            if proto.get("writerFeatures") is not None
            else ""
        ),
        f"table id     {p['metadata']['id']}",
        f"partitions   {', '.join(p['metadata']['partitionColumns']) or '(none)'}",
        f"files        {p['numFiles']} ({p['sizeBytes']} bytes)",
    ]
    text = "\n".join(head) + "\n"
    if "files" in p:
        text += "\n" + text_table(
            ["path", "size", "partitionValues", "deletionVector"],
            [
                [f["path"], f["size"], compact(f["partitionValues"]), (f["deletionVector"] or {}).get("uniqueId")]
                for f in p["files"]
            ],
        )
    return text
