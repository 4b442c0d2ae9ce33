"""The single sign-on views: to the provider, back from it, and signing out; each reads its
settings through tables.services.access.oidc (the provider's discovery document). They answer
404 while DELTAWEB_OIDC_ISSUER is unset."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from django.views import View
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView, OIDCLogoutView

from tables.services.access import oidc


class _Configured:
    def __init__(self, **kwargs: Any) -> None:
        if oidc.enabled():
            super().__init__(**kwargs)  # reads the provider's endpoints
        else:
            View.__init__(self, **kwargs)

    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        return oidc.setting(attr, *args)

    def dispatch(self, request, *args, **kwargs):
        if not oidc.enabled():
            raise Http404("single sign-on is not configured")
        return super().dispatch(request, *args, **kwargs)


class SignIn(_Configured, OIDCAuthenticationRequestView):
    pass


class Callback(_Configured, OIDCAuthenticationCallbackView):
    pass


class SignOut(_Configured, OIDCLogoutView):
    pass
