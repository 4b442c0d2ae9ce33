"""Password reset by e-mail (Django's form and its one-time links), on only where e-mail is
configured (settings.DELTAWEB_PASSWORD_RESET: EMAIL_HOST or EMAIL_BACKEND in the environment)
and local passwords are (DELTAWEB_LOCAL_LOGIN).

The answer never tells whether an address has an account, by its words or by its time: the
request is answered at once, and looking the address up, making the link and sending the mail
happen on a background thread of the process (one at a time, so a flood queues rather than
opening connections). Requests are throttled by the sign-in throttle's counters
(signin_throttle.reset_refused_for)."""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor

from django.conf import settings
from django.contrib.auth.forms import PasswordResetForm
from django.db import connections

logger = logging.getLogger("tables.password_reset")
_sender = ThreadPoolExecutor(max_workers=1, thread_name_prefix="password-reset")


def enabled() -> bool:
    return bool(getattr(settings, "DELTAWEB_PASSWORD_RESET", False)) and bool(
        getattr(settings, "DELTAWEB_LOCAL_LOGIN", True)
    )


def send_later(email: str, *, domain: str, use_https: bool) -> Future:
    """Mail a reset link to the accounts of `email` (none: nothing is sent), in the background."""
    return _sender.submit(_send, email, domain, use_https)


def _send(email: str, domain: str, use_https: bool) -> None:
    try:
        form = PasswordResetForm({"email": email})
        if form.is_valid():
            form.save(domain_override=domain, use_https=use_https)
    except Exception:  # a relay that refuses or does not answer: logged, the user was answered already
        logger.exception("the password reset mail was not sent")
    finally:
        connections.close_all()  # this thread's own database connections
