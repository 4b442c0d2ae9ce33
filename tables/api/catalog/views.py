"""The Unity Catalog Delta API for the catalogManaged tables deltaweb owns (thin views over
tables.services.owner.catalog), under /api/2.1/unity-catalog/delta/:

GET  v1/config?catalog=&protocol-versions=                      -> {endpoints, protocol-version}
POST v1/catalogs/{c}/schemas/{s}/staging-tables   {name}         -> table-id, location, required protocol
POST v1/catalogs/{c}/schemas/{s}/tables           createTable    -> loadTable's answer
GET  v1/catalogs/{c}/schemas/{s}/tables/{t}       loadTable      -> metadata, commits, latest-table-version
POST v1/catalogs/{c}/schemas/{s}/tables/{t}       updateTable    -> loadTable's answer
HEAD v1/catalogs/{c}/schemas/{s}/tables/{t}                      -> 204 | 404
GET  v1/catalogs/{c}/schemas/{s}/tables/{t}/credentials?operation=, v1/staging-tables/{id}/credentials
POST preview/commits, GET preview/commits (JSON body)             the older commit API
GET  openapi.yaml, openapi.json                                   this API's OpenAPI description

Authentication: `Authorization: Bearer <token>` (or `Token <token>`), the app's API tokens;
reads need a deltaweb role, writes the writer role. Errors: {"error": {type, code, message}};
a method a path does not implement is 405 with `Allow` (before authentication), a path of UC's
Delta API that deltaweb does not implement 501 NotImplementedException, any other path under
the prefix 404 NotFoundException (tables.api.errors.uc_not_found_view).
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView, set_rollback

from tables.api.base.errors import (
    DATABASE_RETRY_AFTER,
    DATABASE_UNAVAILABLE,
    INTERNAL_MESSAGE,
    UC_PREFIX,
    is_database_unavailable,
    too_large_message,
)
from tables.api.base.parsers import BoundedJSONParser
from tables.api.base.tokens import RoleTokenAuthentication
from tables.api.catalog import openapi as uc_openapi
from tables.delta.errors import DeltaError
from tables.services.errors import ServiceError, http_status, uc_error_body
from tables.services.owner import catalog as uc

logger = logging.getLogger("tables.api")


class BearerTokenAuthentication(RoleTokenAuthentication):
    """The app's API tokens sent as OAuth-style bearer tokens, as Unity Catalog clients do."""

    keyword = "Bearer"


def uc_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Every error of this API in UC's shape; nothing else leaks (no traceback, no HTML)."""
    if isinstance(exc, uc.UcError):
        return Response(exc.body(), status=exc.status)
    if isinstance(exc, ServiceError | DeltaError):  # from the core or a shared use case: same shape
        status = http_status(exc)
        return Response(uc_error_body(status, str(exc)), status=status)
    if isinstance(exc, RequestDataTooBig):
        return Response(uc_error_body(413, too_large_message()), status=413)
    if isinstance(exc, exceptions.MethodNotAllowed):
        return _method_not_allowed(context)
    if isinstance(exc, exceptions.APIException):
        status = exc.status_code
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            status = 401
        detail = exc.detail if isinstance(exc.detail, str) else "the request is malformed"
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
        if getattr(exc, "wait", None):
            headers["Retry-After"] = f"{int(exc.wait)}"
        return Response(uc_error_body(status, str(detail)), status=status, headers=headers or None)
    set_rollback()
    if is_database_unavailable(exc):
        return Response(
            uc_error_body(503, DATABASE_UNAVAILABLE), status=503, headers={"Retry-After": DATABASE_RETRY_AFTER}
        )
    logger.exception("unexpected error in the catalog API", exc_info=exc)
    return Response(uc_error_body(500, INTERNAL_MESSAGE), status=500)


def _method_not_allowed(context: dict[str, Any]) -> Response:
    """405 naming the methods the path allows, also in `Allow` (RFC 9110; DRF's finalize_response
    sets the same header from the view, this keeps it should that ever change)."""
    view, request = context.get("view"), context.get("request")
    allowed = ", ".join(view.allowed_methods) if view is not None else ""
    method = str(getattr(request, "method", "") or "")[:20]
    message = f'Method "{method}" is not allowed on this path; it allows {allowed}.'
    return Response(uc_error_body(405, message), status=405, headers={"Allow": allowed} if allowed else None)


