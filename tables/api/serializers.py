"""API shapes: model serializers, query-parameter validators and (for the OpenAPI schema) the
shapes of the payloads the services return as dicts.

Response bodies use camelCase (as the Delta log and DESCRIBE HISTORY do); query parameters use
snake_case. Timestamps of commits are milliseconds since the epoch (UTC).
"""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from tables.api.shapes import VersionReachabilitySerializer
from tables.delta.history.columns import COLUMNS as HISTORY_COLUMNS
from tables.delta.history.columns import HISTORY_FIELDS, Column
from tables.models import Anomaly, Commit, Job, JobKind, Table
from tables.services.catalog.lookup import INT64_MAX as MAX_VERSION
from tables.services.sync import incomplete

# --- helpers -------------------------------------------------------------------------


def _is_staff(serializer: serializers.Serializer) -> bool:
    request = serializer.context.get("request")
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_staff)


def without_staff_detail(serializer: serializers.Serializer, data: dict[str, Any]) -> dict[str, Any]:
    """A job's or restore's result keeps the technical cause of a failure (e.g. Spark's
    exception) under errorDetail; only staff see it."""
    result = data.get("result")
    if isinstance(result, dict) and "errorDetail" in result and not _is_staff(serializer):
        data["result"] = {k: v for k, v in result.items() if k != "errorDetail"}
    return data


class BlankAsNullCharField(serializers.CharField):
    """A text column stored as '' when absent, shown as null (as DESCRIBE HISTORY does)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_null", True)
        kwargs.setdefault("read_only", True)
        super().__init__(**kwargs)

    def to_representation(self, value: Any) -> str | None:
        return None if value in ("", None) else str(value)


# DRF refuses NUL in every CharField, but says so in no schema: this pattern documents it, so
# that clients (and the schema's own fuzzing) know a NUL is not text here.
NO_NUL = r"^[^\x00]*$"


class StrictCharField(serializers.CharField):
    """A string field that refuses numbers and booleans instead of turning them into text
    (DRF's CharField accepts {"reason": 0} as "0"), and documents that NUL is refused."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not any(isinstance(v, RegexValidator) for v in self.validators):
            self.validators.append(RegexValidator(NO_NUL, "Null characters are not allowed."))

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


def _add_field(serializer_cls: type[serializers.Serializer], name: str, field: serializers.Field, before: str) -> None:
    """Declare a field whose name cannot be a class attribute ('from', 'fields'), before another."""
    out: dict[str, serializers.Field] = {}
    for key, value in serializer_cls._declared_fields.items():
        if key == before:
            out[name] = field
        out[key] = value
    out.setdefault(name, field)
    serializer_cls._declared_fields = out


# --- tables and jobs -----------------------------------------------------------------


class IctSerializer(serializers.Serializer):
    enabled = serializers.BooleanField()
    enablementVersion = serializers.IntegerField(allow_null=True)
    enablementTimestamp = serializers.IntegerField(allow_null=True, help_text="ms since the epoch")


def created_by_field() -> serializers.SlugRelatedField:
    """Who created a row (a table, a job): a username, null for commands and the worker."""
    return serializers.SlugRelatedField(
        source="created_by",
        slug_field="username",
        read_only=True,
        allow_null=True,
        help_text="null when created by a command or the worker, or when the user was removed",
    )


class IncompleteCommitSerializer(serializers.Serializer):
    """The log's newest commit its writer has not finished: left out until it is whole."""

    version = serializers.IntegerField(help_text="the version whose commit file is incomplete")
    file = serializers.CharField(help_text="its commit file, relative to the table")
    reason = serializers.CharField(help_text="why it cannot be read, e.g. 'line 1 is not valid JSON at char 150'")
    shownUpTo = serializers.IntegerField(help_text="the history is shown up to this version")
    message = serializers.CharField()


class TableSerializer(serializers.ModelSerializer):
    createdBy = created_by_field()
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)
    syncState = serializers.CharField(source="sync_state", read_only=True)
    lastSyncedVersion = serializers.IntegerField(source="last_synced_version", read_only=True, allow_null=True)
    lastSyncedAt = serializers.DateTimeField(source="last_synced_at", read_only=True, allow_null=True)
    lastError = serializers.CharField(source="last_error", read_only=True)
    ict = serializers.SerializerMethodField()
    earliestVersion = serializers.IntegerField(source="earliest_version", read_only=True, allow_null=True)
    numFiles = serializers.IntegerField(source="num_files", read_only=True, allow_null=True)
    sizeBytes = serializers.IntegerField(source="size_bytes", read_only=True, allow_null=True)
    incompleteCommit = serializers.SerializerMethodField()

    class Meta:
        model = Table
        fields = [
            "id",
            "name",
            "slug",
            "location",
            "description",
            "createdBy",
            "createdAt",
            "syncState",
            "lastSyncedVersion",
            "lastSyncedAt",
            "lastError",
            "ict",
            "earliestVersion",
            "numFiles",
            "sizeBytes",
            "incompleteCommit",
        ]
        read_only_fields = fields

    @extend_schema_field(IctSerializer)
    def get_ict(self, table: Table) -> dict[str, Any]:
        return ict_payload(table)

    @extend_schema_field(IncompleteCommitSerializer(allow_null=True))
    def get_incompleteCommit(self, table: Table) -> dict[str, Any] | None:
        return incomplete.notice_of(table)


