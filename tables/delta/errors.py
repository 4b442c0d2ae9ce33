"""One exception hierarchy for the Delta core; every message names what and where."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class DeltaError(Exception):
    """Base of every error the core raises on purpose; `code` is a stable machine name."""

    code = "delta_error"

    def __init__(self, message: str, **details: object) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def __str__(self) -> str:
        return self.message


class NotADeltaTableError(DeltaError):
    code = "not_a_delta_table"


class VersionNotFoundError(DeltaError):
    code = "version_not_found"


class LogGapError(DeltaError):
    code = "log_gap"


class StateReconstructionError(DeltaError):
    """The log holds no protocol or no metadata for the requested version."""

    code = "state_reconstruction"


class UnsupportedFeatureError(DeltaError):
    code = "unsupported_feature"


class CorruptLogError(DeltaError):
    """A commit, compaction or checkpoint file that cannot be parsed."""

    code = "corrupt_log"


class PathTooLongError(CorruptLogError):
    """A path the log names that no storage can hold (longer than PATH_MAX, or a file name
    longer than the file system's), refused by the storage boundary before it is decoded,
    joined or opened."""


class CorruptCheckpointError(CorruptLogError):
    code = "corrupt_checkpoint"


class CheckpointMismatchError(CorruptCheckpointError):
    """A checkpoint that reads well but is not the state it claims: its file count disagrees
    with the `_last_checkpoint` its writer left (another table's checkpoint, one rewritten)."""

    code = "checkpoint_mismatch"


class InvalidTimestampError(DeltaError):
    code = "invalid_timestamp"


class TimestampOutOfRangeError(DeltaError):
    """Timestamp before the earliest available version or after the latest commit."""

    code = "timestamp_out_of_range"


class CommitConflictError(DeltaError):
    """The version a writer tried to create exists already."""

    code = "commit_conflict"

    def __init__(self, message: str, version: int, **details: object) -> None:
        super().__init__(message, version=version, **details)
        self.version = version


class StorageError(DeltaError):
    code = "storage_error"


class KeepTargetError(DeltaError):
    """A kept version's location is a table already, or lies inside the table it keeps."""

    code = "keep_target_exists"


class KeepInsideTableError(KeepTargetError):
    """A kept version's location inside a Delta table (a `_delta_log` in an ancestor, after its
    symbolic links and '..'), any table, registered or not: its VACUUM would delete the copy."""

    code = "keep_target_in_table"


class KeepAtRootError(KeepTargetError):
    """A kept version's location that is an allowed root itself, or holds one: the kept table
    would hold every table under the root."""

    code = "keep_target_is_root"


class PinStoreRefusedError(KeepTargetError):
    """A pin store (DELTAWEB_PIN_STORE) where no kept version may go: an allowed root itself or
    a directory that holds one, inside a Delta table, or a system directory."""

    code = "pin_store_refused"


# object stores: the error codes (S3, Azure, GCS, STS) that mean refused credentials
ACCESS_CODES = (
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "AccessDenied",
    "ExpiredToken",
    "InvalidToken",
    "AuthorizationHeaderMalformed",
    "AuthenticationFailed",
    "AuthorizationFailure",
    "AuthorizationPermissionMismatch",
    "InvalidClientTokenId",
)


class ObjectStoreAccessError(StorageError):
    """The object store refused the credentials (wrong, expired, or without the permission)."""

    code = "storage_access_denied"


class BucketNotFoundError(StorageError):
    """The bucket (or container) a location names does not exist."""

    code = "storage_bucket_not_found"


class StorageUnavailableError(StorageError):
    """The object store did not answer after the bounded retries (network, 5xx, timeouts)."""

    code = "storage_unavailable"


class ConditionalPutUnsupportedError(StorageError):
    """A store that cannot put an object only if absent: commits to it are refused."""

    code = "storage_no_conditional_put"


class PathOutsideRootsError(StorageError):
    """A path the log names (or the log itself) that resolves outside the allowed roots."""

    code = "path_outside_roots"


class NotVersionedError(StorageError):
    """Recovery from noncurrent object versions asked of a store that keeps none: not an
    object store, a backend without versions, or a bucket whose versioning is not on."""

    code = "store_not_versioned"


class RecoveryError(StorageError):
    """An object was not put back from its noncurrent version: a current object with other
    bytes holds the key, another writer wrote it meanwhile, or the copy did not check out."""

    code = "recovery_failed"


@contextmanager
def at_version(what: str) -> Iterator[None]:
    """Name the version (`what`, e.g. "version 3") in a refusal raised inside the block."""
    try:
        yield
    except PathOutsideRootsError as exc:
        if exc.details.get("at"):
            raise
        raise PathOutsideRootsError(f"{what}: {exc.message}", at=what, **exc.details) from None


class InvalidManagedTableError(DeltaError):
    """A table whose commit-owner properties and table features disagree (the owner property
    without the feature, the feature without the property, an unreadable owner conf)."""

    code = "invalid_managed_table"


class ManagedTableError(DeltaError):
    """An operation that does not fit how the table's commits are owned: a filesystem commit on
    a managed table, an owner commit on a filesystem table, a table owned by someone else."""

    code = "managed_table"


class CommitRefusedError(DeltaError):
    """The commit-owner refused a commit (policy, a frozen table, a version gap); `reason` is
    the owner's own words."""

    code = "commit_refused"

    def __init__(self, message: str, version: int, reason: str, refusal: str = "commit_refused", **details: object):
        super().__init__(message, version=version, reason=reason, refusal=refusal, **details)
        self.version = version
        self.reason = reason
        self.refusal = refusal


class CommitOwnerError(DeltaError):
    """The commit-owner could not answer, or answered something that breaks its contract."""

    code = "commit_owner_error"


class OwnerUnavailableError(CommitOwnerError):
    code = "owner_unavailable"


class RestoreError(DeltaError):
    """A RESTORE that cannot be planned or committed as asked (target not before latest,
    a table feature this writer cannot honour, an append-only table, ...)."""

    code = "restore_invalid"


class MissingFilesError(RestoreError):
    """Files of the version to restore are gone from storage (vacuumed or deleted)."""

    code = "restore_missing_files"

    def __init__(self, message: str, files: list[str], version: int, **details: object) -> None:
        super().__init__(message, files=files, version=version, **details)
        self.files = files
        self.version = version


class CorruptDeletionVectorError(DeltaError):
    """A deletion vector that cannot be decoded, or whose content contradicts its descriptor."""

    code = "corrupt_deletion_vector"


class MissingDeletionVectorError(CorruptDeletionVectorError):
    """The file an on-disk deletion vector points to is not there."""

    code = "missing_deletion_vector"


class InvalidColumnsError(DeltaError):
    """Columns asked for that a version does not have, or diff keys that are not unique in it."""

    code = "invalid_columns"
