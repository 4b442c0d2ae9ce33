"""What changed between two versions: schema, partitioning, properties, protocol, files and
the commits in between (GET tables/{id}/diff/), and the two-version query other concepts share."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.response import Response

from tables.api.base.common import READ_ERRORS, TABLE_ID, _errors
from tables.api.base.fields import add_field
from tables.api.base.params import validated_query
from tables.api.versions.reachability import pin_source
from tables.services.catalog.lookup import INT64_MAX as MAX_VERSION
from tables.services.versions import read as versions
from tables.services.versions.read import VersionDiff


class RangeQuerySerializer(serializers.Serializer):
    """Two versions in the query: `from` and `to` (the metadata diff, change data, a row diff,
    the schema's diff)."""

    to = serializers.IntegerField(min_value=0, max_value=MAX_VERSION, help_text="The later version.")


add_field(
    RangeQuerySerializer,
    "from",
    serializers.IntegerField(min_value=0, max_value=MAX_VERSION, help_text="The earlier version."),
    before="to",
)


class DiffQuerySerializer(RangeQuerySerializer):
    sample = serializers.IntegerField(
        required=False,
        default=50,
        min_value=0,
        max_value=1000,
        help_text="How many added/removed files to list (sample and sampleFiles).",
    )


class FromToIntSerializer(serializers.Serializer):
    to = serializers.IntegerField()


add_field(FromToIntSerializer, "from", serializers.IntegerField(), before="to")


class FromToListSerializer(serializers.Serializer):
    to = serializers.ListField(child=serializers.CharField())


add_field(FromToListSerializer, "from", serializers.ListField(child=serializers.CharField()), before="to")


class ChangeSerializer(serializers.Serializer):
    key = serializers.CharField()
    change = serializers.ChoiceField(choices=["added", "removed", "changed"])
    to = serializers.JSONField(allow_null=True)


add_field(ChangeSerializer, "from", serializers.JSONField(allow_null=True), before="to")


class SchemaChangeSerializer(serializers.Serializer):
    column = serializers.CharField()
    change = serializers.ChoiceField(choices=["added", "removed", "changed"])
    to = serializers.JSONField(allow_null=True)


add_field(SchemaChangeSerializer, "from", serializers.JSONField(allow_null=True), before="to")


class DiffFileSerializer(serializers.Serializer):
    path = serializers.CharField()
    size = serializers.IntegerField()
    partitionValues = serializers.DictField(child=serializers.CharField(allow_null=True))
    numRecords = serializers.IntegerField(allow_null=True, help_text="from the add's stats; null without stats")


class FilesChangeSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    bytes = serializers.IntegerField()
    partitions = serializers.ListField(child=serializers.DictField(), help_text="at most 200")
    partitionCount = serializers.IntegerField()
    sampleFrom = serializers.IntegerField(help_text="the index of the first listed file (0: the list's start)")
    sample = serializers.ListField(child=serializers.CharField(), help_text="the first `sample` paths")
    sampleFiles = DiffFileSerializer(many=True, help_text="the same files with size, partitions and row count")


# a cached commit between the two versions: a row of tables.services.versions.read.diff_commits
# (a docstring would become the schema's description)
class DiffCommitSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    timestamp = serializers.IntegerField(allow_null=True)
    timestampSource = serializers.CharField(source="timestamp_source")
    operation = serializers.CharField()
    userName = serializers.CharField(source="user_name")
    operationMetrics = serializers.JSONField(source="operation_metrics", allow_null=True)


class DiffSerializer(serializers.Serializer):
    to = serializers.IntegerField()
    schema = SchemaChangeSerializer(many=True)
    partitionColumns = FromToListSerializer()
    properties = ChangeSerializer(many=True)
    protocol = ChangeSerializer(many=True)
    filesAdded = FilesChangeSerializer()
    filesRemoved = FilesChangeSerializer()
    numFiles = FromToIntSerializer()
    sizeBytes = FromToIntSerializer()
    commits = DiffCommitSerializer(many=True, help_text="commits after 'from' up to 'to' (at most 500)")

    def to_representation(self, instance: VersionDiff) -> dict[str, Any]:
        """The core's comparison as it gives it, then the pin each side was read from and the
        commits in between."""
        out = {**instance.changes, "from": instance.v_from, "to": instance.v_to}
        out["readFrom"] = {"from": pin_source(instance.from_pin), "to": pin_source(instance.to_pin)}
        if instance.commits is not None:
            out["commits"] = DiffCommitSerializer(instance.commits, many=True).data
        return out


add_field(DiffSerializer, "from", serializers.IntegerField(), before="to")


class DiffActions:
    """TableViewSet's diff action."""

    @extend_schema(
        summary="What changed between two versions (schema, properties, protocol, files, commits)",
        parameters=[TABLE_ID, DiffQuerySerializer],
        responses={200: DiffSerializer, **_errors(*READ_ERRORS)},
    )
    @action(detail=True, methods=["get"])
    def diff(self, request, id=None):
        """Schema, partitioning, properties and protocol changes, files added and removed, and the commits
        in between. 400 invalid_range when from > to; 404 version_not_found for a missing version."""
        table = self.get_object()
        q = validated_query(DiffQuerySerializer, request)
        return Response(DiffSerializer(versions.diff(table, q["from"], q["to"], sample=q["sample"])).data)
