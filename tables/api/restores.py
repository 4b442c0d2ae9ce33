"""Restore requests: the request body, decisions, events, a request with its plan, and their
endpoints (a table's requests and requesting one, under TableViewSet; every table's requests,
one request, approving, rejecting and withdrawing it, under RestoreViewSet)."""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from tables.api.base.common import TABLE_ID, Pagination, _errors
from tables.api.base.fields import BlankAsNullCharField, StrictCharField, without_staff_detail
from tables.api.base.params import validated_query
from tables.api.base.permissions import CanApprove, CanBrowse
from tables.models import RecoveredObject, RestoreEvent, RestoreRequest, RestoreStatus
from tables.services.catalog.lookup import INT64_MAX as MAX_VERSION
from tables.services.restores.requests import approve_restore, reject_restore, request_restore, withdraw_restore

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


def _restore_location(request, req: RestoreRequest) -> str:
    return request.build_absolute_uri(reverse("api:restore-detail", args=[req.pk]))


RESTORES = RestoreRequest.objects.select_related("table", "requested_by", "approver")


class RestoreActions:
    """TableViewSet's restores action: a table's requests, and requesting one."""

    @extend_schema(
        methods=["GET"],
        summary="The table's restore requests, newest first (paged with limit/offset)",
        parameters=[TABLE_ID, RestoreQuerySerializer],
        responses={200: RestoreSummarySerializer(many=True), **_errors(400, 401, 403, 404)},
    )
    @extend_schema(
        methods=["POST"],
        summary="Request a restore: dry-run plan now, commit after an approver approves",
        parameters=[TABLE_ID],
        request=RestoreCreateSerializer,
        responses={
            201: OpenApiResponse(RestoreRequestSerializer, description="The pending request with its plan"),
            **_errors(400, 401, 403, 404, 422),
        },
    )
    @action(detail=True, methods=["get", "post"])
    def restores(self, request, id=None):
        """GET lists the table's restore requests (?status=pending,stale filters). POST plans a RESTORE
        TO VERSION (or TIMESTAMP, latest version at or before it) on the latest version and saves a
        pending request with the plan: files to add and remove with counts and bytes, operationMetrics,
        the protocol outcome and the side-by-side comparison. Needs the analyst or approver role (or
        staff); another approver must approve it. Refusals save nothing: 400 invalid_target,
        invalid_reason, invalid_timestamp, timestamp_out_of_range, restore_invalid (e.g. the version
        is not lower than the latest), restore_missing_files (with `files`, up to 100; set
        ignoreMissingFiles to restore without them); 422 when the log cannot be read. With
        recoverFilesFirst, the version's gone objects are copied back from the bucket's noncurrent
        versions before the restore runs (the plan is made on the table as it will be then): 422
        store_not_versioned, 400 version_not_recoverable."""
        table = self.get_object()
        if request.method == "GET":
            q = validated_query(RestoreQuerySerializer, request)
            rows = RESTORES.filter(table=table)
            if q.get("status"):
                rows = rows.filter(status__in=q["status"])
            page = self.paginate_queryset(rows.defer("plan", "verification", "result"))
            return self.get_paginated_response(RestoreSummarySerializer(page, many=True).data)
        ser = RestoreCreateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        data = ser.validated_data
        req = request_restore(
            table,
            request.user,
            reason=data["reason"],
            version=data.get("version"),
            timestamp=data.get("timestamp"),
            ignore_missing_files=data["ignoreMissingFiles"],
            allow_protocol_downgrade=data["allowProtocolDowngrade"],
            where=data.get("where"),
            recover_files_first=data["recoverFilesFirst"],
        )
        body = RestoreRequestSerializer(RESTORES.get(pk=req.pk)).data
        return Response(body, status=status.HTTP_201_CREATED, headers={"Location": _restore_location(request, req)})


@extend_schema_view(
    list=extend_schema(
        summary="Restore requests of every table, newest first (paged with limit/offset)",
        parameters=[RestoreQuerySerializer],
        responses={200: RestoreSummarySerializer(many=True), **_errors(400, 401, 403)},
    ),
    retrieve=extend_schema(
        summary="A restore request: status, plan, progress (stage, done/total), result, error, events",
        responses={200: RestoreRequestSerializer, **_errors(401, 403, 404)},
    ),
)
class RestoreViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Restore requests: poll one until isTerminal (or awaitingApproval, when it went stale)."""

    queryset = RESTORES
    serializer_class = RestoreRequestSerializer
    pagination_class = Pagination
    lookup_value_regex = "[0-9]{1,18}"

    def get_permissions(self):
        if self.action in ("approve", "reject"):
            return [IsAuthenticated(), CanApprove()]
        return [IsAuthenticated(), CanBrowse()]

    def list(self, request):
        q = validated_query(RestoreQuerySerializer, request)
        rows = self.get_queryset()
        if q.get("status"):
            rows = rows.filter(status__in=q["status"])
        page = self.paginate_queryset(rows.defer("plan", "verification", "result"))
        return self.get_paginated_response(RestoreSummarySerializer(page, many=True).data)

    def _decision(self) -> dict[str, Any]:
        ser = RestoreDecisionSerializer(data=self.request.data)
        ser.is_valid(raise_exception=True)
        return ser.validated_data

    @extend_schema(
        summary="Approve the plan: the restore is queued for a worker",
        request=RestoreDecisionSerializer,
        responses={
            202: OpenApiResponse(RestoreRequestSerializer, description="Approved and queued"),
            **_errors(400, 401, 403, 404, 409),
        },
    )
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        """Approvers (or staff) only, and never the requester (403 own_request). Only pending or stale
        requests (409 invalid_state); with `fingerprint`, only if the plan is still that one (409
        plan_changed); not while another restore of the table is approved, queued or running (409
        restore_in_flight, naming it). The run re-plans on the current head: it commits the approved change (also on top
        of appends made meanwhile), or goes back to stale with a new plan."""
        data = self._decision()
        req = approve_restore(self.get_object(), request.user, data["comment"], data.get("fingerprint"))
        body = RestoreRequestSerializer(RESTORES.get(pk=req.pk)).data
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": _restore_location(request, req)})

    @extend_schema(
        summary="Reject the request (a comment saying why is required)",
        request=RestoreRejectSerializer,
        responses={200: RestoreRequestSerializer, **_errors(400, 401, 403, 404, 409)},
    )
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        """Approvers (or staff) only, never the requester; only pending or stale requests."""
        data = self._decision()
        req = reject_restore(self.get_object(), request.user, data["comment"])
        return Response(RestoreRequestSerializer(RESTORES.get(pk=req.pk)).data)

    @extend_schema(
        summary="Withdraw your own request (pending or stale); it can no longer be approved",
        request=RestoreDecisionSerializer,
        responses={200: RestoreRequestSerializer, **_errors(400, 401, 403, 404, 409)},
    )
    @action(detail=True, methods=["post"])
    def withdraw(self, request, pk=None):
        """The requester (or staff) only (403 otherwise); only pending or stale requests (409
        invalid_state). The comment, optional, goes into the audit trail."""
        data = self._decision()
        req = withdraw_restore(self.get_object(), request.user, data["comment"])
        return Response(RestoreRequestSerializer(RESTORES.get(pk=req.pk)).data)
