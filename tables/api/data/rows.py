"""REST API for data on Spark: version previews, change data, keyed row diffs, one row's history
and job results.

Each view checks permissions (signed in, CanBrowse) and calls one function of
tables.services.data.jobs. Starting a job is a POST and answers 202 with the job (poll /api/jobs/{id}/);
a GET only reads (it never starts or re-runs a job); a finished
job's rows are paged from its Parquet result with pyarrow (`/api/jobs/{id}/results/`), never
loaded whole. Errors are rendered by tables.api.base.errors.exception_handler.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_serializer,
)
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.fields import SkipField
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from tables.api.base.common import TABLE_ID, VERSION, _errors, job_location, table_or_404, version_param
from tables.api.base.fields import ErrorSerializer, add_field
from tables.api.base.params import validated_query
from tables.api.base.permissions import CanBrowse
from tables.api.jobs import JobSerializer
from tables.api.versions.diff import RangeQuerySerializer
from tables.models import Job, JobStatus
from tables.services.catalog.lookup import INT64_MAX, parse_int64
from tables.services.data import jobs as data_jobs
from tables.services.errors import ServiceError
from tables.services.jobs import lifecycle as jobs
from tables.spark.results import MAX_PAGE

MAX_VERSION = INT64_MAX


class PageQuerySerializer(serializers.Serializer):
    offset = serializers.IntegerField(required=False, default=0, min_value=0, help_text="Rows to skip.")
    limit = serializers.IntegerField(
        required=False, default=100, min_value=1, max_value=MAX_PAGE, help_text=f"Rows per page (at most {MAX_PAGE})."
    )


class RowDiffQuerySerializer(RangeQuerySerializer):
    keys = serializers.CharField(
        max_length=2000, help_text="Key columns, comma-separated (unique in both versions), e.g. keys=id or keys=a,b."
    )


class RowHistoryRequestSerializer(serializers.Serializer):
    key = serializers.DictField(
        child=serializers.CharField(max_length=data_jobs.MAX_KEY_TEXT, allow_blank=True, trim_whitespace=False),
        allow_empty=False,
        help_text="The row's key: top-level columns of version `to` and their values as text, e.g. "
        '{"id": "42"} or {"region": "eu", "day": "2024-01-31"} (byte, short, integer, long, string, date, '
        "decimal or boolean columns; at most 32).",
    )
    to = serializers.IntegerField(min_value=0, max_value=MAX_VERSION, help_text="The last version of the range.")


add_field(
    RowHistoryRequestSerializer,
    "from",
    serializers.IntegerField(min_value=0, max_value=MAX_VERSION, help_text="The first version of the range."),
    before="to",
)


class ColumnSerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.CharField(help_text="Delta's type name (long, string, decimal(10,2), struct<...>...).")


class RowsField(serializers.ListField):
    """A result's rows as read: their values are JSON-safe already (tables.delta.json_values),
    so a page of up to 10,000 rows is passed on, not copied value by value."""

    def to_representation(self, data: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return data


class SetIntegerField(serializers.IntegerField):
    """An integer said only when it is set: a None leaves the key out of the answer."""

    def get_attribute(self, instance: Any) -> Any:
        value = super().get_attribute(instance)
        if value is None:
            raise SkipField()
        return value


# A payload whose keys come in `order`, the order its clients have always read (the schema lists
# the fields in their declaration order); a key not in `order` comes after. (Comments, not
# docstrings, on these serializers: the schema would take a docstring as their description.)
class OrderedSerializer(serializers.Serializer):
    order: tuple[str, ...] = ()

    def to_representation(self, instance: Any) -> dict[str, Any]:
        data = super().to_representation(instance)
        return {k: data[k] for k in self.order if k in data} | data


class RowsPageSerializer(OrderedSerializer):
    columns = ColumnSerializer(many=True)
    rows = RowsField(child=serializers.DictField(), help_text="Rows as {column: JSON-safe value}.")
    total = serializers.IntegerField(help_text="Rows in the result (for a preview: rows in the version).")
    offset = serializers.IntegerField()
    limit = serializers.IntegerField()


# A version's cached preview: a preview job's ResultPage with the version asked for and whether a
# POST found it cached (`preview_page`).
class PreviewPageSerializer(RowsPageSerializer):
    order = ("job", "columns", "rows", "total", "offset", "limit", "cached", "version", "reused")

    job = serializers.IntegerField(help_text="The preview job whose cached result this is.")
    version = serializers.IntegerField()
    cached = serializers.IntegerField(help_text="Rows kept in the cached preview (the version's first rows).")
    reused = serializers.BooleanField(
        required=False, help_text="True when a POST found the preview cached (no job was started)."
    )


def preview_page(page: data_jobs.ResultPage, version: int, reused: bool) -> dict[str, Any]:
    """The answer of a version's cached preview (PreviewPageSerializer)."""
    return PreviewPageSerializer({**vars(page), "version": version, "reused": reused}).data


