"""The alerts REST API (under /api/, before the tables API's catch-all): the activity feed
(conditional requests), alerts, webhooks, subscriptions, rules, deliveries, notifications.
Thin: each view parses the request and calls alerts.services or alerts.activity."""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from alerts import activity, services
from alerts.api import serializers as s
from alerts.models import Alert, CustomRule, Severity
from tables.api.base.common import TABLE_ID, Pagination
from tables.api.base.fields import ErrorSerializer
from tables.api.base.parsers import BoundedJSONParser
from tables.api.base.permissions import CanBrowse
from tables.models import Table
from tables.services.catalog.lookup import table_by_key
from tables.services.errors import printable

FEED_PARAMS = [
    OpenApiParameter("table", str, description="a table's id or slug"),
    OpenApiParameter("kind", str, enum=list(activity.KINDS)),
    OpenApiParameter("severity", str, enum=list(Severity.values), description="alerts at least this severe"),
    OpenApiParameter("operation", str, description="commits and alerts of this operation (any case)"),
    OpenApiParameter(
        "afterVersion",
        {"type": "integer", "format": "int64", "minimum": 0},
        description="only versions after this one (with table: the table's new commits)",
    ),
    OpenApiParameter(
        "limit",
        {"type": "integer", "minimum": 1, "maximum": activity.MAX_LIMIT},
        description="at most this many of each (default 50)",
    ),
]


def errors(*codes: int) -> dict[int, OpenApiResponse]:
    """The error answers an operation documents (body {error: {code, message}})."""
    text = {
        400: "Bad request (invalid parameters or body)",
        401: "Not authenticated",
        403: "Not allowed for this user",
        404: "Not found (or not yours)",
        409: "Conflict with the row's current state",
    }
    return {c: OpenApiResponse(ErrorSerializer, description=text[c]) for c in codes}


READ = (400, 401, 403, 404)
WRITE = (400, 401, 403, 404, 409)


def _table(key: str | None) -> Table | None:
    key = (key or "").strip()
    if not key:
        return None
    table = table_by_key(key)
    if table is None:
        raise NotFound(f"No table with id or slug '{printable(key)}'.")
    return table


class ActivityView(APIView):
    """Recent commits and alerts across tables. Answers If-None-Match with 304 when nothing
    new arrived: poll it cheaply."""

    permission_classes = [IsAuthenticated, CanBrowse]
    parser_classes = [BoundedJSONParser]  # bodies are JSON (documented so)

    @extend_schema(
        parameters=FEED_PARAMS,
        responses={
            200: s.FeedSerializer,
            304: OpenApiResponse(description="Nothing new since the ETag you sent."),
            **errors(*READ),
        },
    )
    def get(self, request):
        f = activity.FeedFilter.parse(request.query_params)
        tag = activity.etag(f)
        if tag in [t.strip() for t in request.headers.get("If-None-Match", "").split(",")]:
            return Response(status=status.HTTP_304_NOT_MODIFIED, headers={"ETag": tag, "Cache-Control": "no-cache"})
        return Response(activity.feed(f), headers={"ETag": tag, "Cache-Control": "no-cache"})


@extend_schema_view(retrieve=extend_schema(responses={200: s.AlertSerializer, **errors(*READ)}))
class AlertViewSet(viewsets.ReadOnlyModelViewSet):
    """Alerts fired on commits, newest first."""

    serializer_class = s.AlertSerializer
    permission_classes = [IsAuthenticated, CanBrowse]
    parser_classes = [BoundedJSONParser]  # bodies are JSON (documented so)
    pagination_class = Pagination
    lookup_value_regex = "[0-9]{1,18}"

    def get_queryset(self):
        qs = Alert.objects.select_related("table")
        if self.action == "list":
            params = {k: v for k, v in self.request.query_params.items() if k not in ("limit", "offset")}
            qs = activity.alerts_of(activity.FeedFilter.parse(params))
        return qs.order_by("-pk")

    @extend_schema(
        parameters=[p for p in FEED_PARAMS if p.name not in ("kind", "limit")],
        responses={200: s.AlertSerializer(many=True), **errors(*READ)},
    )
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)


