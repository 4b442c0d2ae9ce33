"""The protocol's endpoints: each authenticates the recipient's bearer token, calls the use
case, and answers JSON, NDJSON or a file's bytes, with `Delta-Table-Version` and the
capabilities header; any refusal is `{"errorCode", "message"}` with the protocol's status."""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import orjson
from django.conf import settings
from django.http import FileResponse, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from tables.delta.errors import DeltaError
from tables.delta.storage.api import Capability
from tables.delta.storage.opening import as_storage
from tables.models import Recipient, SharedTable
from tables.services.errors import ServiceError
from tables.services.sharing import answers, catalog, file_urls, records
from tables.services.sharing.errors import INTERNAL, INVALID, MISSING, SharingError, from_core
from tables.services.sharing.recipients import authenticate
from tables.services.sharing.window import SharedView, capabilities

log = logging.getLogger(__name__)
NDJSON = "application/x-ndjson; charset=utf-8"
CAPS = "delta-sharing-capabilities"
CHUNK = 4 << 20  # a file's bytes are streamed in pieces of this size
# what a server without sendfile (runserver, the development server) reads a file in: Django's
# 4 KiB default makes a 100 MB file 25,000 reads and writes
FILE_BLOCK = 1 << 20
MAX_BODY = 1 << 20
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def endpoint(request: HttpRequest) -> str:
    """The sharing endpoint as recipients reach it (DELTAWEB_SHARING_URL behind a proxy that
    ends TLS), else as this request reached it: file URLs of local tables are built on it."""
    return getattr(settings, "DELTAWEB_SHARING_URL", "") or request.build_absolute_uri("/delta-sharing/")


def error_response(exc: SharingError) -> JsonResponse:
    response = JsonResponse(exc.body(), status=exc.status)
    if exc.extra.get("retry_after"):
        response["Retry-After"] = str(exc.extra["retry_after"])
    return response


