"""A Delta client of deltaweb's Unity Catalog API built on the official SDK (unitycatalog-client).

The SDK (0.7.0, the newest on PyPI) generates `DeltaCommitsApi` (the preview commit API) with
typed models; the v1 Delta tables endpoints (config, staging tables, createTable, loadTable,
updateTable) are not generated in it, so they go through the same SDK `ApiClient`
(`param_serialize` + `call_api`: its transport, headers and serialization). The Delta side
(version 0, staged commits, publishing) is tables.delta.write.catalog.

The SDK is asyncio-based: each `UcSession` owns one event loop and one `ApiClient` (one
aiohttp connection pool, kept alive), so a thread uses its own session.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from unitycatalog.client import ApiClient, Configuration, DeltaCommitsApi
from unitycatalog.client.exceptions import ApiException
from unitycatalog.client.models.delta_commit import DeltaCommit
from unitycatalog.client.models.delta_commit_info import DeltaCommitInfo
from unitycatalog.client.models.delta_get_commits import DeltaGetCommits
from unitycatalog.client.models.delta_get_commits_response import DeltaGetCommitsResponse

from tables.delta.write.catalog import StagedCommit

PREFIX = "/api/2.1/unity-catalog"


@dataclass
class UcAnswer:
    status: int
    body: Any

    @property
    def error_type(self) -> str | None:
        return (self.body or {}).get("error", {}).get("type") if isinstance(self.body, dict) else None


class UcSession:
    """One SDK client (one event loop, one kept-alive connection pool) for one thread."""

    def __init__(self, base_url: str, token: str) -> None:
        self.loop = asyncio.new_event_loop()

        async def make() -> ApiClient:  # aiohttp binds its connector to the running loop
            return ApiClient(Configuration(host=base_url.rstrip("/") + PREFIX))

        self.api = self.run(make())
        self.api.set_default_header("Authorization", f"Bearer {token}")
        self.commits = DeltaCommitsApi(self.api)

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        self.run(self.api.close())
        self.loop.close()

    # --- the v1 Delta API through the SDK's transport -------------------------------------------

    def call(self, method: str, path: str, body: Any = None, query: dict[str, str] | None = None) -> UcAnswer:
        async def go() -> UcAnswer:
            params = self.api.param_serialize(
                method=method,
                resource_path=path,
                query_params=list((query or {}).items()),
                header_params={"Accept": "application/json", "Content-Type": "application/json"},
                body=body,
            )
            resp = await self.api.call_api(*params)
            data = await resp.read()
            try:
                return UcAnswer(resp.status, json.loads(data) if data else None)
            except ValueError:  # not this API's JSON (a proxy's or a dying worker's page): say what came
                return UcAnswer(
                    resp.status, {"error": {"type": "NotJson", "message": data[:500].decode("utf-8", "replace")}}
                )

        return self.run(go())

    def load(self, catalog: str, schema: str, table: str) -> UcAnswer:
        return self.call("GET", f"/delta/v1/catalogs/{catalog}/schemas/{schema}/tables/{table}")

    def update(self, catalog: str, schema: str, table: str, body: dict[str, Any]) -> UcAnswer:
        return self.call("POST", f"/delta/v1/catalogs/{catalog}/schemas/{schema}/tables/{table}", body)

    # --- the preview commit API: the SDK's generated DeltaCommitsApi ------------------------------

    def commit(self, table_id: str, table_uri: str, staged: StagedCommit | None, backfilled: int | None = None):
        info = None
        if staged is not None:
            info = DeltaCommitInfo(
                version=staged.version,
                timestamp=staged.in_commit_timestamp,
                file_name=staged.file_name,
                file_size=staged.size,
                file_modification_timestamp=staged.modification_time,
            )
        body = DeltaCommit(
            table_id=table_id, table_uri=table_uri, commit_info=info, latest_backfilled_version=backfilled
        )
        return self.run(self.commits.commit(body))

    def get_commits(self, table_id: str, table_uri: str, start: int = 0, end: int | None = None):
        """getCommits. The generated `DeltaCommitsApi.get_commits` serializes its DeltaGetCommits
        as a GET body, which the SDK's REST layer then drops (it sends bodies only for POST, PUT,
        PATCH, OPTIONS, DELETE): no server can tell which table is meant. The same model goes
        as query parameters instead (deltaweb accepts both), and the answer is parsed into the
        SDK's DeltaGetCommitsResponse."""
        body = DeltaGetCommits(table_id=table_id, table_uri=table_uri, start_version=start, end_version=end)
        query = {k: str(v) for k, v in body.to_dict().items() if v is not None}
        answer = self.call("GET", "/delta/preview/commits", query=query)
        if answer.status != 200:
            raise ApiException(status=answer.status, reason="getCommits", body=json.dumps(answer.body))
        return DeltaGetCommitsResponse.from_dict(answer.body)


