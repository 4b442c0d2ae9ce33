"""Routes of the alerts API, mounted at /api/ before the tables API (whose last route answers
every other /api/ path with a 404)."""

from django.urls import path, re_path
from rest_framework.routers import SimpleRouter

from alerts.api import views as api

app_name = "alerts-api"

router = SimpleRouter()
router.register("alerts/webhooks", api.WebhookViewSet, basename="webhook")
router.register("alerts/subscriptions", api.SubscriptionViewSet, basename="subscription")
router.register("alerts/rules", api.RuleViewSet, basename="rule")
router.register("alerts/deliveries", api.DeliveryViewSet, basename="delivery")
router.register("alerts/notifications", api.NotificationViewSet, basename="notification")
router.register("alerts", api.AlertViewSet, basename="alert")

urlpatterns = [
    path("activity/", api.ActivityView.as_view(), name="activity"),
    re_path(r"^alerts/tables/(?P<id>[^/]+)/rules/$", api.RuleSettingsView.as_view(), name="rule-settings"),
    *router.urls,
]
