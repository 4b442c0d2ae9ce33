"""Background jobs (syncs and data jobs): one job's status, progress and result
(GET jobs/{id}/), and the job body every answer that starts one carries."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, viewsets
from rest_framework.permissions import IsAuthenticated

from tables.api.base.common import _errors
from tables.api.base.fields import created_by_field, without_staff_detail
from tables.api.base.permissions import CanBrowse
from tables.models import Job, JobKind


class JobSerializer(serializers.ModelSerializer):
    table = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    isTerminal = serializers.BooleanField(source="is_terminal", read_only=True)
    createdBy = created_by_field()
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)
    startedAt = serializers.DateTimeField(source="started_at", read_only=True, allow_null=True)
    finishedAt = serializers.DateTimeField(source="finished_at", read_only=True, allow_null=True)
    result = serializers.JSONField(
        read_only=True,
        allow_null=True,
        help_text="What the job found, by kind (a sync's newCommits and latestVersion; a data job's counts, "
        "columns, total...; a failure's errorCode). A finished data job's rows are paged at `resultsUrl` "
        "(/api/jobs/{id}/results/); the server's directories are never shown.",
    )
    params = serializers.JSONField(read_only=True, help_text="What the job was asked to do (versions, keys).")

    class Meta:
        model = Job
        fields = [
            "id",
            "kind",
            "params",
            "table",
            "status",
            "stage",
            "done",
            "total",
            "error",
            "result",
            "isTerminal",
            "createdBy",
            "createdAt",
            "startedAt",
            "finishedAt",
        ]
        read_only_fields = fields

    def to_representation(self, instance: Job) -> dict[str, Any]:
        data = without_staff_detail(self, super().to_representation(instance))
        data["result"] = public_result(instance, data.get("result"))
        return data


def public_result(job: Job, result: Any) -> Any:
    """A job's result as a client sees it: the worker keeps its files' absolute path on the row
    (the web process pages them from there), a client gets the API address that pages them."""
    if not isinstance(result, dict) or "path" not in result:
        return result
    out = {k: v for k, v in result.items() if k != "path"}
    if job.kind in JobKind.data_kinds():
        out["resultsUrl"] = reverse("api:job-results", args=[job.pk])
    return out


@extend_schema_view(
    retrieve=extend_schema(
        summary="A background job: status, stage, progress (done/total), error, result",
        responses={200: JobSerializer, **_errors(401, 403, 404)},
    )
)
class JobViewSet(mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Background jobs (syncs and data jobs): poll until isTerminal."""

    queryset = Job.objects.select_related("created_by")
    serializer_class = JobSerializer
    permission_classes = [IsAuthenticated, CanBrowse]
    lookup_value_regex = "[0-9]{1,18}"
