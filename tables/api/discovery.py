"""Discovery through the API: every Delta table under a prefix, previewed, then registered.

POST /api/discover/  {prefix | glueDatabase[, limit]}                     -> 200 the preview (first `limit` rows)
POST /api/discover/  {prefix | glueDatabase, register: true[, locations]} -> 201 what was registered and skipped
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from tables.api.base.common import _errors
from tables.api.base.fields import ErrorSerializer
from tables.api.base.permissions import CanRegister
from tables.delta.storage.backends import named_schemes
from tables.services.catalog import discovery


class DiscoverRequest(serializers.Serializer):
    glueDatabase = serializers.CharField(
        max_length=255, required=False, help_text="instead of a prefix: the Delta tables of this AWS Glue database"
    )
    prefix = serializers.CharField(
        required=False, max_length=2000, help_text=f"a directory, or {named_schemes()} under the allowed roots"
    )
    register = serializers.BooleanField(default=False, help_text="register the new tables (else only preview)")
    limit = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=10_000,
        default=discovery.PREVIEW_ROWS,
        help_text="the preview lists the first `limit` tables found; its counts, found and more cover them all",
    )
    everyHours = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=720,
        help_text="with register: look here again this often, registering new tables and marking vanished ones",
    )
    locations = serializers.ListField(
        child=serializers.CharField(max_length=2000),
        required=False,
        max_length=10_000,
        help_text="register only these of the preview's new tables",
    )


FOUND = {
    "location": serializers.CharField(),
    "name": serializers.CharField(help_text="the name it would get (unique)"),
    "status": serializers.ChoiceField(choices=["new", "registered", "incomplete", "unreadable"]),
    "table": serializers.CharField(allow_null=True, help_text="the registered table's slug"),
    "reason": serializers.CharField(required=False, help_text="unreadable: why it cannot be registered"),
}
PREVIEW = inline_serializer(
    "DiscoveryPreview",
    {
        "prefix": serializers.CharField(required=False),
        "glueDatabase": serializers.CharField(required=False),
        "tables": inline_serializer("DiscoveredTable", FOUND, many=True),
        "new": serializers.IntegerField(),
        "registered": serializers.IntegerField(),
        "incomplete": serializers.IntegerField(help_text="a log with no commit yet (being written): not offered"),
        "unreadable": serializers.IntegerField(
            help_text="a log that cannot be read now: not offered, `reason` says why"
        ),
        "found": serializers.IntegerField(help_text="every table found (new, registered, incomplete and unreadable)"),
        "more": serializers.IntegerField(help_text="tables found beyond those listed"),
        "directoriesListed": serializers.IntegerField(required=False, help_text="with a prefix"),
        "truncated": serializers.CharField(help_text="why the search stopped early ('' when it did not)"),
    },
)

REGISTERED = inline_serializer(
    "DiscoveryRegistered",
    {
        "prefix": serializers.CharField(required=False),
        "glueDatabase": serializers.CharField(required=False),
        "registered": inline_serializer(
            "DiscoveryRegisteredTable",
            {"location": serializers.CharField(), "name": serializers.CharField(), "table": serializers.CharField()},
            many=True,
        ),
        "skipped": inline_serializer(
            "DiscoverySkipped",
            {"location": serializers.CharField(), "code": serializers.CharField(), "message": serializers.CharField()},
            many=True,
        ),
        "truncated": serializers.CharField(),
        "schedule": inline_serializer(
            "DiscoverySchedule",
            {
                "id": serializers.IntegerField(),
                "everyHours": serializers.IntegerField(),
                "nextRunAt": serializers.DateTimeField(),
            },
            required=False,
        ),
    },
)


class DiscoverView(APIView):
    permission_classes = [IsAuthenticated, CanRegister]

    @extend_schema(
        request=DiscoverRequest,
        responses={
            200: PREVIEW,
            201: REGISTERED,
            **_errors(400, 401, 403),
            502: OpenApiResponse(ErrorSerializer, description="glue_error: the Glue catalog refused or did not answer"),
        },
        summary="Find the Delta tables under a prefix; register them",
    )
    def post(self, request):
        """Every directory with a `_delta_log/` under the prefix (not inside another table).
        Without `register`, the preview: the first `limit` tables found, with
        counts of all of them (the walk streams: nothing more is held); with it, the new ones registered (their first sync
        follows within the probe's tick) and any refused listed with the reason. With a
        glueDatabase: 400 glue_region_missing when the server has no AWS region for the catalog,
        502 glue_error when the catalog refuses or does not answer."""
        body = DiscoverRequest(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        glue, prefix = data.get("glueDatabase", ""), data.get("prefix", "")
        if bool(glue) == bool(prefix):
            raise serializers.ValidationError({"prefix": ["Give a prefix or a glueDatabase (one of them)."]})
        if not data["register"]:
            limit = data["limit"]
            if glue:
                answer = discovery.preview_glue(glue, request.user, limit)
            else:
                answer = discovery.preview(prefix, request.user, limit)
            return Response(answer)
        source = None
        if data.get("everyHours"):
            source = discovery.schedule(request.user, prefix, glue, data["everyHours"])
        done = discovery.register_found(prefix, request.user, data.get("locations"), glue_database=glue, source=source)
        if source is not None:
            done["schedule"] = {"id": source.pk, "everyHours": source.every_hours, "nextRunAt": source.next_run_at}
        return Response(done, status=status.HTTP_201_CREATED)
