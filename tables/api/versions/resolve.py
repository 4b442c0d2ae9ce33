"""TIMESTAMP AS OF: the version that was current at a time (GET tables/{id}/resolve/)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.response import Response

from tables.api.base.common import READ_ERRORS, TABLE_ID, _errors
from tables.api.base.params import validated_query
from tables.api.versions.reachability import VersionReachabilitySerializer
from tables.services.versions import read as versions
from tables.services.versions.read import Resolution


class ResolveQuerySerializer(serializers.Serializer):
    # no maxLength: the parser refuses a long one itself, as invalid_timestamp like any bad time
    timestamp = serializers.CharField(
        min_length=1,
        help_text="The time to resolve: ISO-8601, yyyy-MM-dd[ HH:mm:ss[.SSS]] or epoch ms (UTC when no zone).",
    )
    allow_latest = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Answer the latest version for a time after the latest commit (as RESTORE does).",
    )
    allow_earliest = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Answer the earliest available version for a time before it (Delta's canReturnEarliestCommit).",
    )


class AlternativesSerializer(serializers.Serializer):
    commitInfoTimestamp = serializers.IntegerField(allow_null=True)
    fileModificationTime = serializers.IntegerField(allow_null=True)


class ResolveSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    commitTimestamp = serializers.IntegerField(allow_null=True)
    commitTimestampIso = serializers.CharField(allow_null=True)
    source = serializers.CharField(help_text="'ict' or 'file'")
    searchRange = serializers.ListField(child=serializers.IntegerField(), help_text="[lo, hi) versions searched")
    rule = serializers.CharField(help_text="How the answer was found, in words.")
    requestedTimestamp = serializers.IntegerField()
    alternatives = AlternativesSerializer(
        help_text="What a reader using only commitInfo.timestamp or only file times would answer."
    )
    reachability = VersionReachabilitySerializer(
        allow_null=True, help_text="Whether the version can still be read or restored (as /reachability/)."
    )

    def to_representation(self, instance: Resolution) -> dict[str, Any]:
        """The core's answer as it gives it, then the version's reachability entry."""
        entry = instance.reachability
        reach = None if entry is None else VersionReachabilitySerializer(entry).data
        return {**instance.answer, "reachability": reach}


class ResolveActions:
    """TableViewSet's resolve action."""

    @extend_schema(
        summary="TIMESTAMP AS OF: the version that was current at a time",
        parameters=[TABLE_ID, ResolveQuerySerializer],
        responses={200: ResolveSerializer, **_errors(*READ_ERRORS)},
    )
    @action(detail=True, methods=["get"])
    def resolve(self, request, id=None):
        """The latest version whose commit timestamp is at or before `timestamp` (ICT where it applies,
        file times otherwise), with the rule that was applied. 400 timestamp_out_of_range before the
        earliest available version unless allow_earliest=true, or after the latest commit unless
        allow_latest=true."""
        table = self.get_object()
        q = validated_query(ResolveQuerySerializer, request)
        found = versions.resolve(
            table, q["timestamp"], allow_latest=q["allow_latest"], allow_earliest=q["allow_earliest"]
        )
        return Response(ResolveSerializer(found).data)