def protocol_view(methods: tuple[str, ...]) -> Callable:
    """A recipient's endpoint: the method checked, the bearer token authenticated, any refusal
    (and any unexpected failure, logged) answered in the protocol's error shape."""

    def wrap(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @csrf_exempt
        @functools.wraps(view)
        def inner(request: HttpRequest, **kwargs: Any) -> HttpResponse:
            if request.method not in methods:
                response = error_response(SharingError(INVALID, f"{request.method} is not allowed here."))
                response.status_code = 405
                response["Allow"] = ", ".join(methods)
                return response
            try:
                recipient = authenticate(request)
                return view(request, recipient, **kwargs)
            except SharingError as exc:
                return error_response(exc)
            except (DeltaError, ServiceError) as exc:
                return error_response(from_core(exc))
            except Exception:
                log.exception("delta sharing: %s %s failed", request.method, request.path[:200])
                return error_response(SharingError(INTERNAL, "The server failed to answer this request."))

        return inner

    return wrap


def _listing(request: HttpRequest) -> dict[str, Any]:
    return {"max_results": request.GET.get("maxResults"), "page_token": request.GET.get("pageToken")}


@protocol_view(("GET",))
def list_shares(request: HttpRequest, recipient: Recipient) -> HttpResponse:
    return JsonResponse(catalog.list_shares(recipient, **_listing(request)))


@protocol_view(("GET",))
def get_share(request: HttpRequest, recipient: Recipient, share: str) -> HttpResponse:
    return JsonResponse(catalog.get_share(recipient, share))


@protocol_view(("GET",))
def list_schemas(request: HttpRequest, recipient: Recipient, share: str) -> HttpResponse:
    return JsonResponse(catalog.list_schemas(recipient, share, **_listing(request)))


@protocol_view(("GET",))
def list_tables(request: HttpRequest, recipient: Recipient, share: str, schema: str) -> HttpResponse:
    return JsonResponse(catalog.list_tables(recipient, share, schema, **_listing(request)))


@protocol_view(("GET",))
def list_all_tables(request: HttpRequest, recipient: Recipient, share: str) -> HttpResponse:
    return JsonResponse(catalog.list_all_tables(recipient, share, **_listing(request)))


def _recorded(
    recipient: Recipient, shared: SharedTable, kind: str, run: Callable[[], answers.Answer | int]
) -> answers.Answer | int:
    """Runs one table request and records it, a refusal with its error code too."""
    try:
        result = run()
    except (SharingError, DeltaError, ServiceError) as exc:
        code = exc.code if isinstance(exc, ServiceError) else from_core(exc).code
        records.record(recipient, shared, kind, refused=code)
        raise
    if isinstance(result, int):
        records.record(recipient, shared, kind, version=result)
    else:
        records.record(recipient, shared, kind, result.version, result.start, result.end, result.files, result.bytes)
    return result


def _headers(response: HttpResponse, answer: answers.Answer) -> HttpResponse:
    response["Delta-Table-Version"] = str(answer.version)
    response[CAPS] = f"responseformat={answer.format}"
    if answer.rule:
        # which version a timestamp picked and why (deltaweb's TIMESTAMP AS OF rule)
        response["Deltaweb-Timestamp-Rule"] = answer.rule.encode("ascii", "replace").decode()[:500]
    return response


@protocol_view(("GET", "HEAD"))
def table_version(request: HttpRequest, recipient: Recipient, share: str, schema: str, table: str) -> HttpResponse:
    shared = catalog.shared_table(recipient, share, schema, table)
    view = SharedView(shared, recipient.pk)
    starting = request.GET.get("startingTimestamp")

    def run() -> int:
        return view.at_or_after(starting).version if starting else view.latest

    version = _recorded(recipient, shared, "version", run)
    response = HttpResponse(b"", content_type="application/json; charset=utf-8")
    response["Delta-Table-Version"] = str(version)
    return response


@protocol_view(("GET",))
def table_metadata(request: HttpRequest, recipient: Recipient, share: str, schema: str, table: str) -> HttpResponse:
    shared = catalog.shared_table(recipient, share, schema, table)
    caps = capabilities(request.headers.get(CAPS))
    answer = _recorded(recipient, shared, "metadata", lambda: answers.metadata(SharedView(shared, recipient.pk), caps))
    return _headers(HttpResponse(answer.ndjson(), content_type=NDJSON), answer)


def _json_body(request: HttpRequest) -> dict[str, Any]:
    raw = request.body[: MAX_BODY + 1]
    if len(raw) > MAX_BODY:
        raise SharingError(INVALID, "The request body is too large.")
    if not raw.strip():
        return {}
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise SharingError(INVALID, "The request body is not JSON.") from None
    if not isinstance(body, dict):
        raise SharingError(INVALID, "The request body must be a JSON object.")
    return body


@protocol_view(("POST",))
def table_query(request: HttpRequest, recipient: Recipient, share: str, schema: str, table: str) -> HttpResponse:
    shared = catalog.shared_table(recipient, share, schema, table)
    caps = capabilities(request.headers.get(CAPS))
    base = endpoint(request)

    def run() -> answers.Answer:
        return answers.query(SharedView(shared, recipient.pk), _json_body(request), caps, base)

    answer = _recorded(recipient, shared, "query", run)
    return _headers(HttpResponse(answer.ndjson(), content_type=NDJSON), answer)


@protocol_view(("GET",))
def table_changes(request: HttpRequest, recipient: Recipient, share: str, schema: str, table: str) -> HttpResponse:
    shared = catalog.shared_table(recipient, share, schema, table)
    caps = capabilities(request.headers.get(CAPS))
    base = endpoint(request)

    def run() -> answers.Answer:
        if not shared.change_data:
            raise SharingError(INVALID, f"The change data of {shared} is not shared.")
        view = SharedView(shared, recipient.pk)
        start, end, rule = answers.change_range(view, request.GET.dict())
        answer = answers.changes(view, start, end, caps, base)
        answer.rule = rule
        return answer

    answer = _recorded(recipient, shared, "changes", run)
    return _headers(HttpResponse(answer.ndjson(), content_type=NDJSON), answer)


def _byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """(start, end exclusive) of a single `Range: bytes=a-b`; None for the whole file."""
    m = _RANGE.match((header or "").strip())
    if not header or m is None or (not m[1] and not m[2]):
        return None
    if not m[1]:  # the last n bytes
        return max(0, size - int(m[2][:19])), size
    start = int(m[1][:19])
    end = min(size, int(m[2][:19]) + 1) if m[2] else size
    if start >= size or end <= start:
        raise SharingError(INVALID, "The requested range is not satisfiable.")
    return start, end


@csrf_exempt
def shared_file(request: HttpRequest, payload: str) -> HttpResponse:
    """A local table's file through a URL this server signed: no bearer token (the signature
    and its expiry are the grant), ranges answered with 206."""
    if request.method not in ("GET", "HEAD"):
        return error_response(SharingError(INVALID, f"{request.method} is not allowed here."))
    try:
        # a recipient, share, table or window no longer granting it stops its URLs at once
        ref = file_urls.verify(payload, request.GET.get("se", ""), request.GET.get("sig", ""))
        # the table's storage, or the pin's kept table the grant names; the storage boundary
        # confines the key to the roots
        store = as_storage(ref.location or ref.table.location)
        size = store.head(ref.key).size
        span = _byte_range(request.headers.get("Range"), size)
    except SharingError as exc:
        return error_response(exc)
    except FileNotFoundError:
        return error_response(SharingError(MISSING, "The file is gone from the table's storage."))
    except DeltaError as exc:
        return error_response(from_core(exc))
    start, end = span or (0, size)
    if request.method == "HEAD":
        response: HttpResponse = HttpResponse(b"", status=206 if span else 200)
    elif Capability.OPEN_FILE in store.capabilities:
        # a local file, whole or a range: a real file object positioned at the range's start,
        # which gunicorn sends with sendfile (Content-Length bytes from there), one copy in the
        # kernel instead of reads and writes through Python; pyarrow over fsspec (the parquet
        # format) reads each file as a few ranges of tens of MB
        try:
            response = FileResponse(FileSpan(store.open_file(ref.key), start, end), status=206 if span else 200)
        except FileNotFoundError:
            return error_response(SharingError(MISSING, "The file is gone from the table's storage."))
        response.block_size = FILE_BLOCK
    else:
        response = StreamingHttpResponse(_pieces(store, ref.key, start, end), status=206 if span else 200)
    response["Content-Type"] = "application/octet-stream"
    response["Content-Length"] = str(end - start)
    response["Accept-Ranges"] = "bytes"
    if span:
        response["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
    return response


class FileSpan:
    """Bytes [start, end) of an open file as a file object: `fileno()` and the file's position
    for a server's sendfile (gunicorn sends Content-Length bytes from the position), `read()`
    stopping at `end` for any other server. Without seek and tell, so Django counts no length
    of its own; the view sets Content-Length."""

    def __init__(self, fh: BinaryIO, start: int, end: int) -> None:
        fh.seek(start)
        self._fh, self._left = fh, end - start

    def fileno(self) -> int:
        return self._fh.fileno()

    def read(self, n: int = -1) -> bytes:
        want = self._left if n is None or n < 0 else min(n, self._left)
        data = self._fh.read(want) if want > 0 else b""
        self._left -= len(data)
        return data

    def close(self) -> None:
        self._fh.close()


def _pieces(store: Any, key: str, start: int, end: int) -> Iterator[bytes]:
    at = start
    while at < end:
        piece = store.read(key, (at, min(end, at + CHUNK)))
        if not piece:
            return
        at += len(piece)
        yield piece


@csrf_exempt
def not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    return error_response(SharingError(MISSING, "No such endpoint of the Delta Sharing protocol."))
