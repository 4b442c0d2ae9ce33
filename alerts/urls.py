"""Browser routes of the alerts app (mounted at / by deltaweb.urls)."""

from django.urls import path

from alerts import views

app_name = "alerts"

urlpatterns = [
    path("activity/", views.activity_page, name="activity"),
    path("alerts/settings/", views.settings_page, name="settings"),
    path("alerts/read/", views.mark_read, name="mark_read"),
    path("alerts/rules/", views.rules_page, name="rules"),
    path("alerts/rules/<int:pk>/", views.rule_edit, name="rule_edit"),
]
