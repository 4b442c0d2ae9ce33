"""The sign-in form, throttled (the middleware every response passes is tables.site.middleware)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse

from tables.services.access.signin_throttle import login_refused_for, record_login


class ThrottledLoginView(LoginView):
    """Django's sign-in form, refusing an IP + username after DELTAWEB_LOGIN_RATE failed
    attempts (e.g. 10/minute) until the window that began with the first failure has passed.

    While refused, even the right password is not checked (answering differently would tell
    a guesser it had found it); the page says so and when to try again. A successful sign-in
    below the limit clears the count.
    """

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        from tables.services.access import oidc
        from tables.web.sso import MESSAGES

        return super().get_context_data(
            sso=oidc.enabled(),
            local_login=settings.DELTAWEB_LOCAL_LOGIN,
            demo=settings.DELTAWEB_DEMO,
            sso_refused=MESSAGES.get(self.request.GET.get("sso", ""), ""),
            **kwargs,
        )

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not settings.DELTAWEB_LOCAL_LOGIN:
            return self.render_to_response(self.get_context_data(), status=403)
        username = request.POST.get("username", "")
        window = login_refused_for(request, username)
        if window is not None:
            # an unbound form: binding it would check the password
            form = self.get_form_class()(request=request, initial={"username": username[:150]})
            wait = f"{window // 60} minute{'s' if window >= 120 else ''}" if window >= 60 else f"{window} seconds"
            message = (
                "Too many failed sign-in attempts for this account from your address. "
                f"Wait {wait} and try again; the password is not checked until then."
            )
            return self.render_to_response(self.get_context_data(form=form, throttled=message), status=429)
        response = super().post(request, *args, **kwargs)
        record_login(request, username, request.user.is_authenticated)
        return response
