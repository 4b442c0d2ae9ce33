"""What the API's view modules share, and what apps built on the API import: the
paging, the table and version path parameters, the documented error responses."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response

from tables.api.base.fields import ErrorSerializer
from tables.models import Job, Table
from tables.services.catalog.lookup import INT64_MAX, parse_int64, table_by_key
from tables.services.errors import BROKER_RETRY_AFTER, ServiceError, error_body, printable, public_message


class Pagination(LimitOffsetPagination):
    """limit/offset paging that rejects a bad limit or offset instead of ignoring it."""

    default_limit = 50
    max_limit = 1000

    def _int_param(self, request, name: str, minimum: int) -> int | None:
        raw = request.query_params.get(name)
        if raw is None or raw == "":
            return None
        try:
            value = int(raw)
        except ValueError:
            value = None
        if value is None or value < minimum or value > INT64_MAX:
            raise ValidationError({name: [f"must be an integer >= {minimum}, got '{raw[:40]}'."]})
        return value

    def get_limit(self, request) -> int:
        value = self._int_param(request, self.limit_query_param, 1)
        return self.default_limit if value is None else min(value, self.max_limit)

    def get_offset(self, request) -> int:
        return self._int_param(request, self.offset_query_param, 0) or 0

    def get_schema_operation_parameters(self, view) -> list[dict[str, Any]]:
        """limit and offset with the bounds get_limit/get_offset enforce (a bad one is a 400)."""
        return [
            {
                "name": self.limit_query_param,
                "required": False,
                "in": "query",
                "description": f"Number of results per page (1..{self.max_limit}; more is capped; default "
                f"{self.default_limit}).",
                "schema": {"type": "integer", "minimum": 1, "maximum": INT64_MAX, "format": "int64"},
            },
            {
                "name": self.offset_query_param,
                "required": False,
                "in": "query",
                "description": "The index of the first result (0 or more).",
                "schema": {"type": "integer", "minimum": 0, "maximum": INT64_MAX, "format": "int64"},
            },
        ]


def _errors(*codes: int) -> dict[int, OpenApiResponse]:
    text = {
        400: "Bad request (invalid parameters); body {error: {code, message}}",
        401: "Not authenticated",
        403: "Not allowed for this user",
        404: "Table (or version, or restore request) not found",
        409: "Conflict",
        410: "Gone (a result no longer kept)",
        429: "Too many requests (e.g. too_many_queries: your queries queued or running)",
        422: "The table's log cannot be read",
        503: "A service it needs does not answer (e.g. broker_unavailable: the task queue); retry after Retry-After",
    }
    return {c: OpenApiResponse(ErrorSerializer, description=text[c]) for c in codes}


# the errors a read of a table's history or versions may answer
READ_ERRORS = (400, 401, 403, 404, 422)
TABLE_ID = OpenApiParameter(
    "id",
    {"type": "string", "minLength": 1, "maxLength": 200},
    OpenApiParameter.PATH,
    description="The table's numeric id (or its slug).",
)
VERSION = OpenApiParameter(
    "version",
    {"type": "integer", "format": "int64", "minimum": 0, "maximum": INT64_MAX},
    OpenApiParameter.PATH,
    description="A table version (>= 0).",
)


def table_or_404(key: str) -> Table:
    """The table a URL names by id or slug, else the API's 404 (the key shown bounded)."""
    table = table_by_key(key)
    if table is None:
        raise NotFound(f"No table with id or slug '{printable(key)}'.")
    return table


def version_param(raw: str) -> int:
    """A version in the path: a non-negative 64-bit integer, else 400 naming it."""
    value = parse_int64(raw)
    if value is None:
        raise ValidationError({"version": [f"must be a non-negative integer, got '{raw[:40]}'."]})
    return value


def retry_later(exc: ServiceError) -> Response:
    """A 503 to retry, in the API's error shape with Retry-After (the exception handler sets the
    header only for a lost database, so a view that can tell answers it itself)."""
    body = error_body(exc.code, public_message(exc.message), **exc.extra)
    return Response(body, status=exc.status, headers={"Retry-After": BROKER_RETRY_AFTER})


def job_location(request, job: Job) -> str:
    """The job's URL in the API, for a 202's Location header and body."""
    return request.build_absolute_uri(reverse("api:job-detail", args=[job.pk]))
