"""Registered tables: the collection, one table, registering, unregistering and syncing one
(`tables/`), and the API's root. TableViewSet is composed here of the actions each concept
declares beside its serializers (history, timeline, reachability, versions, resolve, diff,
restores), so every table route stays under one viewset.

Each view checks permissions (tables.services.access.roles) and calls one service function; no
view parses a log. Errors are rendered by tables.api.base.errors.exception_handler.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field, extend_schema_view
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from tables.api.base.common import TABLE_ID, Pagination, _errors, job_location, retry_later, table_or_404
from tables.api.base.fields import StrictCharField, created_by_field
from tables.api.base.permissions import CanBrowse, CanDeleteTable, CanRegister, CanRequestRestore
from tables.api.history.commits import HistoryActions
from tables.api.history.timeline import IctSerializer, TimelineActions
from tables.api.jobs import JobSerializer
from tables.api.restores import RestoreActions
from tables.api.versions.diff import DiffActions
from tables.api.versions.reachability import ReachabilityActions
from tables.api.versions.resolve import ResolveActions
from tables.api.versions.summary import VersionActions
from tables.models import Table
from tables.services.catalog.registration import delete_table, register_table
from tables.services.errors import ServiceError
from tables.services.jobs import lifecycle as jobs
from tables.services.sync import incomplete
from tables.services.sync.store import start_sync


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
        return IctSerializer(table).data

    @extend_schema_field(IncompleteCommitSerializer(allow_null=True))
    def get_incompleteCommit(self, table: Table) -> dict[str, Any] | None:
        return incomplete.notice_of(table)


class TableCreateSerializer(serializers.Serializer):
    name = StrictCharField(min_length=1, max_length=200, help_text="Display name; must be unique.")
    location = StrictCharField(
        min_length=1,
        max_length=2000,
        help_text="Absolute path or file:// URI of the table root, under an allowed root.",
    )
    description = StrictCharField(required=False, allow_blank=True, default="", max_length=5000)


class TableCreatedSerializer(TableSerializer):
    syncJob = serializers.SerializerMethodField()

    class Meta(TableSerializer.Meta):
        fields = [*TableSerializer.Meta.fields, "syncJob"]
        read_only_fields = fields

    @extend_schema_field(JobSerializer)
    def get_syncJob(self, table: Table) -> dict[str, Any]:
        return JobSerializer(self.context["job"]).data


@extend_schema_view(
    list=extend_schema(
        summary="List registered tables",
        responses={200: TableSerializer(many=True), **_errors(400, 401, 403)},
    ),
)
class TableViewSet(
    HistoryActions,
    TimelineActions,
    ReachabilityActions,
    VersionActions,
    ResolveActions,
    DiffActions,
    RestoreActions,
    viewsets.GenericViewSet,
):
    """Registered Delta tables, their cached history and their versions."""

    queryset = Table.objects.select_related("created_by")
    serializer_class = TableSerializer
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
        return self.get_paginated_response(TableSerializer(page, many=True).data)

    @extend_schema(
        summary="Register a table and start its first sync",
        request=TableCreateSerializer,
        responses={
            201: OpenApiResponse(TableCreatedSerializer, description="The table, with the queued sync job"),
            **_errors(400, 401, 403, 409),
        },
    )
    def create(self, request):
        """Validate the location (under DELTAWEB_ALLOWED_ROOTS, a readable Delta table), register it and
        queue its first sync. Needs the analyst or approver role (or staff). Errors: 400
        invalid / invalid_name / invalid_location / not_a_delta_table, 403 location_not_allowed or
        permission_denied, 409 duplicate (the name) or duplicate_location (the location, however
        spelled, is registered already: `table` names that table and its page)."""
        ser = TableCreateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        data = ser.validated_data
        with transaction.atomic():
            table = register_table(data["name"], data["location"], data["description"], user=request.user)
            job = start_sync(table, user=request.user)
        table.refresh_from_db()
        job.refresh_from_db()  # as sending it left it: failed with the reason if the task queue was down
        body = TableCreatedSerializer(table, context={"job": job, "request": request}).data
        location = request.build_absolute_uri(reverse("api:table-detail", args=[table.pk]))
        return Response(body, status=status.HTTP_201_CREATED, headers={"Location": location})

    @extend_schema(
        summary="One table", parameters=[TABLE_ID], responses={200: TableSerializer, **_errors(401, 403, 404)}
    )
    def retrieve(self, request, id=None):
        """One table: location, sync state, ICT configuration and size, as the latest sync saw them."""
        return Response(TableSerializer(self.get_object()).data)

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
        responses={202: OpenApiResponse(JobSerializer, description="The queued job"), **_errors(401, 403, 404, 503)},
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
            JobSerializer(job).data,
            status=status.HTTP_202_ACCEPTED,
            headers={"Location": job_location(request, job)},
        )


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
