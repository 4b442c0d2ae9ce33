"""The REST side of a commit-owner: the client that asks deltaweb's owner API over HTTP, and
the mapping of a commit's outcome onto the answer that API gives (so both ends agree)."""

from __future__ import annotations

import http.client
import threading
import time
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import orjson

from tables.delta.errors import CommitOwnerError, OwnerUnavailableError
from tables.delta.managed.owner import (
    Commit,
    CommitConflict,
    CommitOutcome,
    CommitRefused,
    CommitResponse,
    GetCommitsResponse,
    TableConf,
    decode_actions,
)

REFUSED_STATUS = 403
CONFLICT_STATUS = 409
# a kept-alive connection idle longer than this is replaced before use: below gunicorn's default
# keep-alive (2 s), so a request is never sent on a connection the server is closing (a POST on
# one would leave its outcome unknown)
REUSE_IDLE_SECONDS = 1.5


def outcome_to_http(outcome: CommitOutcome) -> tuple[int, dict[str, Any]]:
    """The REST answer to a commit (what RestOwnerClient parses): 201 {commit}, 409
    {error: commit_conflict, winningVersion}, 403 {error: commit_refused, refusal}."""
    if isinstance(outcome, CommitResponse):
        return 201, {"commit": outcome.commit.to_json()}
    if isinstance(outcome, CommitConflict):
        message = outcome.message or (
            f"version {outcome.version} was committed by another writer first; the latest ratified version is "
            f"{outcome.winning_version}"
        )
        return CONFLICT_STATUS, {
            "error": {
                "code": "commit_conflict",
                "message": message,
                "version": outcome.version,
                "winningVersion": outcome.winning_version,
            }
        }
    return REFUSED_STATUS, {
        "error": {
            "code": "commit_refused",
            "message": outcome.reason,
            "version": outcome.version,
            "refusal": outcome.code,
        }
    }


# --- clients ------------------------------------------------------------------------------------


