"""Which versions of a table can still be read or restored, and why not
(GET tables/{id}/reachability/), with a VACUUM forecast."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.response import Response

from tables.api.base.common import READ_ERRORS, TABLE_ID, Pagination, _errors
from tables.models import Pin
from tables.services.pins.queries import pins_by_version
from tables.services.versions.pinned import with_pins
from tables.services.versions.reachability import FORECAST_LISTED, parse_retention, table_reachability


class MissingFilesSerializer(serializers.Serializer):
    count = serializers.IntegerField(help_text="Data and deletion-vector files of the version that are gone.")
    paths = serializers.ListField(child=serializers.CharField(), help_text="The first 100 of them.")


class RetentionSerializer(serializers.Serializer):
    timestamp = serializers.IntegerField(allow_null=True, help_text="The version's commit timestamp (ms).")
    insideLogRetention = serializers.BooleanField(allow_null=True)
    insideDeletedFileRetention = serializers.BooleanField(allow_null=True)


# built from a Pin: where a version the table lost is read from (readFrom in every answer)
class PinSourceSerializer(serializers.Serializer):
    pin = serializers.IntegerField(source="pk", help_text="The pin's id (GET pins/{id}/).")
    name = serializers.CharField(help_text="The pin's name.")


def pin_source(pin: Pin | None) -> dict[str, Any] | None:
    """An answer's `readFrom`: the pin a version is read from, or None (the table)."""
    return None if pin is None else dict(PinSourceSerializer(pin).data)


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

    def to_representation(self, instance: dict[str, Any]) -> dict[str, Any]:
        """The core's entry as it gives it (tables.services.versions.pinned.mark_pin), then the
        pin it is read from."""
        out = {k: v for k, v in instance.items() if k != "pin"}
        out["readFrom"] = pin_source(instance.get("pin"))
        return out


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


VACUUM_RETENTION = OpenApiParameter(
    "vacuumRetention",
    str,
    OpenApiParameter.QUERY,
    required=False,
    description='Forecast a VACUUM run now with this retention ("7 days", "interval 1 week", "24 hours"): '
    "adds vacuumForecast with the readable versions it would make unreadable. 400 invalid when unreadable.",
)
# limit/offset of actions that page (list actions get them from Pagination's schema)
PAGE_PARAMS = [
    OpenApiParameter(p["name"], p["schema"], OpenApiParameter.QUERY, description=p["description"])
    for p in Pagination().get_schema_operation_parameters(None)
]


class ReachabilityActions:
    """TableViewSet's reachability action."""

    @extend_schema(
        summary="Which versions can still be read or restored, and why not (newest first, paged)",
        parameters=[TABLE_ID, *PAGE_PARAMS, VACUUM_RETENTION],
        responses={200: ReachabilityPageSerializer, **_errors(*READ_ERRORS)},
    )
    @action(detail=True, methods=["get"])
    def reachability(self, request, id=None):
        """For every version: readable (log and files present), restorable (readable, or missing only
        files a restore would not add), recoverable (in a versioned bucket: unreadable, and readable
        once the noncurrent versions of its gone objects are back), the reason when not (log_expired, not_reproducible,
        files_missing with the count and the first 100 paths, beyond_retention) and the retention
        windows (delta.logRetentionDuration, delta.deletedFileRetentionDuration; Delta's defaults).
        With `vacuumRetention`, also `vacuumForecast`: the readable versions a VACUUM run now with
        that retention would make unreadable (400 invalid when the retention cannot be read)."""
        table = self.get_object()
        raw = request.query_params.get("vacuumRetention")
        retention = None if raw is None else parse_retention(raw)
        # a version a pin keeps counts as readable, its entry saying which pin it is read from
        data = with_pins(table, table_reachability(table, vacuum_retention=retention))
        page = self.paginate_queryset(data)  # newest first, each page's entries built alone
        body = self.get_paginated_response(VersionReachabilitySerializer(page, many=True).data).data
        body.update({k: data.head[k] for k in ("latestVersion", "logRetentionMs", "deletedFileRetentionMs")})
        # the versions pins keep readable through any VACUUM and log cleanup (GET tables/{id}/pins/)
        body["pinnedVersions"] = sorted(pins_by_version(table))
        if retention is not None:
            body["vacuumForecast"] = data.forecast(FORECAST_LISTED)
        return Response(body)