def ict_payload(table: Table) -> dict[str, Any]:
    return {
        "enabled": table.ict_enabled,
        "enablementVersion": table.ict_enablement_version,
        "enablementTimestamp": table.ict_enablement_timestamp,
    }


class TableCreateSerializer(serializers.Serializer):
    name = StrictCharField(min_length=1, max_length=200, help_text="Display name; must be unique.")
    location = StrictCharField(
        min_length=1,
        max_length=2000,
        help_text="Absolute path or file:// URI of the table root, under an allowed root.",
    )
    description = StrictCharField(required=False, allow_blank=True, default="", max_length=5000)


class JobSerializer(serializers.ModelSerializer):
    table = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    isTerminal = serializers.BooleanField(source="is_terminal", read_only=True)
    createdBy = created_by_field()
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)
    startedAt = serializers.DateTimeField(source="started_at", read_only=True, allow_null=True)
    finishedAt = serializers.DateTimeField(source="finished_at", read_only=True, allow_null=True)
    result = serializers.JSONField(
        read_only=True,
        allow_null=True,
        help_text="What the job found, by kind (a sync's newCommits and latestVersion; a data job's counts, "
        "columns, total...; a failure's errorCode). A finished data job's rows are paged at `resultsUrl` "
        "(/api/jobs/{id}/results/); the server's directories are never shown.",
    )
    params = serializers.JSONField(read_only=True, help_text="What the job was asked to do (versions, keys).")

    class Meta:
        model = Job
        fields = [
            "id",
            "kind",
            "params",
            "table",
            "status",
            "stage",
            "done",
            "total",
            "error",
            "result",
            "isTerminal",
            "createdBy",
            "createdAt",
            "startedAt",
            "finishedAt",
        ]
        read_only_fields = fields

    def to_representation(self, instance: Job) -> dict[str, Any]:
        data = without_staff_detail(self, super().to_representation(instance))
        data["result"] = public_result(instance, data.get("result"))
        return data


def public_result(job: Job, result: Any) -> Any:
    """A job's result as a client sees it: the worker keeps its files' absolute path on the row
    (the web process pages them from there), a client gets the API address that pages them."""
    if not isinstance(result, dict) or "path" not in result:
        return result
    out = {k: v for k, v in result.items() if k != "path"}
    if job.kind in JobKind.data_kinds():
        out["resultsUrl"] = reverse("api:job-results", args=[job.pk])
    return out


class TableCreatedSerializer(TableSerializer):
    syncJob = serializers.SerializerMethodField()

    class Meta(TableSerializer.Meta):
        fields = [*TableSerializer.Meta.fields, "syncJob"]
        read_only_fields = fields

    @extend_schema_field(JobSerializer)
    def get_syncJob(self, table: Table) -> dict[str, Any]:
        return JobSerializer(self.context["job"]).data


# --- history -------------------------------------------------------------------------


def _history_field(c: Column) -> serializers.Field:
    """The API field of a declared history column (DESCRIBE HISTORY's name, null when absent)."""
    source = None if c.field == c.name else c.field
    if c.kind == "text":
        return BlankAsNullCharField(source=source)
    field = {"json": serializers.JSONField, "int": serializers.IntegerField, "bool": serializers.BooleanField}[c.kind]
    return field(source=source, read_only=True, allow_null=True)


# DESCRIBE HISTORY's commitInfo columns, from their one declaration (tables.delta.history.columns)
_HistoryColumns = serializers.SerializerMetaclass(
    "_HistoryColumns",
    (serializers.ModelSerializer,),
    {"__module__": __name__, **{c.name: _history_field(c) for c in HISTORY_COLUMNS}},
)


