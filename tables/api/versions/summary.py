"""One version of a table, read from its log through the services: its protocol, metadata,
size and commitInfo (GET tables/{id}/versions/{version}/), and its active files."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.response import Response

from tables.api.base.common import READ_ERRORS, TABLE_ID, VERSION, _errors, version_param
from tables.api.base.fields import StoredDateTimeField
from tables.api.versions.reachability import pin_source
from tables.services.versions import read as versions
from tables.services.versions.read import VersionSummary


class ProtocolSerializer(serializers.Serializer):
    minReaderVersion = serializers.IntegerField()
    minWriterVersion = serializers.IntegerField()
    readerFeatures = serializers.ListField(child=serializers.CharField(), required=False)
    writerFeatures = serializers.ListField(child=serializers.CharField(), required=False)


class MetadataSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField(allow_null=True)
    description = serializers.CharField(allow_null=True)
    schema = serializers.JSONField(help_text="The table schema (Delta's struct type as JSON).")
    partitionColumns = serializers.ListField(child=serializers.CharField())
    configuration = serializers.DictField(child=serializers.CharField())
    createdTime = serializers.IntegerField(allow_null=True)


class ChecksumMismatchSerializer(serializers.Serializer):
    field = serializers.CharField(help_text="e.g. numFiles, metadata.schemaString, setTransactions[appId]")
    expected = serializers.JSONField(allow_null=True, help_text="the checksum file's value (bounded)")
    found = serializers.JSONField(allow_null=True, help_text="the log replay's value (bounded)")


# built from a tables.services.versions.read.ChecksumState
class ChecksumStateSerializer(serializers.Serializer):
    state = serializers.ChoiceField(
        ["ok", "mismatch", "unreadable", "none"],
        help_text="the version's checksum file (_delta_log/N.crc) against the log; none: no checksum file checked",
    )
    mismatches = ChecksumMismatchSerializer(many=True)
    error = serializers.CharField(allow_null=True, help_text="why the checksum file could not be decoded")
    full = serializers.BooleanField(allow_null=True, help_text="every field compared (false: the counts only)")
    checkedAt = StoredDateTimeField(source="checked_at", allow_null=True)


class VersionSummarySerializer(serializers.Serializer):
    version = serializers.IntegerField()
    protocol = ProtocolSerializer()
    metadata = MetadataSerializer()
    numFiles = serializers.IntegerField()
    sizeBytes = serializers.IntegerField()
    setTransactions = serializers.ListField(child=serializers.DictField())
    domainMetadata = serializers.ListField(child=serializers.DictField())
    commitInfo = serializers.JSONField(allow_null=True, help_text="The version's commitInfo (from the cache)")
    timestamp = serializers.IntegerField(allow_null=True, help_text="commit timestamp, ms (null before a sync)")
    timestampSource = serializers.CharField(allow_null=True)
    summaryFrom = serializers.ChoiceField(
        ["replay", "checksum", "pin"],
        help_text="replay: the log replayed to the version; checksum: its checksum file, found to agree with the "
        "log; pin: the table lost the version (files vacuumed, log cleaned up) and the pin in readFrom keeps it",
    )
    readFrom = serializers.DictField(
        allow_null=True,
        help_text='{"pin": id, "name": name}: the pin the version (its files too) is read from; null: the table',
    )
    checksum = ChecksumStateSerializer()

    def to_representation(self, instance: VersionSummary) -> dict[str, Any]:
        """The core's summary as it gives it (a managed table's `managed`, `stalenessWarning`
        and `owner` after domainMetadata), then where it was read from, its checksum check and
        its cached commit."""
        return {
            **instance.state,
            "summaryFrom": instance.summary_from,
            "readFrom": pin_source(instance.pin),
            "checksum": ChecksumStateSerializer(instance.checksum).data,
            "commitInfo": instance.commit_info,
            "timestamp": instance.timestamp,
            "timestampSource": instance.timestamp_source,
        }


class DeletionVectorSerializer(serializers.Serializer):
    storageType = serializers.CharField()
    pathOrInlineDv = serializers.CharField()
    offset = serializers.IntegerField(allow_null=True)
    sizeInBytes = serializers.IntegerField()
    cardinality = serializers.IntegerField()
    uniqueId = serializers.CharField()


class FileSerializer(serializers.Serializer):
    path = serializers.CharField(help_text="relative to the table root, URL-decoded")
    size = serializers.IntegerField()
    partitionValues = serializers.DictField(child=serializers.CharField(allow_null=True), allow_null=True)
    modificationTime = serializers.IntegerField()
    deletionVector = DeletionVectorSerializer(allow_null=True)


class VersionActions:
    """TableViewSet's actions on one version: its summary and its active files."""

    @extend_schema(
        summary="A version's protocol, metadata, size and commitInfo",
        parameters=[TABLE_ID, VERSION],
        responses={200: VersionSummarySerializer, **_errors(*READ_ERRORS)},
    )
    @action(detail=True, methods=["get"], url_path=r"versions/(?P<version>[^/]+)", url_name="version")
    def version(self, request, id=None, version=None):
        """Replays the log to the version (cached per version). 404 version_not_found names the versions
        that are available; 422 when the log cannot be read."""
        table = self.get_object()
        return Response(VersionSummarySerializer(versions.version_summary(table, version_param(version))).data)

    @extend_schema(
        summary="The active files of a version (paged with limit/offset)",
        parameters=[TABLE_ID, VERSION],
        responses={200: FileSerializer(many=True), **_errors(*READ_ERRORS)},
    )
    @action(detail=True, methods=["get"], url_path=r"versions/(?P<version>[^/]+)/files", url_name="version-files")
    def version_files(self, request, id=None, version=None):
        """Active files of the version with size, partition values and deletion vector, in log order."""
        table = self.get_object()
        v = version_param(version)
        paginator = self.paginator
        limit, offset = paginator.get_limit(request), paginator.get_offset(request)
        count, rows = versions.version_files(table, v, offset, limit)
        paginator.count, paginator.limit, paginator.offset, paginator.request = count, limit, offset, request
        return paginator.get_paginated_response(rows)
