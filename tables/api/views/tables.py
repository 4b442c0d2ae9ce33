"""REST API views: each checks permissions (tables.services.access.roles) and calls one service function.

Reads of history, the timeline and jobs come from the database cache (Commit, Anomaly, Job
rows, through tables.services.history.query for the history); reads of a version's state, resolve and diff
go through tables.services.versions.read. No view parses a log. Errors are rendered by tables.api.errors.exception_handler.
"""

from __future__ import annotations

from typing import Any

from django.core.cache import cache
from django.db import transaction
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from tables.api import restore_serializers as rs
from tables.api import serializers as s
from tables.api import shapes
from tables.api.common import (
    TABLE_ID,
    VERSION,
    Pagination,
    _errors,
    job_location,
    retry_later,
    table_or_404,
    version_param,
)
from tables.api.params import validated_query
from tables.api.permissions import CanApprove, CanBrowse, CanDeleteTable, CanRegister, CanRequestRestore
from tables.models import Anomaly, Commit, Job, RestoreRequest, Table
from tables.services.catalog.registration import delete_table, register_table
from tables.services.errors import ServiceError
from tables.services.history import export as history_export
from tables.services.history.query import CACHE_SECONDS, HistoryFilter, history, synced_key, time_range
from tables.services.jobs import lifecycle as jobs
from tables.services.pins.queries import pins_by_version
from tables.services.restores.requests import approve_restore, reject_restore, request_restore, withdraw_restore
from tables.services.sync.store import start_sync
from tables.services.versions import read as versions
from tables.services.versions.pinned import with_pins
from tables.services.versions.reachability import FORECAST_LISTED, parse_retention, table_reachability


def _history_filter(request) -> HistoryFilter:
    """The history filters of a request (400 for a bad one), for the history and its export."""
    q = validated_query(s.HistoryQuerySerializer, request)
    # a date alone is its whole UTC day, a date-time the instant (as the page's filter)
    since, until = time_range(q.get("since"), q.get("until"))
    return HistoryFilter(
        operation=q.get("operation"),
        version_min=q.get("version_min"),
        version_max=q.get("version_max"),
        since=since,
        until=until,
        user=q.get("user"),
        params=q.get("params"),
        metric=q.get("metric"),
        metric_min=q.get("metric_min"),
        metric_max=q.get("metric_max"),
    ).check()


READ_ERRORS = (400, 401, 403, 404, 422)
VACUUM_RETENTION = OpenApiParameter(
    "vacuumRetention",
    str,
    OpenApiParameter.QUERY,
    required=False,
    description='Forecast a VACUUM run now with this retention ("7 days", "interval 1 week", "24 hours"): '
    "adds vacuumForecast with the readable versions it would make unreadable. 400 invalid when unreadable.",
)
# limit/offset of actions that page (list actions get them from Pagination's schema)
PAGE_PARAMS = [
    OpenApiParameter(p["name"], p["schema"], OpenApiParameter.QUERY, description=p["description"])
    for p in Pagination().get_schema_operation_parameters(None)
]


def _restore_location(request, req: RestoreRequest) -> str:
    return request.build_absolute_uri(reverse("api:restore-detail", args=[req.pk]))


RESTORES = RestoreRequest.objects.select_related("table", "requested_by", "approver")


