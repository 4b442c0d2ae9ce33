"""URL configuration: the browser UI at /, the REST API at /api/, the admin console.

The error handlers answer the API's JSON error for paths under /api/ and the project's own
pages elsewhere (tables.ui).
"""

from django.contrib import admin
from django.urls import include, path

from tables.security import ThrottledLoginView

urlpatterns = [
    path("admin/", admin.site.urls),
    # before django.contrib.auth.urls: the sign-in form counts failed attempts
    path("accounts/login/", ThrottledLoginView.as_view(), name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    # the alerts API first: the tables API answers every other /api/ path with its 404
    path("api/", include("alerts.api_urls")),
    path("api/", include("tables.api.urls")),
    path("", include("tables.urls")),
    path("", include("alerts.urls")),
]

handler403 = "tables.ui.handler403"
handler404 = "tables.ui.handler404"
handler500 = "tables.ui.handler500"
