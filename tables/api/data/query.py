"""REST API for SQL at a version (tables.services.query): a query started as a data job, the
same query at two versions started and compared, and the user's queries.

A refused statement is a 400 `query_refused` naming the offending part (`part`), before
anything runs and with no job created; a user with DELTAWEB_QUERY_CONCURRENT queries queued or
running gets 429 `too_many_queries`. A query's rows are paged at /api/jobs/{id}/results/ like
every data job's; it is cancelled at /api/jobs/{id}/cancel/.
"""

from __future__ import annotations

from django.db import transaction
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from tables.api.base.common import TABLE_ID, _errors, table_or_404
from tables.api.base.fields import add_field
from tables.api.base.params import validated_query
from tables.api.base.permissions import CanBrowse
from tables.api.data.rows import DataJobSerializer, _accepted
from tables.models import Job, JobKind
from tables.services.query import compare as comparing
from tables.services.query import run
from tables.services.query.run import at_version

TEXT_LIMIT = 100_000  # the serializer's bound; the configured limit (DELTAWEB_QUERY_MAX_LENGTH) is checked after


class QueryRequestSerializer(serializers.Serializer):
    sql = serializers.CharField(
        max_length=TEXT_LIMIT,
        trim_whitespace=False,
        help_text="One read-only Spark SQL statement. Tables by slug or catalog name, each optionally "
        "`VERSION AS OF n`, `VERSION AS OF 'pin name'` or `TIMESTAMP AS OF '...'` (docs/query.md).",
    )
    at = serializers.CharField(
        max_length=100,
        required=False,
        help_text="Run the query with this table (named without a version) at this version or time.",
    )


class CompareRequestSerializer(serializers.Serializer):
    sql = serializers.CharField(max_length=TEXT_LIMIT, trim_whitespace=False, help_text="The statement (as above).")
    to = serializers.CharField(max_length=100, help_text="The second version (a number) or time.")


add_field(
    CompareRequestSerializer,
    "from",
    serializers.CharField(max_length=100, help_text="The first version (a number) or time."),
    before="to",
)


class ComparisonQuerySerializer(serializers.Serializer):
    keys = serializers.CharField(
        max_length=2000, required=False, help_text="Key columns, comma-separated (default: the query's GROUP BY)."
    )


class CompareStartedSerializer(serializers.Serializer):
    jobs = DataJobSerializer(many=True, help_text="The query at `from`, then at `to`.")
    compareUrl = serializers.CharField(help_text="Where the comparison is read once both have succeeded.")


class _QueryView(APIView):
    permission_classes = [IsAuthenticated, CanBrowse]


class QueryView(_QueryView):
    @extend_schema(
        summary="Run a read-only SQL statement at the versions it names",
        parameters=[TABLE_ID],
        request=QueryRequestSerializer,
        responses={
            200: OpenApiResponse(DataJobSerializer, description="An identical query at the same versions, reused"),
            202: OpenApiResponse(DataJobSerializer, description="The job running it (poll /api/jobs/{id}/)"),
            **_errors(400, 401, 403, 404, 429),
        },
    )
    def post(self, request, id: str):
        """Checks the statement (one query; registered tables only; Spark's pure built-in
        functions only), resolves each table reference to a version (`params.references`), and
        starts it on Spark. 400 query_refused names the offending part; nothing runs then."""
        table = table_or_404(id)
        body = QueryRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        at = at_version(body.validated_data["at"]) if body.validated_data.get("at") else None
        with transaction.atomic():
            job = run.start_query(table, body.validated_data["sql"], request.user, at)
        job.refresh_from_db()
        return _accepted(request, job)


class CompareView(_QueryView):
    @extend_schema(
        summary="Run the same query at two versions, to compare",
        parameters=[TABLE_ID],
        request=CompareRequestSerializer,
        responses={202: CompareStartedSerializer, **_errors(400, 401, 403, 404, 429)},
    )
    def post(self, request, id: str):
        """The statement run with this table (named without a version) at `from` and at `to`;
        read the comparison at `compareUrl` once both jobs have succeeded."""
        table = table_or_404(id)
        body = CompareRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        d = body.validated_data
        with transaction.atomic():
            first, second = comparing.start_compare(table, d["sql"], d["from"], d["to"], request.user)
        first.refresh_from_db()
        second.refresh_from_db()
        url = request.build_absolute_uri(f"/api/queries/compare/{first.pk}/{second.pk}/")
        data = {"jobs": DataJobSerializer([first, second], many=True).data, "compareUrl": url}
        return Response(data, status=status.HTTP_202_ACCEPTED, headers={"Location": url})


def _query_job(pk: str) -> Job:
    job = Job.objects.filter(pk=int(pk), kind=JobKind.QUERY).first() if pk.isdigit() and len(pk) <= 18 else None
    if job is None:
        raise NotFound(f"No query job {pk[:20]}.")
    return job


class ComparisonView(_QueryView):
    @extend_schema(
        summary="Two results of one query compared: rows only at one side, only at the other, changed",
        parameters=[ComparisonQuerySerializer],
        responses={
            200: OpenApiResponse(description="keys, counts, onlyFrom, onlyTo, changed"),
            **_errors(400, 401, 403, 404, 409, 410),
        },
    )
    def get(self, request, a: str, b: str):
        q = validated_query(ComparisonQuerySerializer, request)
        keys = [k.strip() for k in (q.get("keys") or "").split(",") if k.strip()]
        return Response(comparing.compare(_query_job(a), _query_job(b), keys or None))


class QueryHistoryView(_QueryView):
    @extend_schema(
        summary="Your latest queries, newest first",
        responses={200: DataJobSerializer(many=True), **_errors(401, 403)},
    )
    def get(self, request):
        return Response(DataJobSerializer(run.history(request.user), many=True).data)
