"""The sign-in form and the password reset form, throttled (the middleware every response passes
is tables.site.middleware)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.views import LoginView
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect

from tables.services.access import password_reset
from tables.services.access.signin_throttle import login_refused_for, record_login, record_reset, reset_refused_for


class ThrottledLoginView(LoginView):
    """Django's sign-in form, refusing an IP + username after DELTAWEB_LOGIN_RATE failed
    attempts (e.g. 10/minute) until the window that began with the first failure has passed.

    While refused, even the right password is not checked (answering differently would tell
    a guesser it had found it); the page says so and when to try again. A successful sign-in
    below the limit clears the count.
    """

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        from tables.services.access import oidc
        from tables.web.account.sso import MESSAGES

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
            message = (
                "Too many failed sign-in attempts for this account from your address. "
                f"Wait {_wait(window)} and try again; the password is not checked until then."
            )
            return self.render_to_response(self.get_context_data(form=form, throttled=message), status=429)
        response = super().post(request, *args, **kwargs)
        record_login(request, username, request.user.is_authenticated)
        return response


def _wait(window: int) -> str:
    return f"{window // 60} minute{'s' if window >= 120 else ''}" if window >= 60 else f"{window} seconds"


class _ResetOnly:
    """A view of the password reset: 404 unless it is on (tables.services.access.password_reset)."""

    def dispatch(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not password_reset.enabled():
            raise Http404("password reset is off")
        return super().dispatch(request, *args, **kwargs)


class PasswordResetView(_ResetOnly, auth_views.PasswordResetView):
    """Django's reset form, answered the same at once whether the address has an account or not
    (the mail goes out in the background), and refused (429) after DELTAWEB_PASSWORD_RESET_RATE
    requests from one client address or for one address."""

    def form_valid(self, form) -> HttpResponse:
        email = form.cleaned_data["email"]
        window = reset_refused_for(self.request, email)
        if window is not None:
            form.add_error(
                "email", f"Too many password reset requests from your address or for this one. Wait {_wait(window)}."
            )
            return self.render_to_response(self.get_context_data(form=form), status=429)
        record_reset(self.request, email)
        password_reset.send_later(email, domain=self.request.get_host(), use_https=self.request.is_secure())
        return HttpResponseRedirect(self.get_success_url())


class PasswordResetDoneView(_ResetOnly, auth_views.PasswordResetDoneView):
    pass


class PasswordResetConfirmView(_ResetOnly, auth_views.PasswordResetConfirmView):
    pass


class PasswordResetCompleteView(_ResetOnly, auth_views.PasswordResetCompleteView):
    pass
