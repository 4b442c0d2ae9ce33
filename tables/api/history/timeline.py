"""A table's commit-timestamp timeline: every version's timestamps, the ICT boundary and the
anomalies the sync found (GET tables/{id}/timeline/), and the ICT block a table's answer carries."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.response import Response

from tables.api.base.common import TABLE_ID, _errors
from tables.models import Anomaly, Commit, Table


class IctSerializer(serializers.Serializer):
    enabled = serializers.BooleanField()
    enablementVersion = serializers.IntegerField(allow_null=True)
    enablementTimestamp = serializers.IntegerField(allow_null=True, help_text="ms since the epoch")


def ict_payload(table: Table) -> dict[str, Any]:
    return {
        "enabled": table.ict_enabled,
        "enablementVersion": table.ict_enablement_version,
        "enablementTimestamp": table.ict_enablement_timestamp,
    }


class TimelineVersionSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    fileModificationTime = serializers.IntegerField()
    commitInfoTimestamp = serializers.IntegerField(allow_null=True)
    inCommitTimestamp = serializers.IntegerField(allow_null=True)
    timestamp = serializers.IntegerField(allow_null=True)
    source = serializers.CharField(help_text="'ict' or 'file'")
    adjusted = serializers.BooleanField(help_text="the file time was monotonized")


class AnomalySerializer(serializers.ModelSerializer):
    class Meta:
        model = Anomaly
        fields = ["version", "kind", "detail"]


class TimelineSerializer(serializers.Serializer):
    ict = IctSerializer()
    versions = TimelineVersionSerializer(many=True)
    anomalies = AnomalySerializer(many=True)


class TimelineActions:
    """TableViewSet's timeline action."""

    @extend_schema(
        summary="Commit-timestamp timeline: every version's timestamps, the ICT boundary, anomalies",
        parameters=[TABLE_ID],
        responses={200: TimelineSerializer, **_errors(401, 403, 404)},
    )
    @action(detail=True, methods=["get"])
    def timeline(self, request, id=None):
        """Every cached version's file time, commitInfo timestamp, ICT and effective timestamp (ascending),
        the ICT enablement boundary and the anomalies found by the sync."""
        table = self.get_object()
        names = ("version", "fileModificationTime", "commitInfoTimestamp", "inCommitTimestamp", "timestamp")
        columns = ("version", "file_modification_time", "commit_info_timestamp", "in_commit_timestamp", "timestamp")
        versions = []
        for *values, source, adjusted in (
            Commit.objects.filter(table=table).order_by("version").values_list(*columns, "timestamp_source", "adjusted")
        ):
            versions.append({**dict(zip(names, values, strict=True)), "source": source, "adjusted": adjusted})
        anomalies = list(Anomaly.objects.filter(table=table).values("version", "kind", "detail"))
        return Response({"ict": ict_payload(table), "versions": versions, "anomalies": anomalies})