# A page of a finished data job's rows (data_jobs.ResultPage): what its job's summary says beside
# them (`summary`) is given when the job's kind reported it. The range and version a summary
# names and a preview's cached rows are answered as they always were but left out of the
# schema, which says what it always said.
@extend_schema_serializer(exclude_fields=("from", "to", "start", "end", "version", "cached"))
class ResultsPageSerializer(RowsPageSerializer):
    order = (
        "job", "kind", "columns", "rows", "total", "offset", "limit",
        "counts", "versions", "compared", "keys", "key", "files", "from", "to", "start", "end", "version", "cached",
    )  # fmt: skip

    job = serializers.IntegerField()
    kind = serializers.CharField(help_text="preview, changes, rowdiff or rowhistory")
    counts = serializers.JSONField(
        required=False,
        source="summary.counts",
        help_text="changes: [{version, changeType, rows}]; rowdiff: {added, removed, changed}; "
        "rowhistory: {insert, update, delete}.",
    )
    key = serializers.DictField(
        required=False, source="summary.key", help_text="rowhistory: the row's key, typed (column -> value)."
    )
    files = serializers.DictField(
        child=serializers.IntegerField(),
        required=False,
        source="summary.files",
        help_text="rowhistory: data files read and skipped (pruned by partition values and statistics).",
    )
    versions = serializers.JSONField(
        required=False,
        source="summary.versions",
        help_text="changes: each version's commit timestamp, its source and operation.",
    )
    keys = serializers.ListField(child=serializers.CharField(), required=False, source="summary.keys")
    compared = serializers.ListField(child=serializers.CharField(), required=False, source="summary.compared")
    start = serializers.IntegerField(required=False, source="summary.start")
    end = serializers.IntegerField(required=False, source="summary.end")
    version = serializers.IntegerField(required=False, source="summary.version")
    cached = SetIntegerField(required=False)


for _name in ("from", "to"):
    add_field(
        ResultsPageSerializer,
        _name,
        serializers.IntegerField(required=False, source=f"summary.{_name}"),
        before="start",
    )


class DataJobSerializer(JobSerializer):
    reused = serializers.SerializerMethodField(
        help_text="True when this answer is a finished identical job's result, reused because the table "
        "has not changed since (its synced version and newest commit); no job was started."
    )

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "reused"]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_reused(self, job: Job) -> bool:
        return bool(getattr(job, "reused", False))


def _accepted(request, job: Job) -> Response:
    """202 with the job computing it, or 200 with a finished job whose result is reused."""
    code = status.HTTP_200_OK if getattr(job, "reused", False) else status.HTTP_202_ACCEPTED
    return Response(DataJobSerializer(job).data, status=code, headers={"Location": job_location(request, job)})


class _DataView(APIView):
    permission_classes = [IsAuthenticated, CanBrowse]


JOB_202 = OpenApiResponse(DataJobSerializer, description="The job computing it (poll /api/jobs/{id}/)")
JOB_REUSED = OpenApiResponse(
    DataJobSerializer,
    description="A finished identical job, reused (`reused`: true): the table has not changed since it ran",
)


