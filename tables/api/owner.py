"""The commit-owner API for writers (managed commits): deltaweb ratifies, serves and backfills
the commits of the tables it owns. Token-authenticated; the writer role (or staff).

POST /api/owner/tables/{id}/commits            {version, actions} -> 201 {commit}
                                               | 409 commit_conflict {winningVersion}
                                               | 403 commit_refused {refusal}
GET  /api/owner/tables/{id}/commits?start=&end= -> {commits, latestTableVersion}
POST /api/owner/tables/{id}/backfill?version=   -> {backfilledVersion}

`{id}` is the `tableId` of the owner conf in the table's metadata. The answers are those of
tables.delta.managed.owner_client (outcome_to_http, GetCommitsResponse.to_json), which RestOwnerClient parses.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from tables.api.base.fields import ErrorSerializer
from tables.delta.managed.owner import encode_actions
from tables.delta.managed.owner_client import outcome_to_http
from tables.models import ManagedTable
from tables.services.access import roles
from tables.services.owner.access import database_owner
from tables.services.owner.db import table_conf


class CanWriteManaged(BasePermission):
    message = "Committing to managed tables needs the writer role (or staff)."

    def has_permission(self, request, view) -> bool:
        return roles.can_write_managed(request.user)


OWNER_TABLE_ID = OpenApiParameter(
    "table_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="The tableId of the table's owner conf."
)

CommitJson = inline_serializer(
    "OwnerCommit",
    {
        "version": serializers.IntegerField(),
        "path": serializers.CharField(help_text="relative to the table root: staged or backfilled file"),
        "size": serializers.IntegerField(),
        "modificationTime": serializers.IntegerField(),
        "inCommitTimestamp": serializers.IntegerField(allow_null=True),
    },
)


class CommitRequestSerializer(serializers.Serializer):
    version = serializers.IntegerField(min_value=0, max_value=2**63 - 1)
    actions = serializers.ListField(
        child=serializers.DictField(), min_length=1, help_text="the commit's actions, commitInfo first"
    )


class CommitsQuerySerializer(serializers.Serializer):
    start = serializers.IntegerField(min_value=0, max_value=2**63 - 1, required=False, default=0)
    end = serializers.IntegerField(min_value=-1, max_value=2**63 - 1, required=False, allow_null=True, default=None)


class BackfillQuerySerializer(serializers.Serializer):
    version = serializers.IntegerField(min_value=0, max_value=2**63 - 1)


def _errors(*codes: int) -> dict[int, OpenApiResponse]:
    text = {
        400: "Bad request; body {error: {code, message}}",
        401: "Not authenticated",
        403: "Not a writer, or (commits) commit_refused with the owner's reason and `refusal` code",
        404: "No managed table with that tableId",
        409: "commit_conflict: the version was ratified for another writer; `winningVersion` is the latest",
    }
    return {c: OpenApiResponse(ErrorSerializer, description=text[c]) for c in codes}


class _OwnerView(APIView):
    permission_classes = [IsAuthenticated, CanWriteManaged]

    def managed(self, table_id: str) -> ManagedTable:
        mt = ManagedTable.objects.select_related("table").filter(owner_table_id=table_id).first()
        if mt is None:
            raise NotFound(f"deltaweb owns no table with tableId '{table_id[:100]}'.")
        return mt

    @staticmethod
    def query(cls: type[serializers.Serializer], request) -> dict:
        ser = cls(data=request.query_params)
        ser.is_valid(raise_exception=True)
        return ser.validated_data


class OwnerCommitsView(_OwnerView):
    @extend_schema(
        operation_id="owner_commits_list",
        summary="Commit-owner: the ratified commits not yet backfilled, and the latest ratified version",
        parameters=[OWNER_TABLE_ID, CommitsQuerySerializer],
        responses={
            200: inline_serializer(
                "OwnerCommits",
                {"commits": CommitJson.__class__(many=True), "latestTableVersion": serializers.IntegerField()},
            ),
            **_errors(400, 401, 403, 404),
        },
    )
    def get(self, request, table_id: str):
        """Ascending and contiguous; the first may be after `start` (earlier ones are in `_delta_log/`).
        latestTableVersion is -1 when the owner never ratified a version."""
        mt = self.managed(table_id)
        q = self.query(CommitsQuerySerializer, request)
        answer = database_owner().get_commits(table_conf(mt), q["start"], q["end"])
        return Response(answer.to_json())

    @extend_schema(
        operation_id="owner_commits_create",
        summary="Commit-owner: commit a version (ratified or refused; a conflict names the winner)",
        parameters=[OWNER_TABLE_ID],
        request=CommitRequestSerializer,
        responses={
            201: inline_serializer("OwnerCommitCreated", {"commit": CommitJson}),
            **_errors(400, 401, 403, 404, 409),
        },
    )
    def post(self, request, table_id: str):
        """Version v is ratified when v-1 is the latest ratified version, the commit starts with commitInfo
        carrying an inCommitTimestamp, and deltaweb's policy allows it (not frozen; a RESTORE only with the
        txnId of an approved restore request). Refusals are recorded and shown on the table page."""
        mt = self.managed(table_id)
        ser = CommitRequestSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        data = ser.validated_data
        outcome = database_owner().commit(
            table_conf(mt),
            data["version"],
            encode_actions(list(data["actions"])),
            committed_by=request.user.get_username(),
        )
        status, body = outcome_to_http(outcome)
        return Response(body, status=status)


class OwnerBackfillView(_OwnerView):
    @extend_schema(
        operation_id="owner_backfill",
        summary="Commit-owner: backfill the ratified commits up to a version to _delta_log/",
        parameters=[OWNER_TABLE_ID, BackfillQuerySerializer],
        request=None,
        responses={
            200: inline_serializer("OwnerBackfilled", {"backfilledVersion": serializers.IntegerField(allow_null=True)}),
            **_errors(400, 401, 403, 404),
        },
    )
    def post(self, request, table_id: str):
        """In order (v-1 before v), put-if-absent; idempotent. Answers the newest backfilled version."""
        mt = self.managed(table_id)
        q = self.query(BackfillQuerySerializer, request)
        done = database_owner().backfill_to_version(table_conf(mt), q["version"])
        return Response({"backfilledVersion": done})
