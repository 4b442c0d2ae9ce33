"""What a RESTORE writes besides files: the protocol (merged, never lower unless a downgrade
is allowed), the metadata (the target's, with the log-history properties of the latest), the
domains, and whether the table can be written at all."""

from __future__ import annotations

from typing import Any

import orjson

from tables.delta.errors import UnsupportedFeatureError
from tables.delta.log.actions import Metadata, Protocol
from tables.delta.log.ict import ENABLE_KEYS, ICT_FEATURES, TIMESTAMP_KEYS, VERSION_KEYS
from tables.delta.write.committer import FILESYSTEM, Committer

# Legacy features and the (reader, writer) versions that imply them (Delta's TableFeature).
LEGACY_FEATURES: dict[str, tuple[int, int]] = {
    "appendOnly": (1, 2),
    "invariants": (1, 2),
    "checkConstraints": (1, 3),
    "changeDataFeed": (1, 4),
    "generatedColumns": (1, 4),
    "columnMapping": (2, 5),
    "identityColumns": (1, 6),
}
READER_WRITER_LEGACY = frozenset({"columnMapping"})

# Writer features a RESTORE commit honours: it only re-adds files the log already described,
# rewrites metadata and protocol, and writes domain metadata. Commit-owner (managed/catalog)
# tables need their owner to ratify commits, so they are refused, as is anything unknown.
RESTORE_WRITER_FEATURES = frozenset(
    {
        *LEGACY_FEATURES,
        "deletionVectors",
        "timestampNtz",
        "domainMetadata",
        "v2Checkpoint",
        "inCommitTimestamp",
        "inCommitTimestamp-preview",
        "rowTracking",
        "typeWidening",
        "typeWidening-preview",
        "vacuumProtocolCheck",
        "icebergCompatV1",
        "icebergCompatV2",
        "clustering",
        "liquid",
        "allowColumnDefaults",
        "variantType",
        "variantType-preview",
        "variantShredding-preview",
        "collations-preview",
        "checkpointProtection",
    }
)

# System domains whose state is about the log's history, not the table's content.
RETAINED_DOMAINS = frozenset({"delta.rowTracking"})

_ICT_KEYS = (*ENABLE_KEYS, *VERSION_KEYS, *TIMESTAMP_KEYS)


# --- protocol ------------------------------------------------------------------------------


def implicit_features(p: Protocol) -> set[str]:
    """Features a legacy protocol supports without naming them (none once it uses features)."""
    if p.min_reader_version >= 3 or p.min_writer_version >= 7:
        return set()
    return {f for f, (r, w) in LEGACY_FEATURES.items() if r <= p.min_reader_version and w <= p.min_writer_version}


def feature_names(p: Protocol) -> set[str]:
    return set(p.reader_features or ()) | set(p.writer_features or ()) | implicit_features(p)


def can_upgrade(frm: Protocol, to: Protocol) -> bool:
    """Delta Lake's Protocol.canUpgradeTo: `to` has versions and features at least frm's."""
    return (
        to.min_reader_version >= frm.min_reader_version
        and to.min_writer_version >= frm.min_writer_version
        and feature_names(frm) <= feature_names(to)
    )


def merge_protocols(*protocols: Protocol) -> Protocol:
    """Delta Lake's Protocol.merge: max versions, union of explicit features, and the legacy
    features the inputs imply listed explicitly once the result uses table features."""
    reader = max(p.min_reader_version for p in protocols)
    writer = max(p.min_writer_version for p in protocols)
    if reader < 3 and writer < 7:
        return Protocol(reader, writer)
    rf = {f for p in protocols for f in (p.reader_features or ())}
    wf = {f for p in protocols for f in (p.writer_features or ())}
    for f in set().union(*(implicit_features(p) for p in protocols)):
        wf.add(f)
        if f in READER_WRITER_LEGACY and reader >= 3:
            rf.add(f)
    return Protocol(
        reader,
        writer,
        tuple(sorted(rf)) if reader >= 3 else None,
        tuple(sorted(wf)) if writer >= 7 else None,
    )


def same_protocol(a: Protocol, b: Protocol) -> bool:
    return can_upgrade(a, b) and can_upgrade(b, a)


# each outcome of restore_protocol in words for people (pages, the admin, the CLI); the plan
# keeps the outcome itself, which the API documents
PROTOCOL_OUTCOME_WORDS = {
    "unchanged": "unchanged",
    "merged": "unchanged (latest kept)",
    "upgraded": "upgraded",
    "downgraded": "downgraded",
    "replaced": "replaced by the target's",
}


def protocol_outcome_words(outcome: str | None) -> str:
    """What a plan's protocolOutcome means, e.g. "merged" -> "unchanged (latest kept)"."""
    return PROTOCOL_OUTCOME_WORDS.get(outcome or "", outcome or "")