def error_type(exc: ApiException) -> str | None:
    try:
        return json.loads(exc.body)["error"]["type"]
    except (TypeError, ValueError, KeyError):
        return None


class SdkCatalogOwner:
    """The core's CommitOwner for one catalogManaged table, spoken through the official SDK: so
    `managed.commit_via_owner` and every reader (`load_snapshot(..., owner=...)`) run against
    deltaweb as a Unity Catalog with the official client instead of RestOwnerClient.

    commit: the client stages the file itself (`_delta_log/_staged_commits/<v>.<uuid>.json`)
    and proposes it; backfill: the client publishes in order, then reports the version.
    """

    name = "unity"

    def __init__(self, session: UcSession, table_id: str, table_uri: str, root: str) -> None:
        self.session, self.table_id, self.table_uri, self.root = session, table_id, table_uri, root

    def commit(self, table_conf, version: int, actions: bytes):
        import uuid as _uuid

        from tables.delta.log.listing import STAGED_COMMITS_DIR, staged_commit_name
        from tables.delta.managed.owner import Commit as OwnerCommit
        from tables.delta.managed.owner import CommitConflict, CommitRefused, CommitResponse, parse_commit
        from tables.delta.storage.opening import as_storage
        from tables.delta.write.catalog import StagedCommit

        storage = as_storage(self.root)
        rel = staged_commit_name(version, str(_uuid.uuid4()), STAGED_COMMITS_DIR)
        storage.put(rel, actions)
        head = storage.head(rel)
        parsed = parse_commit(actions)
        staged = StagedCommit(
            version,
            rel.rpartition("/")[2],
            head.size,
            head.modification_time,
            parsed.in_commit_timestamp or 0,
            parsed.txn_id or "",
        )
        try:
            self.session.commit(self.table_id, self.table_uri, staged)
        except ApiException as exc:
            message = (json.loads(exc.body or "{}").get("error") or {}).get("message", "")
            if exc.status == 409:
                latest = self.session.get_commits(self.table_id, self.table_uri, 0).latest_table_version
                return CommitConflict(version, latest, message)
            code = "policy" if exc.status == 403 else "invalid_commit"
            return CommitRefused(version, message, code)
        return CommitResponse(OwnerCommit(version, rel, head.size, head.modification_time, parsed.in_commit_timestamp))

    def get_commits(self, table_conf, start: int = 0, end: int | None = None):
        from tables.delta.log.listing import STAGED_COMMITS_DIR
        from tables.delta.managed.owner import Commit as OwnerCommit
        from tables.delta.managed.owner import GetCommitsResponse

        answer = self.session.get_commits(self.table_id, self.table_uri, start, end)
        commits = [
            OwnerCommit(
                c.version,
                f"{STAGED_COMMITS_DIR}/{c.file_name}",
                c.file_size,
                c.file_modification_timestamp,
                c.timestamp,
            )
            for c in sorted(answer.commits, key=lambda c: c.version)
        ]
        return GetCommitsResponse(commits, answer.latest_table_version)

    def backfill_to_version(self, table_conf, version: int) -> int | None:
        from tables.delta.write.catalog import publish

        answer = self.session.get_commits(self.table_id, self.table_uri, 0, version)
        done = publish(self.root, [(c.version, c.file_name) for c in answer.commits])
        if done is not None:
            self.session.commit(self.table_id, self.table_uri, None, backfilled=done)
        return done

    def register_table(self, table_conf, current_version: int) -> dict[str, str]:
        raise NotImplementedError("catalog-managed tables are created through staging tables, not taken over")
