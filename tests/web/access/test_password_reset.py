"""Password reset by e-mail (/accounts/password_reset/): off unless e-mail is configured from
the environment; when on, throttled per client address and per address asked for, and answered
in the same time whether the address has an account or not (the mail goes out in the
background), against a real SMTP server on loopback that takes its time, as a slow relay does."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time

import pytest
from django.core.cache import caches

from tests.alerts.receivers import MailSink, wait_until
from tests.conftest import REPO, free_port

aiosmtpd = pytest.importorskip("aiosmtpd.controller")

RELAY_SECONDS = 1.0


class SlowRelay(MailSink):
    async def handle_DATA(self, server, session, envelope):
        await asyncio.sleep(RELAY_SECONDS)
        return await super().handle_DATA(server, session, envelope)


@pytest.fixture(autouse=True)
def _no_counts(db):  # the counters live in the shared cache, a database table here
    caches["shared"].clear()
    yield
    caches["shared"].clear()


@pytest.fixture
def relay():
    sink = SlowRelay()
    sink.port = free_port()
    controller = aiosmtpd.Controller(sink, hostname="127.0.0.1", port=sink.port)
    controller.start()
    yield sink
    controller.stop()


@pytest.fixture
def mail_on(settings, relay):
    settings.DELTAWEB_PASSWORD_RESET = True
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", relay.port
    settings.DELTAWEB_PASSWORD_RESET_RATE = "3/hour"
    return relay


def _setting(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("EMAIL_", "DELTAWEB_PASSWORD_RESET"))}
    code = "import django; django.setup(); from django.conf import settings; print(settings.DELTAWEB_PASSWORD_RESET)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**clean, "DJANGO_SETTINGS_MODULE": "deltaweb.settings", **env},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


def test_password_reset_is_off_unless_email_is_configured(client, settings, db) -> None:
    assert _setting() == "False"
    assert _setting(EMAIL_HOST="smtp.example.com") == "True"
    assert _setting(EMAIL_HOST="smtp.example.com", DELTAWEB_PASSWORD_RESET="0") == "False"
    settings.DELTAWEB_PASSWORD_RESET = False
    for path in ("/accounts/password_reset/", "/accounts/password_reset/done/", "/accounts/reset/MQ/x-y/"):
        assert client.get(path).status_code == 404, path
        assert client.post(path, {"email": "a@example.com"}).status_code == 404, path
    assert "password_reset" not in client.get("/accounts/login/").content.decode()


@pytest.mark.django_db(transaction=True)
def test_known_and_unknown_addresses_are_answered_alike_and_in_the_same_time(client, mail_on, django_user_model):
    django_user_model.objects.create_user("ana", email="ana@example.com", password="secret-pass-1")

    def timed(email: str) -> tuple[float, object]:
        started = time.monotonic()
        answer = client.post("/accounts/password_reset/", {"email": email})
        return time.monotonic() - started, answer

    client.get("/accounts/password_reset/")  # warm: templates, the first connection
    unknown_time, unknown = timed("nobody@example.com")
    known_time, known = timed("ana@example.com")
    assert unknown.status_code == known.status_code == 302
    assert unknown["Location"] == known["Location"] == "/accounts/password_reset/done/"
    # the relay takes a second per message: the answer does not wait for it
    assert known_time < RELAY_SECONDS / 2 and abs(known_time - unknown_time) < RELAY_SECONDS / 4, (
        known_time,
        unknown_time,
    )
    # the mail still goes out, to the account's address only, with a link that works
    assert wait_until(lambda: mail_on.messages, timeout=30)
    (rcpt, message), *more = mail_on.messages
    assert rcpt == ["ana@example.com"] and not more
    body = message.get_payload(decode=True).decode() if not message.is_multipart() else str(message)
    link = re.search(r"https?://[^/\s]+(/accounts/reset/[^\s]+/)", body)[1]
    assert client.get(link).status_code == 302  # to the set-password form (the token moves to the session)


def test_password_reset_requests_are_throttled(client, mail_on, db) -> None:
    for n in range(3):
        assert client.post("/accounts/password_reset/", {"email": f"someone{n}@example.com"}).status_code == 302
    refused = client.post("/accounts/password_reset/", {"email": "another@example.com"})
    assert refused.status_code == 429 and "Too many password reset requests" in refused.content.decode()
    # the count is per address asked for too: another client cannot mail one person on and on
    other = type(client)(REMOTE_ADDR="10.0.0.9")
    for _ in range(2):
        assert other.post("/accounts/password_reset/", {"email": "someone0@example.com"}).status_code == 302
    assert other.post("/accounts/password_reset/", {"email": "someone0@example.com"}).status_code == 429