@extend_schema_view(
    list=extend_schema(responses={200: s.WebhookSerializer(many=True), **errors(*READ)}),
    destroy=extend_schema(responses={204: None, **errors(*READ)}),
)
class WebhookViewSet(mixins.ListModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """Your webhook endpoints. The signing secret is in the creation's answer only."""

    serializer_class = s.WebhookSerializer
    permission_classes = [IsAuthenticated]
    parser_classes = [BoundedJSONParser]  # bodies are JSON (documented so)
    pagination_class = Pagination
    lookup_value_regex = "[0-9]{1,18}"

    def get_queryset(self):
        return services.endpoints_of(self.request.user)

    @extend_schema(request=s.WebhookCreateSerializer, responses={201: s.WebhookCreatedSerializer, **errors(*READ)})
    def create(self, request):
        body = s.WebhookCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        ep, secret = services.create_endpoint(request.user, body.validated_data["name"], body.validated_data["url"])
        data = s.WebhookSerializer(ep).data
        return Response({**data, "secret": secret}, status=status.HTTP_201_CREATED)


@extend_schema_view(
    list=extend_schema(responses={200: s.SubscriptionSerializer(many=True), **errors(*READ)}),
    destroy=extend_schema(responses={204: None, **errors(*READ)}),
)
class SubscriptionViewSet(mixins.ListModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """Your subscriptions: a table (or all), a channel, a minimum severity."""

    serializer_class = s.SubscriptionSerializer
    permission_classes = [IsAuthenticated, CanBrowse]
    parser_classes = [BoundedJSONParser]  # bodies are JSON (documented so)
    pagination_class = Pagination
    lookup_value_regex = "[0-9]{1,18}"

    def get_queryset(self):
        return services.subscriptions_of(self.request.user)

    @extend_schema(request=s.SubscriptionCreateSerializer, responses={201: s.SubscriptionSerializer, **errors(*READ)})
    def create(self, request):
        body = s.SubscriptionCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        v = body.validated_data
        sub = services.subscribe(
            request.user, _table(v.get("table")), v["channel"], v["minSeverity"], v.get("endpoint")
        )
        return Response(s.SubscriptionSerializer(sub).data, status=status.HTTP_201_CREATED)


@extend_schema_view(
    list=extend_schema(responses={200: s.CustomRuleSerializer(many=True), **errors(*READ)}),
    destroy=extend_schema(responses={204: None, **errors(*READ)}),
)
class RuleViewSet(mixins.ListModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """Users' rules (analysts, approvers and staff add and remove them)."""

    serializer_class = s.CustomRuleSerializer
    permission_classes = [IsAuthenticated, CanBrowse]
    parser_classes = [BoundedJSONParser]  # bodies are JSON (documented so)
    pagination_class = Pagination
    lookup_value_regex = "[0-9]{1,18}"
    queryset = CustomRule.objects.select_related("table")

    @extend_schema(request=s.CustomRuleCreateSerializer, responses={201: s.CustomRuleSerializer, **errors(*READ)})
    def create(self, request):
        body = s.CustomRuleCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        v = dict(body.validated_data)
        table = _table(v.pop("table", None))
        rule = services.create_rule(request.user, table=table, **v)
        return Response(s.CustomRuleSerializer(rule).data, status=status.HTTP_201_CREATED)

    def destroy(self, request, *args, **kwargs):
        services.delete_rule(request.user, int(kwargs["pk"]))
        return Response(status=status.HTTP_204_NO_CONTENT)


class WholeBodyPatch(AutoSchema):
    """A PATCH whose body names what it changes (`rule`) is not a partial update: documented with
    its required fields, not as drf-spectacular's all-optional `Patched...` body."""

    def _get_request_for_media_type(self, serializer, direction="request"):
        method, self.method = self.method, "PUT"
        try:
            return super()._get_request_for_media_type(serializer, direction)
        finally:
            self.method = method


class RuleSettingsView(APIView):
    """The built-in rules on one table: on or off, threshold, severity."""

    schema = WholeBodyPatch()

    permission_classes = [IsAuthenticated, CanBrowse]
    parser_classes = [BoundedJSONParser]  # bodies are JSON (documented so)

    @extend_schema(parameters=[TABLE_ID], responses={200: s.RuleSettingSerializer(many=True), **errors(*READ)})
    def get(self, request, id: str):
        return Response(services.rule_settings(_table(id)))

    @extend_schema(
        parameters=[TABLE_ID],
        request=s.RuleSettingUpdateSerializer,
        responses={200: s.RuleSettingSerializer(many=True), **errors(*READ)},
    )
    def patch(self, request, id: str):
        table = _table(id)
        body = s.RuleSettingUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        v = dict(body.validated_data)
        return Response(services.set_rule(request.user, table, v.pop("rule"), **v))


@extend_schema_view(
    list=extend_schema(responses={200: s.DeliverySerializer(many=True), **errors(*READ)}),
    retrieve=extend_schema(responses={200: s.DeliverySerializer, **errors(*READ)}),
)
class DeliveryViewSet(viewsets.ReadOnlyModelViewSet):
    """Deliveries of your subscriptions (staff: all) with their log of attempts."""

    serializer_class = s.DeliverySerializer
    permission_classes = [IsAuthenticated]
    parser_classes = [BoundedJSONParser]  # bodies are JSON (documented so)
    pagination_class = Pagination
    lookup_value_regex = "[0-9]{1,18}"

    def get_queryset(self):
        return services.deliveries_of(self.request.user)

    @extend_schema(request=None, responses={202: s.DeliverySerializer, **errors(*WRITE)})
    @action(detail=True, methods=["post"])
    def redeliver(self, request, pk: str):
        d = services.redeliver(request.user, int(pk))
        return Response(s.DeliverySerializer(d).data, status=status.HTTP_202_ACCEPTED)


class NotificationViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """Your in-app notifications, newest first."""

    serializer_class = s.NotificationSerializer
    permission_classes = [IsAuthenticated]
    parser_classes = [BoundedJSONParser]  # bodies are JSON (documented so)
    pagination_class = Pagination

    def get_queryset(self):
        return services.notifications_of(self.request.user, self.request.query_params.get("unread") == "1")

    @extend_schema(
        parameters=[OpenApiParameter("unread", str, enum=["1"], description="unread ones only")],
        responses={200: s.NotificationSerializer(many=True), **errors(*READ)},
    )
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(request=s.MarkReadSerializer, responses={200: s.MarkedSerializer, **errors(*READ)})
    @action(detail=False, methods=["post"])
    def read(self, request):
        body = s.MarkReadSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return Response({"marked": services.mark_read(request.user, body.validated_data.get("id"))})
