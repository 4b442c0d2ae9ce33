"""The single sign-on views: to the provider, back from it, and signing out; each reads its
settings through tables.services.access.oidc (the provider's discovery document). They answer
404 while DELTAWEB_OIDC_ISSUER is unset.

Whatever goes wrong on the way (a provider that does not answer, a state this session never
issued, a token refused) ends on the sign-in page with a message saying which, and a log line;
never an error page."""

from __future__ import annotations

import logging
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views import View
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView, OIDCLogoutView

from tables.services.access import oidc
from tables.services.errors import one_line, printable

logger = logging.getLogger("tables.oidc")

# ?sso=<reason> on the sign-in page -> what it tells the user
MESSAGES = {
    "refused": "The identity provider signed you in, but none of your groups gives a role here; ask an administrator.",
    "lost": "This sign-in did not start in this browser session, or it took too long; sign in again. "
    "(If it keeps happening, another application on this host may share the session cookie: see "
    "DELTAWEB_SESSION_COOKIE_NAME in the configuration.)",
    "failed": "The identity provider's answer could not be verified, so you were not signed in; sign in again, "
    "and if it keeps happening, ask an administrator to look at the server's log.",
    "unavailable": "The identity provider cannot be reached or is not configured correctly; "
    "try again later or sign in with a local account.",
}


def failure(reason: str) -> HttpResponse:
    return HttpResponseRedirect(f"{reverse('login')}?sso={reason}")


class _Configured:
    def __init__(self, **kwargs: Any) -> None:
        self.unavailable: Exception | None = None
        if not oidc.enabled():
            View.__init__(self, **kwargs)
            return
        try:
            super().__init__(**kwargs)  # reads the provider's endpoints
        except Exception as exc:  # discovery failed or names no endpoint: said on the page, not a 500
            View.__init__(self, **kwargs)
            self.unavailable = exc

    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        return oidc.setting(attr, *args)

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not oidc.enabled():
            raise Http404("single sign-on is not configured")
        if self.unavailable is not None:
            logger.error("single sign-on is unavailable: %s", one_line(self.unavailable))
            return failure("unavailable")
        return super().dispatch(request, *args, **kwargs)


class SignIn(_Configured, OIDCAuthenticationRequestView):
    pass


class Callback(_Configured, OIDCAuthenticationCallbackView):
    def get(self, request: HttpRequest) -> HttpResponse:
        issued = request.session.get("oidc_states") or {}
        if "code" in request.GET and request.GET.get("state") not in issued:
            # lost (expired, another tab, a cookie another app on this host overwrote), replayed or forged
            logger.warning("single sign-on: the callback's state was not issued to this session")
            return failure("lost")
        try:
            return super().get(request)
        except Exception as exc:  # a token refused (signature, audience, issuer, nonce), the provider down
            logger.warning("single sign-on failed: %s", one_line(exc))
            return failure("failed")

    def login_failure(self) -> HttpResponse:
        if self.request.GET.get("error"):
            logger.warning("single sign-on: the provider answered %s", printable(self.request.GET["error"]))
        return failure(getattr(self.request, "sso_failure", "failed"))


class SignOut(_Configured, OIDCLogoutView):
    pass