class CommitSerializer(_HistoryColumns):
    """One history row, with DESCRIBE HISTORY's column names."""

    timestamp = serializers.IntegerField(
        read_only=True, allow_null=True, help_text="effective commit timestamp (ms since the epoch)"
    )
    timestampSource = serializers.CharField(
        source="timestamp_source", read_only=True, help_text="'ict' (inCommitTimestamp) or 'file' (file time)"
    )
    inCommitTimestamp = serializers.IntegerField(source="in_commit_timestamp", read_only=True, allow_null=True)
    fileModificationTime = serializers.IntegerField(source="file_modification_time", read_only=True)
    numFiles = serializers.IntegerField(
        source="num_files", read_only=True, allow_null=True, help_text="active files after the commit"
    )
    sizeBytes = serializers.IntegerField(
        source="size_bytes", read_only=True, allow_null=True, help_text="bytes of active files after the commit"
    )

    logExpired = serializers.BooleanField(
        source="log_expired", read_only=True, help_text="log cleanup deleted the commit file; this row is the record"
    )

    class Meta:
        model = Commit
        # DESCRIBE HISTORY's columns, in its order, around the timestamp and growth fields
        fields = [
            "version",
            "timestamp",
            "timestampSource",
            "inCommitTimestamp",
            "fileModificationTime",
            *HISTORY_FIELDS,
            "numFiles",
            "sizeBytes",
            "logExpired",
        ]
        read_only_fields = fields


class HistoryQuerySerializer(serializers.Serializer):
    operation = serializers.CharField(
        required=False,
        min_length=1,
        max_length=200,
        help_text="Only commits whose operation contains this (case-insensitive): WRI finds WRITE.",
    )
    version_min = serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_VERSION, help_text="Lowest version (inclusive)."
    )
    version_max = serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_VERSION, help_text="Highest version (inclusive)."
    )
    since = serializers.CharField(
        required=False,
        min_length=1,
        help_text="Commits at or after this time: ISO-8601, yyyy-MM-dd HH:mm:ss[.SSS] or epoch ms (UTC when no "
        "zone). A date alone (yyyy-MM-dd) means from the start of that UTC day.",
    )
    until = serializers.CharField(
        required=False,
        min_length=1,
        help_text="Commits at or before this time (formats as 'since'). A date alone (yyyy-MM-dd) means to the "
        "end of that UTC day, inclusive.",
    )
    user = serializers.CharField(
        required=False,
        min_length=1,
        max_length=200,
        help_text="Only commits whose userName or userId contains this (case-insensitive).",
    )
    params = serializers.CharField(
        required=False,
        min_length=1,
        max_length=200,
        help_text="Only commits whose operationParameters (keys and values, as JSON text) contain this "
        "(case-insensitive): a predicate's column, a mode.",
    )
    metric = serializers.CharField(
        required=False,
        min_length=1,
        max_length=100,
        help_text="An operationMetrics key (numOutputRows, executionTimeMs, ...): only commits that have it as a "
        "number, within metric_min and metric_max when given.",
    )
    metric_min = serializers.FloatField(
        required=False, min_value=-1e18, max_value=1e18, help_text="The metric's lowest value (inclusive)."
    )
    metric_max = serializers.FloatField(
        required=False, min_value=-1e18, max_value=1e18, help_text="The metric's highest value (inclusive)."
    )


# --- versions ------------------------------------------------------------------------


class ProtocolSerializer(serializers.Serializer):
    minReaderVersion = serializers.IntegerField()
    minWriterVersion = serializers.IntegerField()
    readerFeatures = serializers.ListField(child=serializers.CharField(), required=False)
    writerFeatures = serializers.ListField(child=serializers.CharField(), required=False)


class MetadataSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField(allow_null=True)
    description = serializers.CharField(allow_null=True)
    schema = serializers.JSONField(help_text="The table schema (Delta's struct type as JSON).")
    partitionColumns = serializers.ListField(child=serializers.CharField())
    configuration = serializers.DictField(child=serializers.CharField())
    createdTime = serializers.IntegerField(allow_null=True)


class ChecksumMismatchSerializer(serializers.Serializer):
    field = serializers.CharField(help_text="e.g. numFiles, metadata.schemaString, setTransactions[appId]")
    expected = serializers.JSONField(allow_null=True, help_text="the checksum file's value (bounded)")
    found = serializers.JSONField(allow_null=True, help_text="the log replay's value (bounded)")


