"""The app's models, one module per concept (what each holds is its docstring): catalog, history,
chain, jobs, restores, owner, access, pins, sharing. Everything is importable from here, as
`from tables.models import Table`."""

from tables.models.access import SsoIdentity, TokenExpiry
from tables.models.catalog import DiscoverySource, SyncState, Table
from tables.models.chain import ChainLook, HistoryRewrite, RewriteKind, SeenBlock, SeenChange
from tables.models.history import Anomaly, Commit, FileLook, FileRemovalEvent, VersionChecksum
from tables.models.jobs import Job, JobDuration, JobKind, JobStatus, params_hash
from tables.models.owner import ManagedTable, OwnerRefusal, OwnerState, RatifiedCommit, UcStagingTable
from tables.models.pins import Pin, PinEvent, PinState
from tables.models.restores import RecoveredObject, RestoreEvent, RestoreRequest, RestoreStatus
from tables.models.sharing import SHARING_NAME, Recipient, RecipientQuery, Share, SharedTable

__all__ = [
    "SHARING_NAME",
    "Anomaly",
    "ChainLook",
    "Commit",
    "DiscoverySource",
    "FileLook",
    "FileRemovalEvent",
    "HistoryRewrite",
    "Job",
    "JobDuration",
    "JobKind",
    "JobStatus",
    "ManagedTable",
    "OwnerRefusal",
    "OwnerState",
    "Pin",
    "PinEvent",
    "PinState",
    "RatifiedCommit",
    "Recipient",
    "RecipientQuery",
    "RecoveredObject",
    "RestoreEvent",
    "RestoreRequest",
    "RestoreStatus",
    "RewriteKind",
    "SeenBlock",
    "SeenChange",
    "Share",
    "SharedTable",
    "SsoIdentity",
    "SyncState",
    "Table",
    "TokenExpiry",
    "UcStagingTable",
    "VersionChecksum",
    "params_hash",
]
