"""API shapes of restore requests: the request body, decisions, events, a request with its
plan and its query parameters."""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from tables.api.serializers import BlankAsNullCharField, StrictCharField, without_staff_detail
from tables.models import RecoveredObject, RestoreEvent, RestoreRequest, RestoreStatus
from tables.services.catalog.lookup import INT64_MAX as MAX_VERSION

# --- restores ------------------------------------------------------------------------


class RestoreCreateSerializer(serializers.Serializer):
    version = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=MAX_VERSION, help_text="The version to restore."
    )
    timestamp = StrictCharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=64,
        help_text="Or the time to restore to (the latest version at or before it): ISO-8601, "
        "yyyy-MM-dd[ HH:mm:ss[.SSS]] or epoch ms (UTC when no zone). Give a version or a timestamp.",
    )
    reason = StrictCharField(min_length=1, max_length=5000, help_text="Why; the approver reads it.")
    ignoreMissingFiles = serializers.BooleanField(
        required=False, default=False, help_text="Restore without the files of the version that are gone."
    )
    allowProtocolDowngrade = serializers.BooleanField(
        required=False, default=False, help_text="Write the target's lower protocol instead of keeping the latest."
    )
    where = StrictCharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=5000,
        help_text="Restore only the partitions this predicate on partition columns selects (=, !=, <, <=, >, >=, "
        "IN, IS NULL, AND, OR, NOT), e.g. \"day = '2024-05-01' AND region IN ('eu', 'us')\". Blank: the whole table.",
    )
    recoverFilesFirst = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Before the restore, copy the version's gone objects (data, deletion-vector and log files) back "
        "from the noncurrent versions of the table's versioned bucket (never over a current object). Needs the "
        "version (not a timestamp) and a version the reachability answer marks recoverable: 422 store_not_versioned, "
        "400 version_not_recoverable.",
    )


class RestoreDecisionSerializer(serializers.Serializer):
    comment = StrictCharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=5000,
        help_text="Shown to the requester; required to reject.",
    )
    fingerprint = serializers.RegexField(
        r"^[0-9a-f]{64}$",
        required=False,
        help_text="The plan's fingerprint as you reviewed it; the approval fails (409 plan_changed) if the plan "
        "changed since.",
    )


class RestoreRejectSerializer(serializers.Serializer):
    """A rejection: the comment saying why is required."""

    # documents the body only: the view parses it as a decision, so that a missing or blank
    # comment gets the service's own error (400 invalid_comment)

    comment = StrictCharField(
        max_length=5000,
        # one pattern (a schema holds one): something besides spaces, and no NUL (DRF refuses it)
        validators=[RegexValidator(r"^[^\x00]*\S[^\x00]*$", "Give a comment saying why the restore is rejected.")],
        help_text="Shown to the requester: why the restore is rejected.",
    )


class RestoreEventSerializer(serializers.ModelSerializer):
    actor = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True, help_text="null: the worker"
    )
    fromStatus = serializers.CharField(source="from_status", read_only=True)
    toStatus = serializers.CharField(source="to_status", read_only=True)

    class Meta:
        model = RestoreEvent
        fields = ["at", "actor", "fromStatus", "toStatus", "note"]
        read_only_fields = fields


class RecoveredObjectSerializer(serializers.ModelSerializer):
    """One object a recovery copied back (the audit)."""

    sourceVersionId = serializers.CharField(source="source_version_id", read_only=True)
    sourceEtag = serializers.CharField(source="source_etag", read_only=True)
    versionId = serializers.CharField(source="version_id", read_only=True, help_text="the current version after it")
    checkedBy = serializers.CharField(source="checked_by", read_only=True)
    startedAt = serializers.DateTimeField(source="started_at", read_only=True)
    finishedAt = serializers.DateTimeField(source="finished_at", read_only=True, allow_null=True)

    class Meta:
        model = RecoveredObject
        fields = [
            "path",
            "sourceVersionId",
            "sourceEtag",
            "size",
            "outcome",
            "versionId",
            "etag",
            "sha256",
            "checkedBy",
            "error",
            "startedAt",
            "finishedAt",
        ]
        read_only_fields = fields


