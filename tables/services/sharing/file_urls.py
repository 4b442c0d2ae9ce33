"""The URLs a recipient fetches a shared table's files from, valid for a short while.

Object stores: the store's own pre-signed URL (the location's endpoint and credentials,
through the storage boundary). Local tables: deltaweb's own URL under the sharing prefix,
`files/<payload>?sv=1&se=<expiry>&sr=b&sp=r&sig=<signature>`, where the payload names the
table and the file's key, `se` is the expiry (ms since the epoch) and the signature is an
HMAC-SHA256 of both with a key derived from the SECRET_KEY: changing the path, the expiry or
the signature, or waiting past the expiry, makes the URL refused. The query is shaped as a
shared access signature (version, expiry, resource, permission, signature) because that is
how the Delta kernel (the connectors' reader of the delta format) tells a pre-signed URL from
a path of the table: it fetches a URL whose query is an S3, GCS or Azure signature, and
would read any other as a local file. The file is read through the table's storage, which
confines its key to the allowed roots, and served with range requests.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from dataclasses import dataclass

import orjson
from django.conf import settings

from tables.delta.storage.boundary import Storage
from tables.services.sharing.errors import DENIED, MISSING, SharingError

SALT = b"deltaweb.sharing.file-url"


def url_seconds() -> int:
    """How long a file URL stays valid (DELTAWEB_SHARING_URL_SECONDS, 15 minutes by default)."""
    return int(getattr(settings, "DELTAWEB_SHARING_URL_SECONDS", 900))


@dataclass(frozen=True, slots=True)
class FileRef:
    table_id: int
    key: str
    expires_ms: int


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(payload: str) -> str:
    key = hashlib.sha256(SALT + settings.SECRET_KEY.encode()).digest()
    return _b64(hmac.new(key, payload.encode(), hashlib.sha256).digest())


def signed_path(table_id: int, key: str, expires_ms: int) -> str:
    """`files/<payload>?sv=1&se=...&sr=b&sp=r&sig=...`: relative to the sharing prefix."""
    payload = _b64(orjson.dumps([table_id, key]))
    return f"files/{payload}?sv=1&se={expires_ms}&sr=b&sp=r&sig={_mac(f'{payload}.{expires_ms}')}"


def file_url(storage: Storage, table_id: int, key: str, base: str, expires_ms: int) -> str:
    """The URL of one file of a table: pre-signed by its object store, else signed here."""
    if getattr(storage, "remote", False):
        seconds = max(1, (expires_ms - int(time.time() * 1000)) // 1000)
        return storage.presign(key, seconds)  # type: ignore[attr-defined]
    return base + signed_path(table_id, key, expires_ms)


def verify(payload: str, expires: str, signature: str, now_ms: int | None = None) -> FileRef:
    """The file a signed URL names; refused when its signature does not match (a path or an
    expiry altered) or its expiry has passed."""
    if len(payload) > 8192 or len(expires) > 20 or not hmac.compare_digest(_mac(f"{payload}.{expires}"), signature):
        raise SharingError(DENIED, "This file URL is not valid.")
    try:
        table_id, key = orjson.loads(_unb64(payload))
        expires_ms = int(expires)
    except (ValueError, TypeError, orjson.JSONDecodeError):
        raise SharingError(DENIED, "This file URL is not valid.") from None
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    if now_ms >= int(expires_ms):
        raise SharingError(DENIED, "This file URL has expired; query the table again for a new one.")
    if not isinstance(key, str) or not key or key.startswith("/") or ".." in key.split("/"):
        raise SharingError(MISSING, "This file URL names no file of the table.")
    return FileRef(int(table_id), key, int(expires_ms))
