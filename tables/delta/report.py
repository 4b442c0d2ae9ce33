"""A snapshot's summary as a JSON-ready dict, for the web's version pages (pure, no Django).

This was the `delta` command's renderer; the command now lives in tables.delta.cli with its
own payloads, so the CLI's JSON contract and what the web shows can change independently.
Only the web's summary remains here, for tables/versions.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .snapshot import Snapshot


def snapshot_summary(snap: Snapshot, files: bool = False) -> dict[str, Any]:
    """Version, protocol, metadata (schema parsed), size, set transactions and domain metadata;
    `files` adds every live file; on a managed table, its managed-commit state too."""
    md = snap.metadata
    out: dict[str, Any] = {
        "version": snap.version,
        "protocol": snap.protocol.to_dict(),
        "metadata": {
            "id": md.id,
            "name": md.name,
            "description": md.description,
            "schema": md.schema,
            "partitionColumns": list(md.partition_columns),
            "configuration": md.configuration,
            "createdTime": md.created_time,
        },
        "numFiles": snap.num_files,
        "sizeBytes": snap.size_bytes,
    }
    if files:
        out["files"] = snap.file_dicts()
    out["setTransactions"] = list(snap.txns.values())
    out["domainMetadata"] = list(snap.domains.values())
    if snap.managed is not None:
        out["managed"] = snap.managed.to_dict()
        out["stalenessWarning"] = snap.staleness_warning
        out["owner"] = snap.owner_view.to_dict() if snap.owner_view is not None else None
    return out


# the name tables/versions.py imports today; drop it once that import says snapshot_summary
snapshot_payload = snapshot_summary