class ChecksumStateSerializer(serializers.Serializer):
    state = serializers.ChoiceField(
        ["ok", "mismatch", "unreadable", "none"],
        help_text="the version's checksum file (_delta_log/N.crc) against the log; none: no checksum file checked",
    )
    mismatches = ChecksumMismatchSerializer(many=True)
    error = serializers.CharField(allow_null=True, help_text="why the checksum file could not be decoded")
    full = serializers.BooleanField(allow_null=True, help_text="every field compared (false: the counts only)")
    checkedAt = serializers.DateTimeField(allow_null=True)


class VersionSummarySerializer(serializers.Serializer):
    version = serializers.IntegerField()
    protocol = ProtocolSerializer()
    metadata = MetadataSerializer()
    numFiles = serializers.IntegerField()
    sizeBytes = serializers.IntegerField()
    setTransactions = serializers.ListField(child=serializers.DictField())
    domainMetadata = serializers.ListField(child=serializers.DictField())
    commitInfo = serializers.JSONField(allow_null=True, help_text="The version's commitInfo (from the cache)")
    timestamp = serializers.IntegerField(allow_null=True, help_text="commit timestamp, ms (null before a sync)")
    timestampSource = serializers.CharField(allow_null=True)
    summaryFrom = serializers.ChoiceField(
        ["replay", "checksum", "pin"],
        help_text="replay: the log replayed to the version; checksum: its checksum file, found to agree with the "
        "log; pin: the table lost the version (files vacuumed, log cleaned up) and the pin in readFrom keeps it",
    )
    readFrom = serializers.DictField(
        allow_null=True,
        help_text='{"pin": id, "name": name}: the pin the version (its files too) is read from; null: the table',
    )
    checksum = ChecksumStateSerializer()


class DeletionVectorSerializer(serializers.Serializer):
    storageType = serializers.CharField()
    pathOrInlineDv = serializers.CharField()
    offset = serializers.IntegerField(allow_null=True)
    sizeInBytes = serializers.IntegerField()
    cardinality = serializers.IntegerField()
    uniqueId = serializers.CharField()


class FileSerializer(serializers.Serializer):
    path = serializers.CharField(help_text="relative to the table root, URL-decoded")
    size = serializers.IntegerField()
    partitionValues = serializers.DictField(child=serializers.CharField(allow_null=True), allow_null=True)
    modificationTime = serializers.IntegerField()
    deletionVector = DeletionVectorSerializer(allow_null=True)


# --- resolve -------------------------------------------------------------------------


class ResolveQuerySerializer(serializers.Serializer):
    # no maxLength: the parser refuses a long one itself, as invalid_timestamp like any bad time
    timestamp = serializers.CharField(
        min_length=1,
        help_text="The time to resolve: ISO-8601, yyyy-MM-dd[ HH:mm:ss[.SSS]] or epoch ms (UTC when no zone).",
    )
    allow_latest = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Answer the latest version for a time after the latest commit (as RESTORE does).",
    )
    allow_earliest = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Answer the earliest available version for a time before it (Delta's canReturnEarliestCommit).",
    )


class AlternativesSerializer(serializers.Serializer):
    commitInfoTimestamp = serializers.IntegerField(allow_null=True)
    fileModificationTime = serializers.IntegerField(allow_null=True)


class ResolveSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    commitTimestamp = serializers.IntegerField(allow_null=True)
    commitTimestampIso = serializers.CharField(allow_null=True)
    source = serializers.CharField(help_text="'ict' or 'file'")
    searchRange = serializers.ListField(child=serializers.IntegerField(), help_text="[lo, hi) versions searched")
    rule = serializers.CharField(help_text="How the answer was found, in words.")
    requestedTimestamp = serializers.IntegerField()
    alternatives = AlternativesSerializer(
        help_text="What a reader using only commitInfo.timestamp or only file times would answer."
    )
    reachability = VersionReachabilitySerializer(
        allow_null=True, help_text="Whether the version can still be read or restored (as /reachability/)."
    )


# --- timeline ------------------------------------------------------------------------


class TimelineVersionSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    fileModificationTime = serializers.IntegerField()
    commitInfoTimestamp = serializers.IntegerField(allow_null=True)
    inCommitTimestamp = serializers.IntegerField(allow_null=True)
    timestamp = serializers.IntegerField(allow_null=True)
    source = serializers.CharField(help_text="'ict' or 'file'")
    adjusted = serializers.BooleanField(help_text="the file time was monotonized")


class AnomalySerializer(serializers.ModelSerializer):
    class Meta:
        model = Anomaly
        fields = ["version", "kind", "detail"]


class TimelineSerializer(serializers.Serializer):
    ict = IctSerializer()
    versions = TimelineVersionSerializer(many=True)
    anomalies = AnomalySerializer(many=True)


