"""The alerts REST API (under /api/, before the tables API's catch-all): the activity feed
(conditional requests), alerts, webhooks, subscriptions, rules, deliveries, notifications.
Thin: each view parses the request and calls alerts.services or alerts.activity."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from tables.api.permissions import CanBrowse
from tables.api.views import Pagination
from tables.errors import printable
from tables.lookup import table_by_key
from tables.models import Table

from . import activity, services
from . import serializers as s
from .models import Alert, CustomRule, Severity

FEED_PARAMS = [
    OpenApiParameter("table", str, description="a table's id or slug"),
    OpenApiParameter("kind", str, enum=list(activity.KINDS)),
    OpenApiParameter("severity", str, enum=list(Severity.values), description="alerts at least this severe"),
    OpenApiParameter("operation", str, description="commits and alerts of this operation (any case)"),
    OpenApiParameter("afterVersion", int, description="with table: only versions after this one"),
    OpenApiParameter("limit", int, description="at most this many of each (1..200, default 50)"),
]


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

    @extend_schema(
        parameters=FEED_PARAMS,
        responses={200: s.FeedSerializer, 304: OpenApiResponse(description="Nothing new since the ETag you sent.")},
    )
    def get(self, request):
        f = activity.FeedFilter.parse(request.query_params)
        tag = activity.etag(f)
        if tag in [t.strip() for t in request.headers.get("If-None-Match", "").split(",")]:
            return Response(status=status.HTTP_304_NOT_MODIFIED, headers={"ETag": tag, "Cache-Control": "no-cache"})
        return Response(activity.feed(f), headers={"ETag": tag, "Cache-Control": "no-cache"})


class AlertViewSet(viewsets.ReadOnlyModelViewSet):
    """Alerts fired on commits, newest first."""

    serializer_class = s.AlertSerializer
    permission_classes = [IsAuthenticated, CanBrowse]
    pagination_class = Pagination
    lookup_value_regex = "[0-9]{1,18}"

    def get_queryset(self):
        qs = Alert.objects.select_related("table")
        if self.action == "list":
            f = activity.FeedFilter.parse(self.request.query_params)
            qs = activity._alerts(f)
        return qs.order_by("-pk")

    @extend_schema(parameters=[p for p in FEED_PARAMS if p.name not in ("kind", "limit")])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)


class WebhookViewSet(mixins.ListModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """Your webhook endpoints. The signing secret is in the creation's answer only."""

    serializer_class = s.WebhookSerializer
    permission_classes = [IsAuthenticated]
    lookup_value_regex = "[0-9]{1,18}"

    def get_queryset(self):
        return services.endpoints_of(self.request.user)

    @extend_schema(request=s.WebhookCreateSerializer, responses={201: s.WebhookCreatedSerializer})
    def create(self, request):
        body = s.WebhookCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        ep, secret = services.create_endpoint(request.user, body.validated_data["name"], body.validated_data["url"])
        data = s.WebhookSerializer(ep).data
        return Response({**data, "secret": secret}, status=status.HTTP_201_CREATED)


class SubscriptionViewSet(mixins.ListModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """Your subscriptions: a table (or all), a channel, a minimum severity."""

    serializer_class = s.SubscriptionSerializer
    permission_classes = [IsAuthenticated, CanBrowse]
    lookup_value_regex = "[0-9]{1,18}"

    def get_queryset(self):
        return services.subscriptions_of(self.request.user)

    @extend_schema(request=s.SubscriptionCreateSerializer, responses={201: s.SubscriptionSerializer})
    def create(self, request):
        body = s.SubscriptionCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        v = body.validated_data
        sub = services.subscribe(
            request.user, _table(v.get("table")), v["channel"], v["minSeverity"], v.get("endpoint")
        )
        return Response(s.SubscriptionSerializer(sub).data, status=status.HTTP_201_CREATED)


class RuleViewSet(mixins.ListModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """Users' rules (analysts, approvers and staff add and remove them)."""

    serializer_class = s.CustomRuleSerializer
    permission_classes = [IsAuthenticated, CanBrowse]
    lookup_value_regex = "[0-9]{1,18}"
    queryset = CustomRule.objects.select_related("table")

    @extend_schema(request=s.CustomRuleCreateSerializer, responses={201: s.CustomRuleSerializer})
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


class RuleSettingsView(APIView):
    """The built-in rules on one table: on or off, threshold, severity."""

    permission_classes = [IsAuthenticated, CanBrowse]

    @extend_schema(responses={200: s.RuleSettingSerializer(many=True)})
    def get(self, request, id: str):
        return Response(services.rule_settings(_table(id)))

    @extend_schema(request=s.RuleSettingUpdateSerializer, responses={200: s.RuleSettingSerializer(many=True)})
    def patch(self, request, id: str):
        table = _table(id)
        body = s.RuleSettingUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        v = dict(body.validated_data)
        return Response(services.set_rule(request.user, table, v.pop("rule"), **v))


class DeliveryViewSet(viewsets.ReadOnlyModelViewSet):
    """Deliveries of your subscriptions (staff: all) with their log of attempts."""

    serializer_class = s.DeliverySerializer
    permission_classes = [IsAuthenticated]
    pagination_class = Pagination
    lookup_value_regex = "[0-9]{1,18}"

    def get_queryset(self):
        return services.deliveries_of(self.request.user)

    @extend_schema(request=None, responses={202: s.DeliverySerializer})
    @action(detail=True, methods=["post"])
    def redeliver(self, request, pk: str):
        d = services.redeliver(request.user, int(pk))
        return Response(s.DeliverySerializer(d).data, status=status.HTTP_202_ACCEPTED)


class NotificationViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """Your in-app notifications, newest first."""

    serializer_class = s.NotificationSerializer
    permission_classes = [IsAuthenticated]
    pagination_class = Pagination

    def get_queryset(self):
        return services.notifications_of(self.request.user, self.request.query_params.get("unread") == "1")

    @extend_schema(parameters=[OpenApiParameter("unread", str, enum=["1"], description="unread ones only")])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(request=s.MarkReadSerializer, responses={200: s.MarkedSerializer})
    @action(detail=False, methods=["post"])
    def read(self, request):
        body = s.MarkReadSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return Response({"marked": services.mark_read(request.user, body.validated_data.get("id"))})
