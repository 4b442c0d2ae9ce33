"""REST API for the schema's timeline: the schema as of a version (with its CREATE TABLE),
every column's history, and two versions' schemas compared.

Each view checks permissions (signed in, CanBrowse), parses its query and calls one function
of tables.services.versions.schema_timeline; the serializers below build the answers from the
service's data (the core's answers, the commits' cached times, the pin a version is read from)
and describe them for the OpenAPI schema. Errors are rendered by
tables.api.base.errors.exception_handler: 404 version_not_found outside the log, 400
invalid_range when from > to, 422 when the log cannot be read.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from tables.api.base.common import TABLE_ID, _errors, table_or_404
from tables.api.base.fields import add_field
from tables.api.base.params import validated_query
from tables.api.base.permissions import CanBrowse
from tables.api.versions.diff import FromToListSerializer, RangeQuerySerializer
from tables.api.versions.reachability import pin_source
from tables.models import Table
from tables.services.catalog.lookup import INT64_MAX
from tables.services.versions import schema_timeline as service

READ_ERRORS = (400, 401, 403, 404, 422)
MAPPING_MODES = ["none", "name", "id"]
EVENT_KINDS = ["added", "renamed", "type_widened", "type_changed", "nullability_changed", "dropped"]
TABLE_EVENT_KINDS = ["partitioning_changed", "column_mapping_changed", "table_replaced"]


def names(**kwargs) -> serializers.ListField:
    """A field path: its names (element, key, value through containers)."""
    return serializers.ListField(child=serializers.CharField(allow_blank=True), **kwargs)


# --- queries ---------------------------------------------------------------------------------


class SchemaQuerySerializer(serializers.Serializer):
    version = serializers.IntegerField(
        required=False, min_value=0, max_value=INT64_MAX, help_text="The version (the latest when left out)."
    )


# --- answers ---------------------------------------------------------------------------------


class SchemaCommitSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    timestamp = serializers.IntegerField(allow_null=True, help_text="Effective commit timestamp, ms.")
    timestampSource = serializers.CharField(allow_null=True, help_text="ict, file, or commitInfo (before a sync)")
    inCommitTimestamp = serializers.IntegerField(allow_null=True)
    operation = serializers.CharField(allow_null=True, allow_blank=True)
    userName = serializers.CharField(allow_null=True, allow_blank=True)
    userId = serializers.CharField(allow_null=True, allow_blank=True)
    engineInfo = serializers.CharField(allow_null=True, allow_blank=True)

    def to_representation(self, instance: service.SchemaCommit) -> dict[str, Any]:
        """The core's commit as it gives it, with its effective timestamp and that one's source."""
        return {**instance.info, "timestamp": instance.timestamp, "timestampSource": instance.timestamp_source}


class SchemaColumnSerializer(serializers.Serializer):
    path = names()
    name = serializers.CharField(allow_blank=True)
    depth = serializers.IntegerField(help_text="0 for a top-level column.")
    type = serializers.CharField(help_text="Spark's simple string: long, decimal(10,2), array<int>, struct<a:int>.")
    nullable = serializers.BooleanField()
    physicalName = serializers.CharField(allow_null=True, help_text="Column mapping's physical name.")
    fieldId = serializers.IntegerField(allow_null=True, help_text="Column mapping's id.")
    comment = serializers.CharField(allow_null=True, allow_blank=True)
    partition = serializers.BooleanField()


class SchemaAsOfSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    schemaVersion = serializers.IntegerField(help_text="The version whose metaData is in force at `version`.")
    commit = SchemaCommitSerializer(allow_null=True, help_text="The commit of schemaVersion.")
    columnMapping = serializers.ChoiceField(choices=MAPPING_MODES)
    columns = SchemaColumnSerializer(many=True, help_text="Nested fields too, depth first (at most 10,000).")
    columnsTruncated = serializers.BooleanField()
    partitionColumns = serializers.ListField(child=serializers.CharField(allow_blank=True))
    properties = serializers.DictField(child=serializers.CharField(allow_blank=True))
    ddl = serializers.CharField(help_text="CREATE TABLE ... USING delta (and ADD CONSTRAINT) in Spark SQL.")
    earliestVersion = serializers.IntegerField()
    latestVersion = serializers.IntegerField()
    pinned = serializers.CharField(
        required=False, help_text="The pin whose kept copy answered: the log no longer holds the version."
    )

    def to_representation(self, instance: service.SchemaAsOf) -> dict[str, Any]:
        """The core's schema as it gives it with the commit that set it; then, for a version a
        pin keeps, the pin and the log's versions, else the log's versions and readFrom null."""
        out = dict(instance.schema)
        out["commit"] = None if instance.commit is None else SchemaCommitSerializer(instance.commit).data
        if instance.pin is not None:
            out["pinned"] = instance.pin.name
            out["readFrom"] = pin_source(instance.pin)
            out["latestVersion"], out["earliestVersion"] = instance.latest, instance.earliest
        else:
            out["latestVersion"], out["earliestVersion"] = instance.latest, instance.earliest
            out["readFrom"] = None
        return out


class SchemaChangeEventSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=EVENT_KINDS)
    path = names(help_text="The field's names (element, key, value in containers).")
    type = serializers.CharField(required=False, help_text="added, dropped: the field's type.")
    nullable = serializers.BooleanField(required=False, help_text="added, dropped.")
    fromName = serializers.CharField(required=False, allow_blank=True, help_text="renamed.")
    toName = serializers.CharField(required=False, allow_blank=True, help_text="renamed.")
    fromPath = names(required=False, help_text="renamed: the path before.")
    fieldPath = serializers.CharField(
        required=False, allow_blank=True, help_text="Position inside the field: '', element, key, value, a.b."
    )
    fromType = serializers.CharField(required=False, help_text="type_widened, type_changed.")
    toType = serializers.CharField(required=False)
    recorded = serializers.BooleanField(required=False, help_text="delta.typeChanges records the widening.")
    to = serializers.BooleanField(required=False, help_text="nullability_changed: nullable after.")


add_field(
    SchemaChangeEventSerializer,
    "from",
    serializers.BooleanField(required=False, help_text="nullability_changed: nullable before."),
    before="to",
)


class ColumnEventSerializer(SchemaChangeEventSerializer):
    version = serializers.IntegerField()
    atLogStart = serializers.BooleanField(
        required=False, help_text="At the log's earliest version (its older commits are gone): may be older."
    )


class SchemaColumnHistorySerializer(serializers.Serializer):
    key = serializers.CharField(help_text="id:N (column mapping), physical:..., or name:... (#2 for a second one).")
    name = serializers.CharField(allow_blank=True)
    path = names()
    type = serializers.CharField(allow_null=True)
    nullable = serializers.BooleanField(allow_null=True)
    added = serializers.IntegerField(help_text="The version it appeared at.")
    atLogStart = serializers.BooleanField(allow_null=True)
    dropped = serializers.IntegerField(allow_null=True)
    events = ColumnEventSerializer(many=True)


class TableSchemaEventSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=TABLE_EVENT_KINDS)
    to = serializers.JSONField(required=False)


add_field(TableSchemaEventSerializer, "from", serializers.JSONField(required=False), before="to")


class SchemaTimelineSerializer(serializers.Serializer):
    earliestVersion = serializers.IntegerField()
    latestVersion = serializers.IntegerField()
    columnMapping = serializers.ChoiceField(choices=MAPPING_MODES)
    columns = SchemaColumnHistorySerializer(many=True, help_text="Every column ever seen, in order of appearance.")
    tableEvents = TableSchemaEventSerializer(many=True)
    commits = SchemaCommitSerializer(many=True, help_text="The commits the events happened in.")
    truncated = serializers.BooleanField(help_text="More than 50,000 events: the later ones are left out.")

    def to_representation(self, instance: service.Timeline) -> dict[str, Any]:
        """The core's timeline as it gives it, its commits with their effective timestamps."""
        return {**instance.answer, "commits": SchemaCommitSerializer(instance.commits, many=True).data}


