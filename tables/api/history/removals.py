"""REST API for files removed outside the log: GET tables/{id}/vacuums/ (the sync's
FileRemovalEvent rows, newest first, paged) and tables/{id}/vacuums/csv/ or parquet/ (the
same as one file, the history export's companion).

Each view checks permissions (signed in, CanBrowse) and reads the rows through
tables.services.sync.vanished; errors are rendered by tables.api.base.errors.exception_handler.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.views import APIView

from tables.api.base.common import TABLE_ID, Pagination, _errors, table_or_404
from tables.api.base.permissions import CanBrowse
from tables.models import FileRemovalEvent, Table
from tables.services.history import export
from tables.services.sync import vanished

READ_ERRORS = (400, 401, 403, 404)


class FileRemovalSerializer(serializers.ModelSerializer):
    """One look that found files the log still references gone from storage."""

    noticedAt = serializers.DateTimeField(source="noticed_at", help_text="When the sync's look noticed it.")
    version = serializers.IntegerField(help_text="The latest version when noticed: it happened after this commit.")
    previousVersion = serializers.IntegerField(
        source="previous_version", allow_null=True, help_text="The latest version at the look before."
    )
    files = serializers.IntegerField(help_text="Referenced files (data and deletion vectors) found gone.")
    bytes = serializers.IntegerField(help_text="Their size as the log's add actions give it.")
    paths = serializers.ListField(child=serializers.CharField(), help_text="The first vanished paths (at most 20).")
    unreadable = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField(), min_length=2, max_length=2),
        help_text="Versions that became unreadable, as [first, last] runs, ascending.",
    )
    unreadableCount = serializers.IntegerField(source="unreadable_count")
    unreadableFrom = serializers.IntegerField(source="unreadable_from", allow_null=True)
    unreadableTo = serializers.IntegerField(source="unreadable_to", allow_null=True)
    vacuumStartVersion = serializers.IntegerField(
        source="vacuum_start_version", allow_null=True, help_text="The VACUUM START commit it is attributed to."
    )
    vacuumEndVersion = serializers.IntegerField(
        source="vacuum_end_version", allow_null=True, help_text="The VACUUM END commit it is attributed to."
    )
    vacuumUser = serializers.CharField(source="vacuum_user", allow_blank=True, help_text="That commit's user.")
    vacuumTimestamp = serializers.IntegerField(
        source="vacuum_timestamp", allow_null=True, help_text="That commit's time, ms since the epoch."
    )
    vacuumDeletedFiles = serializers.IntegerField(
        source="vacuum_deleted_files", allow_null=True, help_text="As its operationMetrics say (numDeletedFiles)."
    )
    complete = serializers.BooleanField(help_text="Counted from a listing of the table (false: a sample's count).")
    exact = serializers.BooleanField(help_text="Files compared one by one (false: counts compared).")

    class Meta:
        model = FileRemovalEvent
        fields = [
            "id",
            "noticedAt",
            "version",
            "previousVersion",
            "files",
            "bytes",
            "paths",
            "unreadable",
            "unreadableCount",
            "unreadableFrom",
            "unreadableTo",
            "vacuumStartVersion",
            "vacuumEndVersion",
            "vacuumUser",
            "vacuumTimestamp",
            "vacuumDeletedFiles",
            "complete",
            "exact",
        ]


class _RemovalView(APIView):
    permission_classes = [IsAuthenticated, CanBrowse]

    def table(self, key: str) -> Table:
        return table_or_404(key)


class VacuumsView(_RemovalView):
    pagination_class = Pagination

    @extend_schema(
        summary="Files removed outside the log (VACUUM): what vanished, which versions it made unreadable",
        parameters=[TABLE_ID],
        responses={200: FileRemovalSerializer(many=True), **_errors(*READ_ERRORS)},
    )
    def get(self, request, id: str):
        """Each sync looks at the files the versions still in the log reference; every look that found
        some gone is one entry, newest first (paged with limit/offset), attributed to the VACUUM
        START/END commits after the look before, when the log has them."""
        table = self.table(id)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(vanished.events_of(table), request, view=self)
        return paginator.get_paginated_response(FileRemovalSerializer(page, many=True).data)


class VacuumsExportView(_RemovalView):
    @extend_schema(
        summary="Files removed outside the log as a CSV or Parquet file (the history export's companion)",
        parameters=[
            TABLE_ID,
            OpenApiParameter("fmt", str, OpenApiParameter.PATH, enum=["csv", "parquet"], description="File format."),
        ],
        responses={
            (200, "text/csv"): OpenApiTypes.BINARY,
            (200, "application/vnd.apache.parquet"): OpenApiTypes.BINARY,
            **_errors(401, 403, 404),
        },
    )
    def get(self, request, id: str, fmt: str):
        """One row per entry of vacuums/, newest first: noticedAt, version, previousVersion, files, bytes,
        unreadableFrom, unreadableTo, unreadableCount, unreadableVersions ("0..4,7"), the VACUUM's
        versions, user, time and deleted files, complete, exact, paths (JSON text)."""
        table = self.table(id)
        return export.removals_response(table, vanished.events_of(table), fmt)
