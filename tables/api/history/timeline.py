"""A table's commit-timestamp timeline: every version's timestamps, the ICT boundary and the
anomalies the sync found (GET tables/{id}/timeline/), and the ICT block a table's answer carries."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.response import Response

from tables.api.base.common import TABLE_ID, _errors
from tables.models import Anomaly, Commit


# a table's in-commit timestamps, as its latest sync found them
class IctSerializer(serializers.Serializer):
    enabled = serializers.BooleanField(source="ict_enabled")
    enablementVersion = serializers.IntegerField(source="ict_enablement_version", allow_null=True)
    enablementTimestamp = serializers.IntegerField(
        source="ict_enablement_timestamp", allow_null=True, help_text="ms since the epoch"
    )


# one cached commit's timestamps: a Commit row's values
class TimelineVersionSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    fileModificationTime = serializers.IntegerField(source="file_modification_time")
    commitInfoTimestamp = serializers.IntegerField(source="commit_info_timestamp", allow_null=True)
    inCommitTimestamp = serializers.IntegerField(source="in_commit_timestamp", allow_null=True)
    timestamp = serializers.IntegerField(allow_null=True)
    source = serializers.CharField(source="timestamp_source", help_text="'ict' or 'file'")
    adjusted = serializers.BooleanField(help_text="the file time was monotonized")


class AnomalySerializer(serializers.ModelSerializer):
    class Meta:
        model = Anomaly
        fields = ["version", "kind", "detail"]


# built from {"ict": the table, "versions": its Commit rows\' values, "anomalies": its Anomaly rows}
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
        columns = ("file_modification_time", "commit_info_timestamp", "in_commit_timestamp", "timestamp_source")
        rows = (
            Commit.objects.filter(table=table).order_by("version").values("version", *columns, "timestamp", "adjusted")
        )
        body = {"ict": table, "versions": rows, "anomalies": Anomaly.objects.filter(table=table)}
        return Response(TimelineSerializer(body).data)