class VersionRowsView(_DataView):
    @extend_schema(
        summary="A version's cached row preview (200), the job computing it (202), or 404 no_preview",
        parameters=[TABLE_ID, VERSION, PageQuerySerializer],
        responses={200: PreviewPageSerializer, 202: JOB_202, **_errors(400, 401, 403, 404, 409)},
    )
    def get(self, request, id: str, version: str):
        """Reads, never starts: 200 with {columns, rows, total (rows in the version), offset, limit,
        cached} once the preview is cached; 202 with the job while it is queued or running; 409
        job_failed when the last preview failed (POST to start it again); 404 no_preview when none
        was started (POST to start one), version_not_found for a missing version."""
        table = table_or_404(id)
        v = version_param(version)
        q = validated_query(PageQuerySerializer, request)
        job = data_jobs.latest_preview(table, v)
        if job is None:
            data_jobs.check_version(table, v)
            raise ServiceError(f"No preview of version {v} yet; POST to this URL to start one.", "no_preview", 404)
        return _preview_answer(request, job, v, q)

    @extend_schema(
        summary="Start a version's row preview: 202 with the job, 200 with a page if already cached",
        parameters=[TABLE_ID, VERSION, PageQuerySerializer],
        request=None,
        responses={200: PreviewPageSerializer, 202: JOB_202, **_errors(400, 401, 403, 404, 422)},
    )
    def post(self, request, id: str, version: str):
        """The first 100 rows of the version (in file and row order) are computed once per (table,
        version) by a Spark job and cached. Answers 200 with a page when the preview is cached, else
        202 with the job computing it: an identical preview queued or running is joined, a failed
        one is started again. 404 version_not_found for a missing version (no job is created)."""
        table = table_or_404(id)
        v = version_param(version)
        q = validated_query(PageQuerySerializer, request)
        with transaction.atomic():
            job = data_jobs.start_preview(table, v, user=request.user)
        job.refresh_from_db()
        return _preview_answer(request, job, v, q)


def _preview_answer(request, job: Job, version: int, q: dict) -> Response:
    if job.status != JobStatus.SUCCEEDED:
        if job.status == JobStatus.FAILED:
            raise ServiceError(
                f"The last preview of version {version} (job {job.pk}) failed: {job.error} "
                "POST to this URL to start it again.",
                "job_failed",
                409,
            )
        return _accepted(request, job)
    page = data_jobs.result_page(job, q["offset"], q["limit"])
    return Response(preview_page(page, version, bool(getattr(job, "reused", False))))


class ChangesView(_DataView):
    @extend_schema(
        summary="Start a change-data job for versions from..to",
        parameters=[TABLE_ID, RangeQuerySerializer],
        request=None,
        responses={200: JOB_REUSED, 202: JOB_202, **_errors(400, 401, 403, 404, 422)},
    )
    def post(self, request, id: str):
        """Rows inserted, deleted and updated (pre- and post-images) in versions from..to, with
        _change_type, _commit_version and _commit_timestamp (ICT from its enablement on), from cdc
        files where a commit has them, else from added and removed files. Answers 202 with the job
        (an identical one queued or running is joined, not duplicated), or 200 with a finished
        identical job (`reused`: true) while the table has not changed since it ran; page its rows
        and counts per version and change type at /api/jobs/{id}/results/.
        400 invalid_range when from > to; 404 version_not_found. No job is created on an error."""
        table = table_or_404(id)
        q = validated_query(RangeQuerySerializer, request)
        with transaction.atomic():
            job = data_jobs.start_changes(table, q["from"], q["to"], user=request.user)
        job.refresh_from_db()
        return _accepted(request, job)


class RowDiffView(_DataView):
    @extend_schema(
        summary="Start a keyed row diff of two versions",
        parameters=[TABLE_ID, RowDiffQuerySerializer],
        request=None,
        responses={200: JOB_REUSED, 202: JOB_202, **_errors(400, 401, 403, 404, 422)},
    )
    def post(self, request, id: str):
        """Rows added, removed and changed between versions `from` and `to`, matched on the key
        columns (which must be unique in both versions); changed rows list the columns that differ
        with the before and after values. Works without change data feed. Answers 202 with the job
        (an identical one queued or running is joined, not duplicated), or 200 with a finished
        identical job (`reused`: true) while the table has not changed since it ran; page its rows
        and counts at /api/jobs/{id}/results/. 400 invalid_range, invalid_keys (a key not in a version); 404
        version_not_found. No job is created on an error. Duplicate keys fail the job (its error
        says which version)."""
        table = table_or_404(id)
        q = validated_query(RowDiffQuerySerializer, request)
        with transaction.atomic():
            job = data_jobs.start_row_diff(table, q["from"], q["to"], q["keys"], user=request.user)
        job.refresh_from_db()
        return _accepted(request, job)


