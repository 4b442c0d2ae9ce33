"""The log's actions as plain Python: Protocol, Metadata, a deletion vector's unique id and
the names of the non-file actions.

Kept apart from log.actions (which reads the log columnar with pyarrow) so that a reader
that needs only these, such as the `delta` command's summary of a JSON log, imports no
pyarrow or numpy; log.actions re-exports every name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from tables.delta.errors import UnsupportedFeatureError

NON_FILE_ACTIONS = ("metaData", "protocol", "txn", "domainMetadata", "sidecar", "checkpointMetadata")
# lines whose first action is one of these hold no non-file action replay reads
SKIP_PREFIXES = (b'{"commitInfo"', b'{"cdc"', b'{"add"', b'{"remove"')
FILE_URI = r"^file:(?://(?:localhost)?)?/"
_FILE_URI_RE = re.compile(FILE_URI)

MAX_READER_VERSION = 3
# Reader features whose log semantics this reader implements (data reading is Spark's job).
SUPPORTED_READER_FEATURES = frozenset(
    {
        "columnMapping",
        "deletionVectors",
        "timestampNtz",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "typeWidening",
        "typeWidening-preview",
        "variantType",
        "variantType-preview",
        "variantShredding-preview",
        # read through the catalog when one is given, else with a staleness warning
        "catalogManaged",
        "catalogOwned-preview",
    }
)


@dataclass(frozen=True, slots=True)
class Protocol:
    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Protocol:
        rf, wf = d.get("readerFeatures"), d.get("writerFeatures")
        return cls(
            int(d.get("minReaderVersion") or 1),
            int(d.get("minWriterVersion") or 2),
            tuple(rf) if rf is not None else None,
            tuple(wf) if wf is not None else None,
        )

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"minReaderVersion": self.min_reader_version, "minWriterVersion": self.min_writer_version}
        if self.reader_features is not None:
            d["readerFeatures"] = list(self.reader_features)
        if self.writer_features is not None:
            d["writerFeatures"] = list(self.writer_features)
        return d

    def has_writer_feature(self, name: str) -> bool:
        return self.min_writer_version >= 7 and name in (self.writer_features or ())


@dataclass(frozen=True, slots=True)
class Metadata:
    id: str
    name: str | None
    description: str | None
    format: dict[str, Any]
    schema_string: str
    partition_columns: tuple[str, ...]
    configuration: dict[str, str] = field(default_factory=dict)
    created_time: int | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Metadata:
        return cls(
            id=d.get("id") or "",
            name=d.get("name"),
            description=d.get("description"),
            format=d.get("format") or {"provider": "parquet", "options": {}},
            schema_string=d.get("schemaString") or '{"type":"struct","fields":[]}',
            partition_columns=tuple(d.get("partitionColumns") or ()),
            configuration=dict(d.get("configuration") or {}),
            created_time=d.get("createdTime"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "format": self.format,
            "schemaString": self.schema_string,
            "partitionColumns": list(self.partition_columns),
            "configuration": self.configuration,
            "createdTime": self.created_time,
        }

    def summary(self) -> dict[str, Any]:
        """The metaData as a version's summary shows it: the schema parsed, no format."""
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "schema": self.schema,
            "partitionColumns": list(self.partition_columns),
            "configuration": self.configuration,
            "createdTime": self.created_time,
        }

    @property
    def schema(self) -> dict[str, Any]:
        return orjson.loads(self.schema_string)

    def partition_keys(self) -> list[str]:
        """Keys of `partitionValues`: physical names when column mapping gives them."""
        physical = {}
        try:
            for f in self.schema.get("fields", []):
                pn = (f.get("metadata") or {}).get("delta.columnMapping.physicalName")
                physical[f["name"]] = pn or f["name"]
        except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError):
            pass
        return [physical.get(c, c) for c in self.partition_columns]


def dv_unique_id(dv: dict[str, Any] | None) -> str | None:
    """The protocol's deletion-vector unique id: storageType + pathOrInlineDv [+ '@' offset]."""
    if not dv:
        return None
    uid = f"{dv.get('storageType')}{dv.get('pathOrInlineDv')}"
    return f"{uid}@{dv['offset']}" if dv.get("offset") is not None else uid


def canonical_path(path: str) -> str:
    """`file:/x`, `file:///x` and `/x` name the same file (Delta Lake canonicalizes them);
    snapshot.replay.canonical_paths does the same to a column of paths."""
    return _FILE_URI_RE.sub("/", path) if path.startswith("file:") else path


@dataclass(slots=True)
class NonFileState:
    """The non-file state a replay keeps: the latest protocol and metaData win, txn by appId,
    domainMetadata by domain (removed=true deletes it)."""

    protocol: Protocol | None = None
    metadata: Metadata | None = None
    txns: dict[str, dict[str, Any]] = field(default_factory=dict)
    domains: dict[str, dict[str, Any]] = field(default_factory=dict)
    protocol_version: int | None = None
    metadata_version: int | None = None

    def apply(self, version: int, name: str, body: dict[str, Any]) -> None:
        if name == "protocol":
            self.protocol, self.protocol_version = Protocol.from_dict(body), version
        elif name == "metaData":
            self.metadata, self.metadata_version = Metadata.from_dict(body), version
        elif name == "txn":
            self.txns[str(body.get("appId"))] = body
        elif name == "domainMetadata":
            domain = str(body.get("domain"))
            if body.get("removed"):
                self.domains.pop(domain, None)
            else:
                self.domains[domain] = body


def check_reader_protocol(protocol: Protocol, where: str) -> None:
    if protocol.min_reader_version > MAX_READER_VERSION:
        raise UnsupportedFeatureError(
            f"{where}: reader version {protocol.min_reader_version} is not supported "
            f"(this reader implements up to {MAX_READER_VERSION})",
            feature=f"readerVersion{protocol.min_reader_version}",
        )
    if protocol.min_reader_version == 3:
        unknown = sorted(set(protocol.reader_features or ()) - SUPPORTED_READER_FEATURES)
        if unknown:
            raise UnsupportedFeatureError(
                f"{where}: unsupported reader feature{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}",
                feature=unknown[0],
            )