# --- diff ----------------------------------------------------------------------------


class RangeQuerySerializer(serializers.Serializer):
    """Two versions in the query: `from` and `to` (the metadata diff, change data, a row diff,
    the schema's diff)."""

    to = serializers.IntegerField(min_value=0, max_value=MAX_VERSION, help_text="The later version.")


_add_field(
    RangeQuerySerializer,
    "from",
    serializers.IntegerField(min_value=0, max_value=MAX_VERSION, help_text="The earlier version."),
    before="to",
)


class DiffQuerySerializer(RangeQuerySerializer):
    sample = serializers.IntegerField(
        required=False,
        default=50,
        min_value=0,
        max_value=1000,
        help_text="How many added/removed files to list (sample and sampleFiles).",
    )


class FromToIntSerializer(serializers.Serializer):
    to = serializers.IntegerField()


_add_field(FromToIntSerializer, "from", serializers.IntegerField(), before="to")


class FromToListSerializer(serializers.Serializer):
    to = serializers.ListField(child=serializers.CharField())


_add_field(FromToListSerializer, "from", serializers.ListField(child=serializers.CharField()), before="to")


class ChangeSerializer(serializers.Serializer):
    key = serializers.CharField()
    change = serializers.ChoiceField(choices=["added", "removed", "changed"])
    to = serializers.JSONField(allow_null=True)


_add_field(ChangeSerializer, "from", serializers.JSONField(allow_null=True), before="to")


class SchemaChangeSerializer(serializers.Serializer):
    column = serializers.CharField()
    change = serializers.ChoiceField(choices=["added", "removed", "changed"])
    to = serializers.JSONField(allow_null=True)


_add_field(SchemaChangeSerializer, "from", serializers.JSONField(allow_null=True), before="to")


class DiffFileSerializer(serializers.Serializer):
    path = serializers.CharField()
    size = serializers.IntegerField()
    partitionValues = serializers.DictField(child=serializers.CharField(allow_null=True))
    numRecords = serializers.IntegerField(allow_null=True, help_text="from the add's stats; null without stats")


class FilesChangeSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    bytes = serializers.IntegerField()
    partitions = serializers.ListField(child=serializers.DictField(), help_text="at most 200")
    partitionCount = serializers.IntegerField()
    sampleFrom = serializers.IntegerField(help_text="the index of the first listed file (0: the list's start)")
    sample = serializers.ListField(child=serializers.CharField(), help_text="the first `sample` paths")
    sampleFiles = DiffFileSerializer(many=True, help_text="the same files with size, partitions and row count")


class DiffCommitSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    timestamp = serializers.IntegerField(allow_null=True)
    timestampSource = serializers.CharField()
    operation = serializers.CharField()
    userName = serializers.CharField()
    operationMetrics = serializers.JSONField(allow_null=True)


class DiffSerializer(serializers.Serializer):
    to = serializers.IntegerField()
    schema = SchemaChangeSerializer(many=True)
    partitionColumns = FromToListSerializer()
    properties = ChangeSerializer(many=True)
    protocol = ChangeSerializer(many=True)
    filesAdded = FilesChangeSerializer()
    filesRemoved = FilesChangeSerializer()
    numFiles = FromToIntSerializer()
    sizeBytes = FromToIntSerializer()
    commits = DiffCommitSerializer(many=True, help_text="commits after 'from' up to 'to' (at most 500)")


_add_field(DiffSerializer, "from", serializers.IntegerField(), before="to")


# --- the token endpoint ----------------------------------------------------------------


class TokenRequestSerializer(serializers.Serializer):
    username = serializers.CharField(min_length=1, max_length=150)
    password = serializers.CharField(min_length=1, max_length=4096, style={"input_type": "password"})


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="Send as 'Authorization: Token <token>'.")


# --- errors --------------------------------------------------------------------------


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="stable machine name, e.g. not_found, invalid, version_not_found")
    message = serializers.CharField(help_text="what went wrong, in words that can be shown as is")


_add_field(
    ErrorDetailSerializer,
    "fields",
    serializers.DictField(required=False, help_text="per-field messages (validation errors only)"),
    before="",
)
ErrorDetailSerializer._declared_fields["files"] = serializers.ListField(
    child=serializers.CharField(), required=False, help_text="missing files, up to 100 (restore_missing_files only)"
)
ErrorDetailSerializer._declared_fields["missingCount"] = serializers.IntegerField(
    required=False, help_text="how many files are missing (restore_missing_files only)"
)


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()