class FromToModeSerializer(serializers.Serializer):
    to = serializers.ChoiceField(choices=MAPPING_MODES)


add_field(FromToModeSerializer, "from", serializers.ChoiceField(choices=MAPPING_MODES), before="to")


class SchemaDiffSerializer(serializers.Serializer):
    to = serializers.IntegerField()
    fromSchemaVersion = serializers.IntegerField()
    toSchemaVersion = serializers.IntegerField()
    matchedBy = serializers.ChoiceField(choices=["columnMapping", "name"])
    changes = SchemaChangeEventSerializer(many=True)
    partitionColumns = FromToListSerializer()
    columnMapping = FromToModeSerializer()

    def to_representation(self, instance: service.SchemaDiff) -> dict[str, Any]:
        """The core's comparison as it gives it, then the pin each side was read from."""
        return {
            **instance.diff,
            "readFrom": {"from": pin_source(instance.from_pin), "to": pin_source(instance.to_pin)},
        }


add_field(SchemaDiffSerializer, "from", serializers.IntegerField(), before="to")


# --- views -----------------------------------------------------------------------------------


class _SchemaView(APIView):
    permission_classes = [IsAuthenticated, CanBrowse]

    def table(self, key: str) -> Table:
        return table_or_404(key)


class TableSchemaView(_SchemaView):
    @extend_schema(
        summary="The schema as of a version, with the CREATE TABLE that recreates it",
        parameters=[TABLE_ID, SchemaQuerySerializer],
        responses={200: SchemaAsOfSerializer, **_errors(*READ_ERRORS)},
    )
    def get(self, request, id: str):
        """Columns (nested fields too), partitioning, properties, the commit that set them, and
        `ddl`: Spark SQL's CREATE TABLE ... USING delta. 404 version_not_found outside the log."""
        table = self.table(id)
        q = validated_query(SchemaQuerySerializer, request)
        return Response(SchemaAsOfSerializer(service.schema_as_of(table, q.get("version"))).data)


class SchemaTimelineView(_SchemaView):
    @extend_schema(
        summary="Every column's history: added, renamed, widened, retyped, nullability, dropped",
        parameters=[TABLE_ID],
        responses={200: SchemaTimelineSerializer, **_errors(*READ_ERRORS)},
    )
    def get(self, request, id: str):
        """Read from the log's metaData actions. Renames are told by column mapping's id (else a
        new name is a drop and an add); widenings by the protocol's rules or delta.typeChanges."""
        return Response(SchemaTimelineSerializer(service.schema_timeline(self.table(id))).data)


class SchemaDiffView(_SchemaView):
    @extend_schema(
        summary="Two versions' schemas compared, renames named as renames",
        parameters=[TABLE_ID, RangeQuerySerializer],
        responses={200: SchemaDiffSerializer, **_errors(*READ_ERRORS)},
    )
    def get(self, request, id: str):
        """Columns matched by column mapping's id (or physical name) when mapping is on at both
        versions, else by name. 400 invalid_range when from > to."""
        table = self.table(id)
        q = validated_query(RangeQuerySerializer, request)
        return Response(SchemaDiffSerializer(service.schema_diff(table, q["from"], q["to"])).data)
