"""A table's history as DESCRIBE HISTORY shows it, from the synced cache: the paged rows
(GET tables/{id}/history/), their filters, and the filtered history as a file."""

from __future__ import annotations

from django.core.cache import cache
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.response import Response

from tables.api.base.common import READ_ERRORS, TABLE_ID, _errors
from tables.api.base.fields import BlankAsNullCharField
from tables.api.base.params import validated_query
from tables.delta.history.columns import COLUMNS as HISTORY_COLUMNS
from tables.delta.history.columns import HISTORY_FIELDS, Column
from tables.models import Commit
from tables.services.catalog.lookup import INT64_MAX as MAX_VERSION
from tables.services.history import export as history_export
from tables.services.history.query import CACHE_SECONDS, HistoryFilter, history, synced_key, time_range


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


def _history_filter(request) -> HistoryFilter:
    """The history filters of a request (400 for a bad one), for the history and its export."""
    q = validated_query(HistoryQuerySerializer, request)
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


class HistoryActions:
    """TableViewSet's history actions: the paged rows and the filtered history as a file."""

    @extend_schema(
        summary="History (as DESCRIBE HISTORY), newest first, from the synced cache",
        parameters=[TABLE_ID, HistoryQuerySerializer],
        responses={200: CommitSerializer(many=True), **_errors(*READ_ERRORS)},
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
            data = self.get_paginated_response(CommitSerializer(page, many=True).data).data
            cache.set(key, data, CACHE_SECONDS)
        return Response(data)

    @extend_schema(
        summary="The filtered history as a CSV or Parquet file, streamed",
        parameters=[
            TABLE_ID,
            HistoryQuerySerializer,
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
