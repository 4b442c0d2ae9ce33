"""URL configuration: the browser UI at /, the REST API at /api/, the admin console."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("tables.api.urls")),
    path("", include("tables.urls")),
]