class RestOwnerClient:
    """A commit-owner behind deltaweb's REST API (token authentication), stdlib only.

    POST {base}/api/owner/tables/{id}/commits     {version, actions: [...]} -> 201 {commit}
                                                  | 409 commit_conflict {winningVersion}
                                                  | 403 commit_refused {refusal}
    GET  {base}/api/owner/tables/{id}/commits?start=&end=  -> {commits: [...], latestTableVersion}
    POST {base}/api/owner/tables/{id}/backfill?version=    -> {backfilledVersion}
    The table id is the `tableId` of the table's owner conf (its metadata) unless given here.
    Each thread keeps one connection alive and reuses it (a fresh connection per call cost a
    TCP handshake and the server's accept per commit attempt).
    """

    def __init__(
        self, base_url: str, token: str, *, name: str = "deltaweb", table_id: str | None = None, timeout: float = 10.0
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.name = name
        self.table_id = table_id
        self.timeout = timeout
        parts = urlsplit(self.base_url)
        self._https = parts.scheme == "https"
        self._netloc = parts.netloc
        self._prefix = len(f"{parts.scheme}://{parts.netloc}")
        self._local = threading.local()  # one kept-alive connection per thread (http.client is not thread-safe)

    def __repr__(self) -> str:
        return f"RestOwnerClient({self.base_url!r}, name={self.name!r})"

    def _url(self, table_conf: TableConf, tail: str, query: dict[str, Any] | None = None) -> str:
        table_id = self.table_id or table_conf.table_id
        if not table_id:
            raise CommitOwnerError(
                f"{table_conf.location}: the table's owner conf has no tableId, so {self.base_url} cannot be asked"
            )
        url = f"{self.base_url}/api/owner/tables/{quote(str(table_id), safe='')}/{tail}"
        query = {k: v for k, v in (query or {}).items() if v is not None}
        return f"{url}?{urlencode(query)}" if query else url

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """The thread's connection and whether it was used before (a fresh one after idling)."""
        conn, last = getattr(self._local, "conn", None), getattr(self._local, "last", 0.0)
        if conn is not None and time.monotonic() - last < REUSE_IDLE_SECONDS:
            return conn, True
        if conn is not None:
            conn.close()
        kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        conn = self._local.conn = kind(self._netloc, timeout=self.timeout)
        return conn, False

    def close(self) -> None:
        """Close this thread's kept-alive connection (the next call opens a new one)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _send(self, method: str, url: str, data: bytes | None) -> tuple[int, bytes]:
        headers = {"Authorization": f"Token {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in range(2):
            conn, reused = self._connection()
            try:
                conn.request(method, url[self._prefix :] or "/", body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                # the server closed a kept-alive connection: a GET is safe to send again; a
                # POST's outcome is unknown, which the writer must find out (txnId), not us
                if reused and method == "GET" and attempt == 0:
                    continue
                raise
            except (OSError, http.client.HTTPException):
                self.close()
                raise
            if resp.will_close:
                self.close()
            else:
                self._local.last = time.monotonic()
            return resp.status, raw
        raise AssertionError("unreachable")

    def _request(self, method: str, url: str, body: Any = None) -> tuple[int, Any]:
        data = orjson.dumps(body) if body is not None else None
        try:
            status, raw = self._send(method, url, data)
        except (OSError, http.client.HTTPException) as exc:  # refused, reset, timed out, garbled
            raise OwnerUnavailableError(f"commit-owner '{self.name}' at {url} is unreachable ({exc})") from exc
        try:
            payload = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            payload = None
        if status >= 500:
            raise OwnerUnavailableError(
                f"commit-owner '{self.name}' at {url} failed with HTTP {status}: {_error_message(payload, raw)}"
            )
        return status, payload

    def _fail(self, url: str, status: int, payload: Any) -> CommitOwnerError:
        return CommitOwnerError(
            f"commit-owner '{self.name}' at {url} answered HTTP {status}: {_error_message(payload, b'')}",
            status=status,
        )

    def commit(self, table_conf: TableConf, version: int, actions: bytes) -> CommitOutcome:
        url = self._url(table_conf, "commits")
        try:
            body = {"version": version, "actions": decode_actions(actions)}
        except ValueError as exc:
            return CommitRefused(version, f"the commit is not valid newline-delimited JSON: {exc}", "invalid_commit")
        status, payload = self._request("POST", url, body)
        if status in (200, 201) and isinstance(payload, dict) and "commit" in payload:
            return CommitResponse(Commit.from_json(payload["commit"]))
        err = payload.get("error") if isinstance(payload, dict) else None
        code = err.get("code") if isinstance(err, dict) else None
        if status == CONFLICT_STATUS and code == "commit_conflict":
            winner = err.get("winningVersion")
            if not isinstance(winner, int) or isinstance(winner, bool):
                winner = version
            return CommitConflict(version, winner, str(err.get("message") or ""))
        if code == "commit_refused" and 400 <= status < 500:
            return CommitRefused(version, str(err.get("message") or "refused"), str(err.get("refusal") or "policy"))
        raise self._fail(url, status, payload)

    def get_commits(self, table_conf: TableConf, start: int = 0, end: int | None = None) -> GetCommitsResponse:
        url = self._url(table_conf, "commits", {"start": start, "end": end})
        status, payload = self._request("GET", url)
        if status != 200:
            raise self._fail(url, status, payload)
        return GetCommitsResponse.from_json(payload)

    def backfill_to_version(self, table_conf: TableConf, version: int) -> int | None:
        url = self._url(table_conf, "backfill", {"version": version})
        status, payload = self._request("POST", url)
        if status not in (200, 201, 202, 204):
            raise self._fail(url, status, payload)
        done = payload.get("backfilledVersion") if isinstance(payload, dict) else None
        return done if isinstance(done, int) and not isinstance(done, bool) else None

    def register_table(self, table_conf: TableConf, current_version: int) -> dict[str, str]:
        raise CommitOwnerError(
            f"{table_conf.location}: taking a table over is done in deltaweb itself, not through {self.base_url}"
        )


def _error_message(payload: Any, raw: bytes) -> str:
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        err = payload["error"]
        return f"{err.get('code')}: {str(err.get('message'))[:500]}"
    return (raw or b"").decode("utf-8", "replace")[:200] or "no body"