def restore_protocol(latest: Protocol, target: Protocol, allow_downgrade: bool) -> tuple[Protocol, str, str]:
    """(protocol to write, outcome, explanation)."""
    if allow_downgrade:
        if same_protocol(target, latest):
            return latest, "unchanged", "the target's protocol equals the latest"
        if can_upgrade(target, latest):
            return (
                target,
                "downgraded",
                (
                    "protocol downgrade allowed: the target's lower protocol is written "
                    "(time travel to versions that need the dropped features may break)"
                ),
            )
        if can_upgrade(latest, target):
            return target, "upgraded", "the target's protocol is higher than the latest and is written"
        return target, "replaced", "protocol downgrade allowed: the target's protocol replaces the latest"
    if can_upgrade(target, latest):
        if same_protocol(target, latest):
            return latest, "unchanged", "the target's protocol equals the latest"
        return (
            latest,
            "merged",
            ("the target's protocol is lower than the latest; the latest is kept (never downgraded unless allowed)"),
        )
    merged = merge_protocols(target, latest)
    return (
        merged,
        "upgraded",
        ("the target needs features or versions the latest protocol lacks; the protocol is the merge of both"),
    )


# --- managed tables: a RESTORE through the table's commit-owner (issue 7) ----------------------
# With an OwnerCommitter (write/committer.py) the restore reads the log with the owner's
# ratified, un-backfilled commits merged in and commits through managed.commit_via_owner, so
# the owner's policy sees the commit (and its txnId) before it lands. With the filesystem's, a
# managed table is refused: a RESTORE written around its owner would break the table.


def _owner_keys() -> frozenset[str]:
    from tables.delta.managed.owner import FLAVORS

    return frozenset(k for fl in FLAVORS for k in fl.keys)


# --- end of managed tables ----------------------------------------------------------------------


def check_writable(protocol: Protocol, where: str, committer: Committer = FILESYSTEM) -> None:
    """Refuse a protocol whose writer requirements a RESTORE commit cannot honour (a managed
    table's only through its commit-owner: a `committer` that is `managed`)."""
    from tables.delta.managed.owner import MANAGED_FEATURES

    if protocol.min_writer_version > 7:
        raise UnsupportedFeatureError(
            f"{where}: writer version {protocol.min_writer_version} is not supported by RESTORE",
            feature=f"writerVersion{protocol.min_writer_version}",
        )
    managed = sorted(feature_names(protocol) & MANAGED_FEATURES)
    if managed and not committer.managed:
        raise UnsupportedFeatureError(
            f"{where}: the table is managed by a commit-owner ({', '.join(managed)}); a RESTORE must be "
            f"committed through its owner",
            feature=managed[0],
        )
    unknown = sorted(feature_names(protocol) - RESTORE_WRITER_FEATURES - MANAGED_FEATURES)
    if unknown:
        raise UnsupportedFeatureError(
            f"{where}: RESTORE cannot write a table with writer feature{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(unknown)}",
            feature=unknown[0],
        )


# --- metadata and domains ----------------------------------------------------------------------


def _identity_fields(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        f["name"]: f.get("metadata") or {}
        for f in schema.get("fields", [])
        if isinstance(f, dict) and "delta.identity.highWaterMark" in (f.get("metadata") or {})
    }


def restore_metadata(latest: Metadata, target: Metadata, protocol: Protocol) -> tuple[dict[str, Any], list[str]]:
    """The target's metadata with the history properties of the latest, and what was kept."""
    md = target.to_dict()
    notes: list[str] = []
    conf = {k: v for k, v in md["configuration"].items() if k not in _ICT_KEYS}
    if any(protocol.has_writer_feature(f) for f in ICT_FEATURES):
        kept = {k: v for k, v in latest.configuration.items() if k in _ICT_KEYS}
        conf.update(kept)
    else:
        kept = {}
    if {k: v for k, v in target.configuration.items() if k in _ICT_KEYS} != kept:
        notes.append("metadata: In-Commit Timestamp properties kept from the latest version")
    owner_keys = _owner_keys()  # who owns the table's commits is not history: the latest's stand
    conf = {k: v for k, v in conf.items() if k not in owner_keys}
    conf.update({k: v for k, v in latest.configuration.items() if k in owner_keys})
    md["configuration"] = conf
    # identity columns: keep the higher high-water mark so generated values never repeat
    try:
        tschema, lschema = target.schema, latest.schema
    except orjson.JSONDecodeError:
        return md, notes
    latest_ids = _identity_fields(lschema)
    changed = False
    for f in tschema.get("fields", []):
        meta = (f.get("metadata") or {}) if isinstance(f, dict) else {}
        if "delta.identity.start" not in meta and "delta.identity.highWaterMark" not in meta:
            continue
        other = latest_ids.get(f.get("name"), {}).get("delta.identity.highWaterMark")
        if other is None:
            continue
        mine = meta.get("delta.identity.highWaterMark")
        step = int(meta.get("delta.identity.step", 1) or 1)
        best = other if mine is None else (max(mine, other) if step > 0 else min(mine, other))
        if best != mine:
            meta["delta.identity.highWaterMark"] = best
            f["metadata"] = meta
            changed = True
    if changed:
        md["schemaString"] = orjson.dumps(tschema).decode()
        notes.append("metadata: identity column high-water marks kept from the latest version")
    return md, notes


def restore_domains(latest: dict[str, dict[str, Any]], target: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """domainMetadata actions that make the latest's domains the target's."""
    out = []
    for name in sorted(target):
        if name in RETAINED_DOMAINS:
            continue
        body = {**target[name], "removed": False}
        if name not in latest or latest[name].get("configuration") != body.get("configuration"):
            out.append(body)
    for name in sorted(latest):
        if name not in target and name not in RETAINED_DOMAINS:
            out.append({**latest[name], "removed": True})
    return out
