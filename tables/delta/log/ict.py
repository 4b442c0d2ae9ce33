"""In-Commit Timestamps as a table declares them: the writer feature, the properties that
switch them on and say from which version and time, and what a table's protocol and metadata
make of them (`ict_config`). Read by the log's writer, the managed tables' checks, restore's
protocol rules and the timestamps across versions alike, so it sits with the log's actions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from tables.delta.log.model import Metadata
from tables.delta.log.model import Protocol as DeltaProtocol


class Configured(Protocol):
    """Anything with a table's protocol and metadata (a snapshot's TableConfig)."""

    protocol: DeltaProtocol
    metadata: Metadata


ICT_FEATURES = ("inCommitTimestamp", "inCommitTimestamp-preview")
ENABLE_KEYS = ("delta.enableInCommitTimestamps", "delta.enableInCommitTimestamps-preview")
VERSION_KEYS = ("delta.inCommitTimestampEnablementVersion", "delta.inCommitTimestampEnablementVersion-preview")
TIMESTAMP_KEYS = ("delta.inCommitTimestampEnablementTimestamp", "delta.inCommitTimestampEnablementTimestamp-preview")


@dataclass(frozen=True, slots=True)
class IctConfig:
    enabled: bool
    enablement_version: int | None
    enablement_timestamp: int | None
    problems: tuple[str, ...] = ()

    def applies(self, version: int) -> bool:
        return self.enabled and (self.enablement_version is None or version >= self.enablement_version)

    def to_dict(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "enablementVersion": self.enablement_version,
            "enablementTimestamp": self.enablement_timestamp,
        }


def _first(config: dict[str, str], keys: tuple[str, ...]) -> str | None:
    for k in keys:
        if k in config:
            return config[k]
    return None


def ict_config(cfg: Configured) -> IctConfig:
    conf = cfg.metadata.configuration
    feature = any(cfg.protocol.has_writer_feature(f) for f in ICT_FEATURES)
    flag = (_first(conf, ENABLE_KEYS) or "false").strip().lower() == "true"
    problems: list[str] = []
    ev_raw, et_raw = _first(conf, VERSION_KEYS), _first(conf, TIMESTAMP_KEYS)
    ev = et = None
    try:
        ev = int(ev_raw) if ev_raw is not None else None
    except ValueError:
        problems.append(f"enablement version '{ev_raw[:50]}' is not a number")
    try:
        et = int(et_raw) if et_raw is not None else None
    except ValueError:
        problems.append(f"enablement timestamp '{et_raw[:50]}' is not a number")
    if (ev is None) != (et is None):
        problems.append("only one of the enablement version and timestamp properties is set")
        ev = et = None
    if flag and not feature:
        problems.append("delta.enableInCommitTimestamps is true but the protocol lacks the inCommitTimestamp feature")
    return IctConfig(feature and flag, ev, et, tuple(problems))
