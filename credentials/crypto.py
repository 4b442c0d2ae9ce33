"""Encryption of stored secrets at rest: Fernet (AES-128-CBC with HMAC-SHA256) with a key from
the environment (DELTAWEB_CREDENTIALS_KEY), never from the database or the settings file.

Generate a key with
`python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`."""

from __future__ import annotations

import os

import orjson
from cryptography.fernet import Fernet, InvalidToken

KEY_ENV = "DELTAWEB_CREDENTIALS_KEY"


class CredentialsKeyError(Exception):
    """The encryption key is missing, malformed, or not the one the secrets were saved with."""


def _fernet() -> Fernet:
    key = os.environ.get(KEY_ENV, "").strip()
    if not key:
        raise CredentialsKeyError(
            f"{KEY_ENV} is not set: stored credentials are encrypted with a key from the environment; "
            "set it to a Fernet key (see the README) and restart"
        )
    try:
        return Fernet(key.encode())
    except (ValueError, TypeError):
        raise CredentialsKeyError(f"{KEY_ENV} is not a valid Fernet key (32 url-safe base64-encoded bytes)") from None


def encrypt(secrets: dict[str, str]) -> str:
    """The secrets as one token (empty when there are none: nothing to protect, no key needed)."""
    if not secrets:
        return ""
    return _fernet().encrypt(orjson.dumps(secrets, option=orjson.OPT_SORT_KEYS)).decode()


def decrypt(token: str) -> dict[str, str]:
    """The secrets of a token `encrypt` made; CredentialsKeyError when the key does not open it."""
    if not token:
        return {}
    try:
        return orjson.loads(_fernet().decrypt(token.encode()))
    except InvalidToken:
        raise CredentialsKeyError(
            f"stored secrets cannot be decrypted: {KEY_ENV} is not the key they were saved with"
        ) from None
