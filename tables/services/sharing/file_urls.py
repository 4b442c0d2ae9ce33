"""The URLs a recipient fetches a shared table's files from, valid for a short while.

Object stores: the store's own pre-signed URL (the location's endpoint and credentials,
through the storage boundary). Local tables: deltaweb's own URL under the sharing prefix,
`files/<payload>?sv=2&se=<expiry>&sr=b&sp=r&sig=<signature>`. The payload names who the URL
was issued to and for what: the recipient, the shared table (its share and table), the range
of versions the answer covered, and the file's key; `se` is the expiry (ms since the epoch).
The signature is an HMAC-SHA256 of both under the file-URL key, a secret of its own
(DELTAWEB_SHARING_URL_KEY, else a random key kept in var/sharing-url.key, mode 0600), never
derived from anything public; `manage.py sharing_rotate_key` replaces the kept key and every
URL signed before stops working. A URL is served only while everything it names still holds:
the signature, an expiry within the stated life (DELTAWEB_SHARING_URL_SECONDS), the recipient
(not revoked nor expired, still given the share), the table still in that share, and the
window still covering the versions it was issued for. A log file is never served.

A pinned version whose files the table lost is served from its pin's kept table (in the pin
store): its grant names the pin (`store`), and such a URL serves only a file of that kept
table (one its log names: a data file or a deletion vector), only while the pin still holds
the version and the window covers it; never a file of the table itself, nor anything else in
the pin store. A grant without a pin serves the table's files only, as before.

The query is shaped as a shared access signature (version, expiry, resource, permission,
signature) because that is how the Delta kernel (the connectors' reader of the delta format)
tells a pre-signed URL from a path of the table: it fetches a URL whose query is an S3, GCS or
Azure signature, and would read any other as a local file. The file is read through the
table's storage, which confines its key to the allowed roots, and served with range requests.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from dataclasses import dataclass
from pathlib import Path

import orjson
from django.conf import settings
from django.utils import timezone

from deltaweb.kept_secrets import kept_secret, rotate_secret
from tables.delta.storage.api import Storage
from tables.models import Recipient, SharedTable, Table
from tables.services.sharing.errors import DENIED, MISSING, SharingError

DOMAIN = b"deltaweb.sharing.file-url.v2\0"
KEY_ENV, KEY_FILE = "DELTAWEB_SHARING_URL_KEY", "sharing-url.key"
SLACK_MS = 60_000  # clocks of the processes that sign and serve may differ a little
NOT_VALID = "This file URL is not valid."


def url_seconds() -> int:
    """How long a file URL stays valid (DELTAWEB_SHARING_URL_SECONDS, 15 minutes by default)."""
    return int(getattr(settings, "DELTAWEB_SHARING_URL_SECONDS", 900))


def _key_dir() -> Path | None:
    found = getattr(settings, "DELTAWEB_SHARING_KEY_DIR", None)
    return Path(found) if found else None


def url_key() -> bytes:
    """The file-URL key as it is now (read each time: a rotation in another process counts)."""
    return kept_secret(KEY_ENV, KEY_FILE, directory=_key_dir()).encode()


def rotate_key() -> None:
    """A new file-URL key: every URL signed with the old one is refused from now on."""
    import os

    if KEY_ENV in os.environ:
        raise SharingError(DENIED, f"The file-URL key comes from {KEY_ENV}: change it there and restart.")
    rotate_secret(KEY_FILE, directory=_key_dir())


@dataclass(frozen=True, slots=True)
class Grant:
    """What a URL is issued for: who, which shared table, which versions."""

    recipient_id: int
    shared_id: int
    table_id: int
    first: int
    last: int
    store: int = 0  # the pin whose kept table the files are served from; 0: the table itself


@dataclass(frozen=True, slots=True)
class FileRef:
    table: Table
    key: str
    expires_ms: int
    location: str = ""  # where the file is served from: the table's location, or a pin's kept table


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, payload: str) -> str:
    return _b64(hmac.new(key, DOMAIN + payload.encode(), hashlib.sha256).digest())


def signed_path(grant: Grant, path: str, expires_ms: int, key: bytes | None = None) -> str:
    """`files/<payload>?sv=2&se=...&sr=b&sp=r&sig=...`: relative to the sharing prefix."""
    g = grant
    fields: list = [g.recipient_id, g.shared_id, g.table_id, g.first, g.last, path]
    if g.store:
        fields.append(g.store)  # a pin's kept table: the signature covers which store serves
    payload = _b64(orjson.dumps(fields))
    sig = _mac(key or url_key(), f"{payload}.{expires_ms}")
    return f"files/{payload}?sv=2&se={expires_ms}&sr=b&sp=r&sig={sig}"


class Signer:
    """Each file's URL of one answer: one grant, one expiry, the key read once."""

    def __init__(self, storage: Storage, grant: Grant, base: str) -> None:
        self.storage, self.grant, self.base = storage, grant, base
        self.expires = int(time.time() * 1000) + url_seconds() * 1000
        self._key = None if storage.remote else url_key()

    def __call__(self, key: str) -> str:
        """The URL of one file of the table: pre-signed by its object store, else signed here."""
        if self._key is None:
            seconds = max(1, (self.expires - int(time.time() * 1000)) // 1000)
            return self.storage.presign(key, seconds)  # type: ignore[attr-defined]
        return self.base + signed_path(self.grant, key, self.expires, self._key)


def _decoded(payload: str) -> tuple[Grant, str]:
    try:
        fields = orjson.loads(_unb64(payload))
        if not isinstance(fields, list) or len(fields) not in (6, 7):
            raise ValueError
        recipient_id, shared_id, table_id, first, last, key, *more = fields
        store = more[0] if more else 0
        numbers = (recipient_id, shared_id, table_id, first, last, store)
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers) or not isinstance(key, str):
            raise ValueError
    except (ValueError, TypeError, orjson.JSONDecodeError):
        raise SharingError(DENIED, NOT_VALID) from None
    return Grant(recipient_id, shared_id, table_id, first, last, store), key