class RowHistoryView(_DataView):
    @extend_schema(
        summary="Start the history of one row (by its key) over versions from..to",
        parameters=[TABLE_ID],
        request=RowHistoryRequestSerializer,
        responses={202: JOB_202, **_errors(400, 401, 403, 404, 422)},
    )
    def post(self, request, id: str):
        """The versions of the range that inserted, updated or deleted the row with this key, each with
        the row before and after, the columns that changed, who committed it and when (ICT-correct).
        Only files whose partition values and statistics could hold the key are read, on Spark.
        Answers 202 with the job (an identical one queued or running is joined; a finished one is
        reused while its result is kept); page its events, newest first, at /api/jobs/{id}/results/:
        rows {version, change, before, after (the row as JSON text), changed, timestamp, user}, with
        `files` {read, skipped}. 400 invalid_range when from > to, invalid_keys for a column that is
        not in version `to`, a type a key cannot have or a value its type cannot hold; 404
        version_not_found. No job is created on an error. A key more than one row has fails the job
        (its error says at which version)."""
        table = table_or_404(id)
        ser = RowHistoryRequestSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        q = ser.validated_data
        with transaction.atomic():
            job = data_jobs.start_row_history(table, dict(q["key"]), q["from"], q["to"], user=request.user)
        job.refresh_from_db()
        return _accepted(request, job)


class JobResultsView(_DataView):
    @extend_schema(
        summary="A page of a finished data job's rows (preview, changes, rowdiff, rowhistory), with its counts",
        parameters=[
            OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH, description="The job's id."),
            PageQuerySerializer,
        ],
        responses={
            200: ResultsPageSerializer,
            **_errors(400, 401, 403, 404, 409),
            410: OpenApiResponse(ErrorSerializer, description="The result files were removed"),
        },
    )
    def get(self, request, id: str):
        """Rows offset..offset+limit of the job's Parquet result (only the row groups of the page are
        read) with columns, total and the job's counts. 409 not_ready while the job is queued or
        running, job_failed when it failed; 404 for a job without rows (e.g. a sync)."""
        pk = parse_int64(id)
        job = Job.objects.filter(pk=pk).first() if pk is not None else None
        if job is None:
            raise NotFound(f"There is no job {id[:40]}.")
        q = validated_query(PageQuerySerializer, request)
        return Response(ResultsPageSerializer(data_jobs.result_page(job, q["offset"], q["limit"])).data)


class JobCancelView(_DataView):
    @extend_schema(
        summary="Cancel a data job: at once when queued, its Spark work interrupted when running",
        parameters=[OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH, description="The job's id.")],
        request=None,
        responses={
            200: OpenApiResponse(JobSerializer, description="Cancelled before it started"),
            202: OpenApiResponse(JobSerializer, description="Running: its worker interrupts it within seconds"),
            **_errors(401, 403, 404, 409),
        },
    )
    def post(self, request, id: str):
        """Only data jobs (preview, changes, rowdiff, rowhistory), by the user who started them, an
        approver or staff (403 forbidden otherwise). A queued job ends at once (200, stage
        `cancelled`); a running one is marked (202, stage `cancelling`) and its worker interrupts
        its Spark work (the job's tag: interruptTag through Spark Connect, cancelJobGroup in the
        worker's own session) and ends it failed with stage `cancelled`, `result.cancelledBy` and
        `cancelledAt`. 409 not_cancellable for other kinds, invalid_state when it already ended."""
        pk = parse_int64(id)
        job = Job.objects.filter(pk=pk).first() if pk is not None else None
        if job is None:
            raise NotFound(f"There is no job {id[:40]}.")
        job = jobs.request_cancel(job, request.user)
        code = status.HTTP_202_ACCEPTED if job.status == JobStatus.RUNNING else status.HTTP_200_OK
        return Response(JobSerializer(job).data, status=code)
