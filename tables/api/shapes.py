"""Response shapes that exist for the OpenAPI schema only (the views build plain dicts):
reachability of versions."""

from __future__ import annotations

from rest_framework import serializers


class MissingFilesSerializer(serializers.Serializer):
    count = serializers.IntegerField(help_text="Data and deletion-vector files of the version that are gone.")
    paths = serializers.ListField(child=serializers.CharField(), help_text="The first 100 of them.")


class RetentionSerializer(serializers.Serializer):
    timestamp = serializers.IntegerField(allow_null=True, help_text="The version's commit timestamp (ms).")
    insideLogRetention = serializers.BooleanField(allow_null=True)
    insideDeletedFileRetention = serializers.BooleanField(allow_null=True)


class PinSourceSerializer(serializers.Serializer):
    pin = serializers.IntegerField(help_text="The pin's id (GET pins/{id}/).")
    name = serializers.CharField(help_text="The pin's name.")


class VersionReachabilitySerializer(serializers.Serializer):
    version = serializers.IntegerField()
    readable = serializers.BooleanField(
        help_text="Its state can be rebuilt from the log and all its files exist, or a pin keeps it (readFrom)."
    )
    restorable = serializers.BooleanField(help_text="Readable, or only files a restore would not add are missing.")
    recoverable = serializers.BooleanField(
        allow_null=True,
        help_text="Unreadable, and readable again once the noncurrent versions of its gone objects in the table's "
        "versioned bucket are copied back (a restore can recover them first). null when not asked: not an object "
        "store with versioning on, or every version is readable.",
    )
    reason = serializers.ChoiceField(
        choices=["log_expired", "not_reproducible", "files_missing", "beyond_retention", "checkpoint_mismatch"],
        allow_null=True,
    )
    missingFiles = MissingFilesSerializer()
    retention = RetentionSerializer()
    readFrom = PinSourceSerializer(
        allow_null=True,
        help_text="The pin a version the table lost (files vacuumed, log cleaned up) is read from: it counts as "
        "readable then, reason and missingFiles still saying what the table lost. null while the table gives it.",
    )


class VacuumForecastSerializer(serializers.Serializer):
    retentionMs = serializers.IntegerField(help_text="The retention of the forecast VACUUM, in ms.")
    count = serializers.IntegerField(help_text="How many readable versions it would make unreadable.")
    breaksVersions = serializers.ListField(
        child=serializers.IntegerField(), help_text="Those versions, newest first (at most 1000)."
    )
    truncated = serializers.BooleanField(help_text="More versions break than are listed.")


class ReachabilityPageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = VersionReachabilitySerializer(many=True)
    latestVersion = serializers.IntegerField()
    logRetentionMs = serializers.IntegerField()
    deletedFileRetentionMs = serializers.IntegerField()
    pinnedVersions = serializers.ListField(
        child=serializers.IntegerField(), help_text="Versions a pin keeps in the pin store (GET tables/{id}/pins/)."
    )
    vacuumForecast = VacuumForecastSerializer(
        required=False, help_text="Only with the vacuumRetention parameter: what a VACUUM now would break."
    )
