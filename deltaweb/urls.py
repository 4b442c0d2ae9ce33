"""URL configuration: the browser UI at /, the REST API at /api/, the admin console.

The error handlers answer the API's JSON error for paths under /api/ and the project's own
pages elsewhere (tables.web.base.ui).
"""

from django.apps import apps
from django.contrib import admin
from django.urls import include, path

from tables.web import ops
from tables.web.account import security, sso
from tables.web.account.security import ThrottledLoginView

urlpatterns = [
    path("healthz", ops.healthz, name="healthz"),
    path("readyz", ops.readyz, name="readyz"),
    path("metrics", ops.metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    # before django.contrib.auth.urls: the sign-in form counts failed attempts
    path("accounts/login/", ThrottledLoginView.as_view(), name="login"),
    # password reset: 404 unless e-mail is configured, throttled, the same answer for any address
    path("accounts/password_reset/", security.PasswordResetView.as_view(), name="password_reset"),
    path("accounts/password_reset/done/", security.PasswordResetDoneView.as_view(), name="password_reset_done"),
    path(
        "accounts/reset/<uidb64>/<token>/",
        security.PasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path("accounts/reset/done/", security.PasswordResetCompleteView.as_view(), name="password_reset_complete"),
    path("accounts/", include("django.contrib.auth.urls")),
    # single sign-on (404 until DELTAWEB_OIDC_ISSUER is set)
    path("oidc/authenticate/", sso.SignIn.as_view(), name="oidc_authentication_init"),
    path("oidc/callback/", sso.Callback.as_view(), name="oidc_callback"),
    path("oidc/logout/", sso.SignOut.as_view(), name="oidc_logout"),
    path("api/", include("tables.api.urls")),
    # the Delta Sharing protocol: recipients' bearer tokens only (tables.api.sharing)
    path("delta-sharing/", include("tables.api.sharing.urls")),
    path("", include("tables.urls")),
]
if apps.is_installed("alerts"):
    # the alerts API before the tables API, which answers every other /api/ path with its 404
    at = next(i for i, p in enumerate(urlpatterns) if str(p.pattern) == "api/")
    urlpatterns[at:at] = [path("api/", include("alerts.api.urls"))]
    urlpatterns.append(path("", include("alerts.urls")))

handler400 = "tables.site.errors.handler400"
handler403 = "tables.site.errors.handler403"
handler404 = "tables.site.errors.handler404"
handler500 = "tables.site.errors.handler500"