class _JsonAnswers(DefaultContentNegotiation):
    """Always JSON, whatever the Accept header: UC's clients read nothing else, and a browser's
    Accept must not turn a catalog answer into DRF's HTML page. Request bodies still go through
    the parsers (a body that is not JSON is a 415)."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class _UcView(APIView):
    authentication_classes = [BearerTokenAuthentication, RoleTokenAuthentication]
    permission_classes = [IsAuthenticated]
    parser_classes = [BoundedJSONParser]
    renderer_classes = [JSONRenderer]
    content_negotiation_class = _JsonAnswers

    def get_exception_handler(self):
        return uc_exception_handler

    def initial(self, request, *args, **kwargs) -> None:
        # The methods of a path are public (the OpenAPI document lists them): a method the path
        # does not implement is 405 with Allow before authentication, the same for every caller.
        method = request.method.lower()
        if method not in self.http_method_names or not hasattr(self, method):
            raise exceptions.MethodNotAllowed(request.method)
        super().initial(request, *args, **kwargs)

    @staticmethod
    def body(request) -> dict[str, Any]:
        data = request.data
        if not isinstance(data, dict):
            raise uc.bad("the request body must be a JSON object")
        return data


@extend_schema(exclude=True)
class ConfigView(_UcView):
    def get(self, request):
        return Response(
            uc.get_config(request.query_params.get("catalog"), request.query_params.get("protocol-versions"))
        )


@extend_schema(exclude=True)
class StagingTablesView(_UcView):
    def post(self, request, catalog: str, schema: str):
        return Response(uc.create_staging_table(request.user, catalog, schema, self.body(request)))


@extend_schema(exclude=True)
class StagingCredentialsView(_UcView):
    def get(self, request, table_id: str):
        return Response(uc.staging_credentials(request.user, table_id))


@extend_schema(exclude=True)
class TablesView(_UcView):
    def post(self, request, catalog: str, schema: str):
        return Response(uc.create_table(request.user, catalog, schema, self.body(request)))


@extend_schema(exclude=True)
class TableView(_UcView):
    def get(self, request, catalog: str, schema: str, table: str):
        return Response(uc.load_table(request.user, catalog, schema, table))

    def head(self, request, catalog: str, schema: str, table: str):
        # a missing table raises NoSuchTableException like loadTable: the 404 keeps its JSON
        # Content-Type (the server sends no body to a HEAD)
        uc.table_exists(request.user, catalog, schema, table)
        return Response(status=204)

    def post(self, request, catalog: str, schema: str, table: str):
        return Response(uc.update_table(request.user, catalog, schema, table, self.body(request)))


@extend_schema(exclude=True)
class TableCredentialsView(_UcView):
    def get(self, request, catalog: str, schema: str, table: str):
        op = request.query_params.get("operation")
        return Response(uc.table_credentials(request.user, catalog, schema, table, op))


@extend_schema(exclude=True)
class PreviewCommitsView(_UcView):
    def get(self, request):
        """The request's DeltaGetCommits as a JSON body (UC's server) or as query parameters
        (what reaches a server from clients whose HTTP layer drops GET bodies)."""
        body = self.body(request) if request.data else {}
        for key in ("table_id", "table_uri", "start_version", "end_version"):
            if key in request.query_params and key not in body:
                value = request.query_params[key]
                body[key] = int(value) if key.endswith("version") and value.lstrip("-").isdigit() else value
        return Response(uc.preview_get_commits(request.user, body))

    def post(self, request):
        return Response(uc.preview_commit(request.user, self.body(request)))


@extend_schema(exclude=True)
class OpenApiView(_UcView):
    """This API's OpenAPI description: YAML, as UC publishes its own, or the same in JSON.
    Authenticated like the rest of the catalog API; public with DELTAWEB_PUBLIC_SCHEMA=1, as
    /api/schema/ is (nothing in it is secret: it is UC's published description, filtered)."""

    def get_permissions(self):
        return [AllowAny()] if settings.DELTAWEB_PUBLIC_SCHEMA else [IsAuthenticated()]

    def get(self, request, fmt: str):
        return HttpResponse(uc_openapi.rendered(fmt), content_type=uc_openapi.MEDIA_TYPES[fmt])


@csrf_exempt
def not_implemented_view(request: HttpRequest, operation: str, **kwargs: Any) -> JsonResponse:
    """A path of UC's Delta API that deltaweb does not implement: 501 NotImplementedException
    (UC's error type for it), so a client that skipped /config hears "not here", not "no such table"."""
    message = f"deltaweb does not implement {operation}; GET {UC_PREFIX}delta/v1/config lists the endpoints it serves."
    return JsonResponse(uc_error_body(501, message), status=501)