def _still_granted(grant: Grant) -> Table:
    """The table, while the recipient may still read those versions of it through that share."""
    shared = SharedTable.objects.select_related("table").filter(pk=grant.shared_id, table_id=grant.table_id).first()
    recipient = Recipient.objects.filter(pk=grant.recipient_id, revoked_at__isnull=True).first()
    if (
        shared is None
        or recipient is None
        or (recipient.expires_at is not None and recipient.expires_at <= timezone.now())
        or not recipient.shares.filter(pk=shared.share_id).exists()
        or (shared.first_version is not None and grant.first < shared.first_version)
        or (shared.last_version is not None and grant.last > shared.last_version)
    ):
        raise SharingError(DENIED, NOT_VALID)
    return shared.table


def verify(payload: str, expires: str, signature: str, now_ms: int | None = None) -> FileRef:
    """The file a signed URL names, refused unless everything it was issued for still holds
    (the module's docstring)."""
    if len(payload) > 8192 or len(expires) > 20 or len(signature) > 100:
        raise SharingError(DENIED, NOT_VALID)
    if not hmac.compare_digest(_mac(url_key(), f"{payload}.{expires}"), signature):
        raise SharingError(DENIED, NOT_VALID)
    try:
        expires_ms = int(expires)
    except ValueError:
        raise SharingError(DENIED, NOT_VALID) from None
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    if now_ms >= expires_ms:
        raise SharingError(DENIED, "This file URL has expired; query the table again for a new one.")
    if expires_ms > now_ms + url_seconds() * 1000 + SLACK_MS:
        raise SharingError(DENIED, NOT_VALID)  # longer than any URL is issued for
    grant, key = _decoded(payload)
    parts = key.split("/")
    if not key or key.startswith("/") or ".." in parts or "_delta_log" in parts:
        raise SharingError(MISSING, "This file URL names no file of the table.")
    table = _still_granted(grant)
    if not grant.store:
        return FileRef(table, key, expires_ms, table.location)
    return FileRef(table, key, expires_ms, _kept_store(grant, key))


def _kept_store(grant: Grant, key: str) -> str:
    """The kept table a pin grant serves `key` from, refused unless the pin still holds its
    version, the grant covers exactly that version and the key is a file the kept table's log
    names (never another file of the pin store)."""
    from tables.models import Pin, PinState

    pin = Pin.objects.filter(pk=grant.store, table_id=grant.table_id, state__in=PinState.holding()).first()
    if pin is None or not pin.store_location or not grant.first == grant.last == pin.version:
        raise SharingError(DENIED, NOT_VALID)
    if key not in kept_files(pin.pk, pin.store_location):
        raise SharingError(MISSING, "This file URL names no file of the table.")
    return pin.store_location


_KEPT_FILES: dict[tuple[int, str], tuple[float, frozenset[str]]] = {}
KEPT_FILES_SECONDS = 300  # a kept table changes only when held objects are copied into it


def kept_files(pin_id: int, location: str) -> frozenset[str]:
    """The keys of the files a kept table's latest version names (data files and deletion
    vectors), as its storage resolves them; remembered a while per pin (a 10,000-file version
    is fetched file by file)."""
    from tables.delta.snapshot.dv import dv_location
    from tables.delta.snapshot.state import load_snapshot
    from tables.delta.storage.opening import as_storage

    now = time.monotonic()
    known = _KEPT_FILES.get((pin_id, location))
    if known is not None and now - known[0] < KEPT_FILES_SECONDS:
        return known[1]
    storage = as_storage(location)
    snap = load_snapshot(storage)
    keys = {storage.resolve(p) for p in snap.file_paths()}
    for dv in snap.files.column("deletionVector").to_pylist():
        if dv and dv.get("storageType") in ("u", "p"):
            keys.add(storage.resolve(dv_location(dv)))
    if len(_KEPT_FILES) > 256:
        _KEPT_FILES.clear()
    _KEPT_FILES[(pin_id, location)] = (now, frozenset(keys))
    return _KEPT_FILES[(pin_id, location)][1]
