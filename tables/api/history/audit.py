"""REST API for the signed audit export: GET tables/{id}/audit-export/?from=&to= answers the
same signed file as the History tab's download (tables.services.chain.audit), named by the
table and the version range.

Analysts and approvers only (CanRegister), as on the page. Errors are rendered by
tables.api.base.errors.exception_handler: 400 for a bad range, 409 before the first sync, 503
audit_unavailable when no signing key is configured in production.
"""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.views import APIView

from tables.api.base.common import TABLE_ID, _errors, table_or_404
from tables.api.base.fields import add_field
from tables.api.base.params import validated_query
from tables.api.base.permissions import CanBrowse, CanRegister
from tables.services.catalog.lookup import INT64_MAX
from tables.services.chain import audit

MEDIA_TYPE = "application/x-ndjson"


class AuditRangeSerializer(serializers.Serializer):
    to = serializers.IntegerField(
        required=False, min_value=0, max_value=INT64_MAX, help_text="The last version (default: the latest seen)."
    )


add_field(
    AuditRangeSerializer,
    "from",
    serializers.IntegerField(
        required=False, min_value=0, max_value=INT64_MAX, help_text="The first version (default: the first seen)."
    ),
    before="to",
)


class AuditExportView(APIView):
    permission_classes = [IsAuthenticated, CanBrowse, CanRegister]

    @extend_schema(
        summary="The signed audit export of a version range, as a file (analysts and approvers)",
        parameters=[TABLE_ID, AuditRangeSerializer],
        responses={
            (200, MEDIA_TYPE): OpenApiResponse(
                OpenApiTypes.BINARY,
                description="Two JSON lines: the export (commits as first seen, the hash chain, the recorded "
                "checksum checks, restore approvals), then its Ed25519 signature. Content-Disposition names "
                "the file <table>-audit-v<from>-v<to>.jsonl.",
            ),
            **_errors(400, 401, 403, 404, 409, 503),
        },
    )
    def get(self, request, id: str):
        """What deltaweb first saw of each commit in the range, signed; check it with
        `delta audit-verify FILE --public-key KEY [--table PATH]`."""
        table = table_or_404(id)
        query = validated_query(AuditRangeSerializer, request)
        export = audit.audit_export_file(table, query.get("from"), query.get("to"), request.user)
        response = HttpResponse(export.data, content_type=MEDIA_TYPE)
        response["Content-Disposition"] = f'attachment; filename="{export.name}"'
        return response