class RestoreSummarySerializer(serializers.ModelSerializer):
    """A restore request without its plan and events (lists)."""

    table = serializers.PrimaryKeyRelatedField(read_only=True)
    tableName = serializers.CharField(source="table.name", read_only=True)
    status = serializers.ChoiceField(choices=RestoreStatus.choices, read_only=True)
    statusLabel = serializers.CharField(source="get_status_display", read_only=True)
    isTerminal = serializers.BooleanField(source="is_terminal", read_only=True)
    awaitingApproval = serializers.BooleanField(source="awaiting_approval", read_only=True)
    targetVersion = serializers.IntegerField(
        source="target_version", read_only=True, allow_null=True, help_text="as requested"
    )
    targetTimestamp = BlankAsNullCharField(source="target_timestamp", help_text="as requested")
    resolvedVersion = serializers.IntegerField(
        source="resolved_version", read_only=True, allow_null=True, help_text="the version restored to"
    )
    resolutionRule = serializers.CharField(source="resolution_rule", read_only=True)
    ignoreMissingFiles = serializers.BooleanField(source="ignore_missing_files", read_only=True)
    allowProtocolDowngrade = serializers.BooleanField(source="allow_protocol_downgrade", read_only=True)
    recoverFilesFirst = serializers.BooleanField(source="recover_files_first", read_only=True)
    requestedBy = serializers.SlugRelatedField(
        source="requested_by", slug_field="username", read_only=True, allow_null=True, help_text="null: user removed"
    )
    approver = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    approverComment = serializers.CharField(source="approver_comment", read_only=True)
    planHeadVersion = serializers.IntegerField(
        source="plan_head_version", read_only=True, allow_null=True, help_text="the head the plan was made on"
    )
    planFingerprint = serializers.CharField(source="plan_fingerprint", read_only=True)
    resultVersion = serializers.IntegerField(
        source="result_version", read_only=True, allow_null=True, help_text="the RESTORE commit's version"
    )
    txnId = serializers.UUIDField(
        source="txn_id", read_only=True, help_text="the RESTORE commit's commitInfo.txnId (look the commit up by it)"
    )
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)
    decidedAt = serializers.DateTimeField(source="decided_at", read_only=True, allow_null=True)
    startedAt = serializers.DateTimeField(source="started_at", read_only=True, allow_null=True)
    finishedAt = serializers.DateTimeField(source="finished_at", read_only=True, allow_null=True)

    class Meta:
        model = RestoreRequest
        fields = [
            "id",
            "table",
            "tableName",
            "status",
            "statusLabel",
            "isTerminal",
            "awaitingApproval",
            "targetVersion",
            "targetTimestamp",
            "resolvedVersion",
            "resolutionRule",
            "reason",
            "ignoreMissingFiles",
            "allowProtocolDowngrade",
            "recoverFilesFirst",
            "requestedBy",
            "approver",
            "approverComment",
            "planHeadVersion",
            "planFingerprint",
            "stage",
            "done",
            "total",
            "attempts",
            "resultVersion",
            "txnId",
            "error",
            "createdAt",
            "decidedAt",
            "startedAt",
            "finishedAt",
        ]
        read_only_fields = fields


class RestoreRequestSerializer(RestoreSummarySerializer):
    """A restore request with its plan, what the run did and the audit trail."""

    plan = serializers.JSONField(
        read_only=True,
        allow_null=True,
        help_text="The dry-run plan (RestorePlan.to_dict without the file actions): targetVersion, readVersion, "
        "metrics (operationMetrics as Delta Lake writes them), numFilesToAdd, numFilesToRemove, protocol, "
        "protocolOutcome, metadata, domainMetadata, missingFiles, notes, fingerprint; sample (up to 50 files to "
        "add and to remove), compare (head, target and after side by side: files, bytes, protocol; schema, "
        "properties and protocol changes) and the dataChange warning; with recoverFilesFirst, recovery (count, bytes, "
        "logFiles, a sample of the objects to copy back with their noncurrent version ids, notes); for a version "
        "read from a pin (VACUUM took files of it), pin (id, name, version) and fromPin (count and bytes of the "
        "files the run copies back from the pin store before the commit, a sample of up to 50: path, size, kind "
        "data or dv).",
    )
    verification = serializers.JSONField(
        read_only=True,
        allow_null=True,
        help_text="verified; commit (the new version read back against the plan); target (its files against "
        "the target version's).",
    )
    result = serializers.JSONField(
        read_only=True,
        allow_null=True,
        help_text="What the run reported: version, readVersion, rebasedOver, metrics, txnId, alreadyCommitted, "
        "syncJob, fromPin (files, copied, present, bytes, placed: how each got there); or missingFiles / "
        "competingVersions.",
    )
    events = RestoreEventSerializer(many=True, read_only=True)
    recoveredObjects = RecoveredObjectSerializer(
        source="recovered_objects",
        many=True,
        read_only=True,
        help_text="With recoverFilesFirst: every object the request copies back (outcome planned with the request, "
        "then copying, copied, present or failed), from which noncurrent version, to which new version, and how the "
        "copy was checked: the audit.",
    )

    class Meta(RestoreSummarySerializer.Meta):
        fields = [*RestoreSummarySerializer.Meta.fields, "plan", "verification", "result", "events", "recoveredObjects"]
        read_only_fields = fields

    def to_representation(self, instance: RestoreRequest) -> dict[str, Any]:
        return without_staff_detail(self, super().to_representation(instance))


_STATE = "(" + "|".join(RestoreStatus.values) + ")"


@extend_schema_field({"type": "string", "pattern": f"^ *{_STATE} *(, *{_STATE} *)*,? *$"})
class _StatesField(serializers.CharField):
    """Comma-separated restore states; the schema says which (the view explains a bad one)."""


class RestoreQuerySerializer(serializers.Serializer):
    status = _StatesField(
        required=False, help_text="Only requests in these states (comma-separated), e.g. pending,stale."
    )

    def validate_status(self, value: str) -> list[str]:
        wanted = [v.strip() for v in value.split(",") if v.strip()]
        bad = [v for v in wanted if v not in RestoreStatus.values]
        if bad:
            raise serializers.ValidationError(
                f"unknown state {', '.join(bad)[:100]}; states are {', '.join(RestoreStatus.values)}."
            )
        return wanted