@extend_schema_view(
    list=extend_schema(
        summary="List registered tables",
        responses={200: s.TableSerializer(many=True), **_errors(400, 401, 403)},
    ),
)
class TableViewSet(viewsets.GenericViewSet):
    """Registered Delta tables, their cached history and their versions."""

    queryset = Table.objects.select_related("created_by")
    serializer_class = s.TableSerializer
    pagination_class = Pagination
    lookup_url_kwarg = "id"
    lookup_value_regex = "[^/]+"

    def get_permissions(self):
        if self.action in ("create", "sync"):
            return [IsAuthenticated(), CanRegister()]
        if self.action == "restores" and self.request is not None and self.request.method == "POST":
            return [IsAuthenticated(), CanRequestRestore()]
        if self.action == "destroy":
            return [IsAuthenticated(), CanDeleteTable()]
        return [IsAuthenticated(), CanBrowse()]

    def get_object(self) -> Table:
        key = str(self.kwargs[self.lookup_url_kwarg])
        table = table_or_404(key)  # the table alone: its creator loads if an answer shows it
        self.check_object_permissions(self.request, table)
        return table

    # --- the collection and one table -------------------------------------------------

    def list(self, request):
        """Registered tables by name, with their sync state and latest size (paged with limit/offset)."""
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(s.TableSerializer(page, many=True).data)

    @extend_schema(
        summary="Register a table and start its first sync",
        request=s.TableCreateSerializer,
        responses={
            201: OpenApiResponse(s.TableCreatedSerializer, description="The table, with the queued sync job"),
            **_errors(400, 401, 403, 409),
        },
    )
    def create(self, request):
        """Validate the location (under DELTAWEB_ALLOWED_ROOTS, a readable Delta table), register it and
        queue its first sync. Needs the analyst or approver role (or staff). Errors: 400
        invalid / invalid_name / invalid_location / not_a_delta_table, 403 location_not_allowed or
        permission_denied, 409 duplicate (the name) or duplicate_location (the location, however
        spelled, is registered already: `table` names that table and its page)."""
        ser = s.TableCreateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        data = ser.validated_data
        with transaction.atomic():
            table = register_table(data["name"], data["location"], data["description"], user=request.user)
            job = start_sync(table, user=request.user)
        table.refresh_from_db()
        job.refresh_from_db()  # as sending it left it: failed with the reason if the task queue was down
        body = s.TableCreatedSerializer(table, context={"job": job, "request": request}).data
        location = request.build_absolute_uri(reverse("api:table-detail", args=[table.pk]))
        return Response(body, status=status.HTTP_201_CREATED, headers={"Location": location})

    @extend_schema(
        summary="One table", parameters=[TABLE_ID], responses={200: s.TableSerializer, **_errors(401, 403, 404)}
    )
    def retrieve(self, request, id=None):
        """One table: location, sync state, ICT configuration and size, as the latest sync saw them."""
        return Response(s.TableSerializer(self.get_object()).data)

    @extend_schema(
        summary="Unregister a table (staff only); its cached history goes with it, the files stay",
        parameters=[TABLE_ID],
        responses={204: None, **_errors(401, 403, 404)},
    )
    def destroy(self, request, id=None):
        """Remove the table and its cached rows from deltaweb; nothing in the table's storage is touched."""
        delete_table(self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="Start a sync of the table's history",
        parameters=[TABLE_ID],
        request=None,
        responses={202: OpenApiResponse(s.JobSerializer, description="The queued job"), **_errors(401, 403, 404, 503)},
    )
    @action(detail=True, methods=["post"])
    def sync(self, request, id=None):
        """Queue a sync (incremental replay of new commits into the cache); poll /api/jobs/{id}/.
        503 broker_unavailable with Retry-After when the task queue does not take it (the job
        named by `job` is ended with the reason; nothing is left queued)."""
        table = self.get_object()
        with transaction.atomic():
            job = start_sync(table, user=request.user)
        try:
            job = jobs.check_sent(job, "sync")  # sent when the transaction committed, just now
        except ServiceError as exc:
            return retry_later(exc)
        return Response(
            s.JobSerializer(job).data,
            status=status.HTTP_202_ACCEPTED,
            headers={"Location": job_location(request, job)},
        )

    # --- history and timeline (from the cache) ------------------------------------------

    @extend_schema(
        summary="History (as DESCRIBE HISTORY), newest first, from the synced cache",
        parameters=[TABLE_ID, s.HistoryQuerySerializer],
        responses={200: s.CommitSerializer(many=True), **_errors(*READ_ERRORS)},
    )
    @action(detail=True, methods=["get"])
    def history(self, request, id=None):
        """Cached history rows with DESCRIBE HISTORY's column names, newest first; timestamps are ms since
        the epoch (UTC). Empty until the table has been synced. Filters: operation, user (userName or
        userId), version and time ranges, an operationMetrics key's numeric range (metric, metric_min,
        metric_max) and text in the operationParameters (params). Bad filters answer 400 (invalid,
        invalid_timestamp, invalid_range)."""
        table = self.get_object()
        f = _history_filter(request)
        # the rows change only with a sync: cache each page of each query until the next one
        key = f"api-hist:{synced_key(table)}:{request.get_full_path()}"
        data = cache.get(key)
        if data is None:
            page = self.paginate_queryset(history(table, f))
            data = self.get_paginated_response(s.CommitSerializer(page, many=True).data).data
            cache.set(key, data, CACHE_SECONDS)
        return Response(data)

    @extend_schema(
        summary="The filtered history as a CSV or Parquet file, streamed",
        parameters=[
            TABLE_ID,
            s.HistoryQuerySerializer,
            OpenApiParameter("fmt", str, OpenApiParameter.PATH, enum=["csv", "parquet"], description="File format."),
            OpenApiParameter(
                "sort",
                str,
                enum=[*history_export.SORTS],  # the class defines list()
                description="Order of the rows: version (default -version, newest first), timestamp, operation or "
                "user; a leading '-' for descending.",
            ),
        ],
        responses={
            (200, "text/csv"): OpenApiTypes.BINARY,
            (200, "application/vnd.apache.parquet"): OpenApiTypes.BINARY,
            **_errors(*READ_ERRORS),
        },
    )
    @action(detail=True, methods=["get"], url_path=r"history/(?P<fmt>csv|parquet)")
    def history_export(self, request, id=None, fmt="csv"):
        """Every commit the filters select (the history endpoint's operation, user, version_min, version_max,
        since, until, metric with metric_min/metric_max, params), sorted, with DESCRIBE HISTORY's column
        names, as one CSV or Parquet file streamed from the database (not paged). Timestamps: ISO-8601 UTC in CSV, timestamp[ms, UTC] in Parquet."""
        table = self.get_object()
        qs = history_export.sorted_history(history(table, _history_filter(request)), request.query_params.get("sort"))
        return history_export.export_response(table, qs, fmt)

    @extend_schema(
        summary="Commit-timestamp timeline: every version's timestamps, the ICT boundary, anomalies",
        parameters=[TABLE_ID],
        responses={200: s.TimelineSerializer, **_errors(401, 403, 404)},
    )
    @action(detail=True, methods=["get"])
    def timeline(self, request, id=None):
        """Every cached version's file time, commitInfo timestamp, ICT and effective timestamp (ascending),
        the ICT enablement boundary and the anomalies found by the sync."""
        table = self.get_object()
        names = ("version", "fileModificationTime", "commitInfoTimestamp", "inCommitTimestamp", "timestamp")
        columns = ("version", "file_modification_time", "commit_info_timestamp", "in_commit_timestamp", "timestamp")
        versions = []
        for *values, source, adjusted in (
            Commit.objects.filter(table=table).order_by("version").values_list(*columns, "timestamp_source", "adjusted")
        ):
            versions.append({**dict(zip(names, values, strict=True)), "source": source, "adjusted": adjusted})
        anomalies = list(Anomaly.objects.filter(table=table).values("version", "kind", "detail"))
        return Response({"ict": s.ict_payload(table), "versions": versions, "anomalies": anomalies})

    @extend_schema(
        summary="Which versions can still be read or restored, and why not (newest first, paged)",
        parameters=[TABLE_ID, *PAGE_PARAMS, VACUUM_RETENTION],
        responses={200: shapes.ReachabilityPageSerializer, **_errors(*READ_ERRORS)},
    )
    @action(detail=True, methods=["get"])
    def reachability(self, request, id=None):
        """For every version: readable (log and files present), restorable (readable, or missing only
        files a restore would not add), recoverable (in a versioned bucket: unreadable, and readable
        once the noncurrent versions of its gone objects are back), the reason when not (log_expired, not_reproducible,
        files_missing with the count and the first 100 paths, beyond_retention) and the retention
        windows (delta.logRetentionDuration, delta.deletedFileRetentionDuration; Delta's defaults).
        With `vacuumRetention`, also `vacuumForecast`: the readable versions a VACUUM run now with
        that retention would make unreadable (400 invalid when the retention cannot be read)."""
        table = self.get_object()
        raw = request.query_params.get("vacuumRetention")
        retention = None if raw is None else parse_retention(raw)
        # a version a pin keeps counts as readable, its entry saying which pin it is read from
        data = with_pins(table, table_reachability(table, vacuum_retention=retention))
        page = self.paginate_queryset(data)  # newest first, each page's entries built alone
        body = self.get_paginated_response(page).data
        body.update({k: data.head[k] for k in ("latestVersion", "logRetentionMs", "deletedFileRetentionMs")})
        # the versions pins keep readable through any VACUUM and log cleanup (GET tables/{id}/pins/)
        body["pinnedVersions"] = sorted(pins_by_version(table))
        if retention is not None:
            body["vacuumForecast"] = data.forecast(FORECAST_LISTED)
        return Response(body)

    # --- versions (from the log, through the services) -----------------------------------

    @extend_schema(
        summary="A version's protocol, metadata, size and commitInfo",
        parameters=[TABLE_ID, VERSION],
        responses={200: s.VersionSummarySerializer, **_errors(*READ_ERRORS)},
    )
    @action(detail=True, methods=["get"], url_path=r"versions/(?P<version>[^/]+)", url_name="version")
    def version(self, request, id=None, version=None):
        """Replays the log to the version (cached per version). 404 version_not_found names the versions
        that are available; 422 when the log cannot be read."""
        table = self.get_object()
        return Response(versions.version_summary(table, version_param(version)))

    @extend_schema(
        summary="The active files of a version (paged with limit/offset)",
        parameters=[TABLE_ID, VERSION],
        responses={200: s.FileSerializer(many=True), **_errors(*READ_ERRORS)},
    )
    @action(detail=True, methods=["get"], url_path=r"versions/(?P<version>[^/]+)/files", url_name="version-files")
    def version_files(self, request, id=None, version=None):
        """Active files of the version with size, partition values and deletion vector, in log order."""
        table = self.get_object()
        v = version_param(version)
        paginator = self.paginator
        limit, offset = paginator.get_limit(request), paginator.get_offset(request)
        count, rows = versions.version_files(table, v, offset, limit)
        paginator.count, paginator.limit, paginator.offset, paginator.request = count, limit, offset, request
        return paginator.get_paginated_response(rows)

    @extend_schema(
        summary="TIMESTAMP AS OF: the version that was current at a time",
        parameters=[TABLE_ID, s.ResolveQuerySerializer],
        responses={200: s.ResolveSerializer, **_errors(*READ_ERRORS)},
    )
    @action(detail=True, methods=["get"])
    def resolve(self, request, id=None):
        """The latest version whose commit timestamp is at or before `timestamp` (ICT where it applies,
        file times otherwise), with the rule that was applied. 400 timestamp_out_of_range before the
        earliest available version unless allow_earliest=true, or after the latest commit unless
        allow_latest=true."""
        table = self.get_object()
        q = validated_query(s.ResolveQuerySerializer, request)
        return Response(
            versions.resolve(table, q["timestamp"], allow_latest=q["allow_latest"], allow_earliest=q["allow_earliest"])
        )

    @extend_schema(
        summary="What changed between two versions (schema, properties, protocol, files, commits)",
        parameters=[TABLE_ID, s.DiffQuerySerializer],
        responses={200: s.DiffSerializer, **_errors(*READ_ERRORS)},
    )
    @action(detail=True, methods=["get"])
    def diff(self, request, id=None):
        """Schema, partitioning, properties and protocol changes, files added and removed, and the commits
        in between. 400 invalid_range when from > to; 404 version_not_found for a missing version."""
        table = self.get_object()
        q = validated_query(s.DiffQuerySerializer, request)
        out = versions.diff(table, q["from"], q["to"], sample=q["sample"])
        out["commits"] = [
            {
                "version": c["version"],
                "timestamp": c["timestamp"],
                "timestampSource": c["timestamp_source"],
                "operation": c["operation"],
                "userName": c["user_name"],
                "operationMetrics": c["operation_metrics"],
            }
            for c in out.get("commits", [])
        ]
        return Response(out)

    # --- restores ----------------------------------------------------------------------------

    @extend_schema(
        methods=["GET"],
        summary="The table's restore requests, newest first (paged with limit/offset)",
        parameters=[TABLE_ID, rs.RestoreQuerySerializer],
        responses={200: rs.RestoreSummarySerializer(many=True), **_errors(400, 401, 403, 404)},
    )
    @extend_schema(
        methods=["POST"],
        summary="Request a restore: dry-run plan now, commit after an approver approves",
        parameters=[TABLE_ID],
        request=rs.RestoreCreateSerializer,
        responses={
            201: OpenApiResponse(rs.RestoreRequestSerializer, description="The pending request with its plan"),
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
            q = validated_query(rs.RestoreQuerySerializer, request)
            rows = RESTORES.filter(table=table)
            if q.get("status"):
                rows = rows.filter(status__in=q["status"])
            page = self.paginate_queryset(rows.defer("plan", "verification", "result"))
            return self.get_paginated_response(rs.RestoreSummarySerializer(page, many=True).data)
        ser = rs.RestoreCreateSerializer(data=request.data)
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
        body = rs.RestoreRequestSerializer(RESTORES.get(pk=req.pk)).data
        return Response(body, status=status.HTTP_201_CREATED, headers={"Location": _restore_location(request, req)})


@extend_schema_view(
    retrieve=extend_schema(
        summary="A background job: status, stage, progress (done/total), error, result",
        responses={200: s.JobSerializer, **_errors(401, 403, 404)},
    )
)
class JobViewSet(mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Background jobs (syncs and data jobs): poll until isTerminal."""

    queryset = Job.objects.select_related("created_by")
    serializer_class = s.JobSerializer
    permission_classes = [IsAuthenticated, CanBrowse]
    lookup_value_regex = "[0-9]{1,18}"


@extend_schema_view(
    list=extend_schema(
        summary="Restore requests of every table, newest first (paged with limit/offset)",
        parameters=[rs.RestoreQuerySerializer],
        responses={200: rs.RestoreSummarySerializer(many=True), **_errors(400, 401, 403)},
    ),
    retrieve=extend_schema(
        summary="A restore request: status, plan, progress (stage, done/total), result, error, events",
        responses={200: rs.RestoreRequestSerializer, **_errors(401, 403, 404)},
    ),
)
class RestoreViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Restore requests: poll one until isTerminal (or awaitingApproval, when it went stale)."""

    queryset = RESTORES
    serializer_class = rs.RestoreRequestSerializer
    pagination_class = Pagination
    lookup_value_regex = "[0-9]{1,18}"

    def get_permissions(self):
        if self.action in ("approve", "reject"):
            return [IsAuthenticated(), CanApprove()]
        return [IsAuthenticated(), CanBrowse()]

    def list(self, request):
        q = validated_query(rs.RestoreQuerySerializer, request)
        rows = self.get_queryset()
        if q.get("status"):
            rows = rows.filter(status__in=q["status"])
        page = self.paginate_queryset(rows.defer("plan", "verification", "result"))
        return self.get_paginated_response(rs.RestoreSummarySerializer(page, many=True).data)

    def _decision(self) -> dict[str, Any]:
        ser = rs.RestoreDecisionSerializer(data=self.request.data)
        ser.is_valid(raise_exception=True)
        return ser.validated_data

    @extend_schema(
        summary="Approve the plan: the restore is queued for a worker",
        request=rs.RestoreDecisionSerializer,
        responses={
            202: OpenApiResponse(rs.RestoreRequestSerializer, description="Approved and queued"),
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
        body = rs.RestoreRequestSerializer(RESTORES.get(pk=req.pk)).data
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": _restore_location(request, req)})

    @extend_schema(
        summary="Reject the request (a comment saying why is required)",
        request=rs.RestoreRejectSerializer,
        responses={200: rs.RestoreRequestSerializer, **_errors(400, 401, 403, 404, 409)},
    )
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        """Approvers (or staff) only, never the requester; only pending or stale requests."""
        data = self._decision()
        req = reject_restore(self.get_object(), request.user, data["comment"])
        return Response(rs.RestoreRequestSerializer(RESTORES.get(pk=req.pk)).data)

    @extend_schema(
        summary="Withdraw your own request (pending or stale); it can no longer be approved",
        request=rs.RestoreDecisionSerializer,
        responses={200: rs.RestoreRequestSerializer, **_errors(400, 401, 403, 404, 409)},
    )
    @action(detail=True, methods=["post"])
    def withdraw(self, request, pk=None):
        """The requester (or staff) only (403 otherwise); only pending or stale requests (409
        invalid_state). The comment, optional, goes into the audit trail."""
        data = self._decision()
        req = withdraw_restore(self.get_object(), request.user, data["comment"])
        return Response(rs.RestoreRequestSerializer(RESTORES.get(pk=req.pk)).data)


class ApiRootView(APIView):
    """The API's entry point: where the endpoints and the documentation are."""

    permission_classes = [AllowAny]

    @extend_schema(exclude=True)
    def get(self, request):
        def url(name: str) -> str:
            return request.build_absolute_uri(reverse(name))

        return Response(
            {
                "tables": url("api:table-list"),
                "restores": url("api:restore-list"),
                "token": url("api:token"),
                "schema": url("api:schema"),
                "docs": url("api:docs"),
            }
        )
