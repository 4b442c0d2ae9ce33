"""The catalog API fuzzed from its own OpenAPI description (Schemathesis) on the live server.

The description deltaweb serves at /api/2.1/unity-catalog/delta/openapi.json is loaded from the
live server and Schemathesis' engine runs its phases on every operation: the description's
examples, coverage (boundary values, missing or malformed parts, methods the path does not
declare, requests without or with a wrong token) and generated requests. Every response is
checked (CHECKS): no 5xx, a documented status, content type and headers, a body conforming to
the documented schema (UC's error shape for every error), schema-invalid requests refused, 405
with `Allow` for an undeclared method, OPTIONS' `Allow` naming exactly the declared methods,
401 without the token.

The data is real: a catalog-managed table `main.default.events` with an unpublished commit and
a staging table. A writer's run pins the names in the paths and the preview API's table id and
location to them, so loadTable, updateTable, HEAD, the credentials and getCommits answer 200
too; a second writer run leaves every name to Schemathesis; a third run has no token.

Bounded in time: a fixed seed, FUZZ_EXAMPLES generated requests per operation and run
(DELTAWEB_FUZZ_EXAMPLES raises it for a longer run), no shrinking, no stateful phase; requests
close their connection (Django's live server answers a kept-alive one ~40 ms late, delayed ACK).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from django.test import Client
from rest_framework.authtoken.models import Token
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import events

from tables.api.catalog import openapi as uc_openapi
from tables.api.catalog import urls as uc_urls
from tables.delta.write import catalog as cm
from tables.services.access.roles import WRITER

from ..pages.test_api import make_user
from ..uc_sdk import UcSession
from .test_uc_api import CAT, SCH, add, create_table, previous_ict

PREFIX = "/api/2.1/unity-catalog"
DOC = f"{PREFIX}/delta/openapi.json"
FUZZ_EXAMPLES = int(os.environ.get("DELTAWEB_FUZZ_EXAMPLES", "6"))
# Every check of the installed Schemathesis but the ones about state (a schema-valid request
# is accepted: only for names that exist; use-after-free, resource availability, object-level
# authorization: the stateful phase's) and response time.
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "response_headers_conformance",
    "negative_data_rejection",
    "missing_required_header",
    "unsupported_method",
    "allow_header_conformance",
    "ignored_auth",
)
DOCS_PAGE = Path(__file__).resolve().parents[3] / "docs" / "catalog-api.md"


@pytest.fixture
def uc_site(live_server, settings, tmp_path) -> dict[str, Any]:
    """The live server with a catalog-managed table (one unpublished commit), a staging table and
    a writer's token."""
    settings.DELTAWEB_ALLOWED_ROOTS = [str(tmp_path)]
    settings.DELTAWEB_OWNER_AUTO_BACKFILL = False  # the commit stays unpublished: loadTable lists it
    token = Token.objects.create(user=make_user("svc", group=WRITER)).key
    session = UcSession(live_server.url, token)
    try:
        table_id, location, path = create_table(session, "events")
        _, ict = previous_ict(session, table_id, location, path)
        session.commit(table_id, location, cm.stage_commit(str(path), 1, [add("a.parquet")], "WRITE", previous_ict=ict))
        staging = session.call("POST", f"/delta/v1/catalogs/{CAT}/schemas/{SCH}/staging-tables", {"name": "staged"})
        assert staging.status == 200, staging.body
    finally:
        session.close()
    return {
        "url": live_server.url,
        "token": token,
        "pinned": {
            "path.catalog": CAT,
            "path.schema": SCH,
            "path.table": "events",
            "path.table_id": staging.body["table-id"],
            "query.table_id": table_id,
            "query.table_uri": location,
            "body.table_id": table_id,
            "body.table_uri": location,
        },
    }


def run(site: dict[str, Any], *, token: str | None, pinned: bool) -> dict[str, Any]:
    """One Schemathesis run over the served description: the failures (one line per operation
    and check), the operations, the requests sent, the statuses seen, the seconds it took."""
    started = time.monotonic()
    headers = {"Connection": "close"} | ({"Authorization": f"Bearer {token}"} if token else {})
    config = SchemathesisConfig.from_dict(
        {
            "seed": 42,
            "base-url": site["url"] + PREFIX,
            "headers": headers,
            "parameters": site["pinned"] if pinned else {},
            "generation": {"max-examples": FUZZ_EXAMPLES, "no-shrink": True, "deterministic": True, "database": "none"},
            "phases": {"stateful": {"enabled": False}},
            "checks": {"enabled": False, **{name: {"enabled": True} for name in CHECKS}},
        }
    )
    auth = {"Authorization": f"Bearer {site['token']}", "Connection": "close"}
    schema = schemathesis.openapi.from_url(site["url"] + DOC, config=config, headers=auth, timeout=60)
    out: dict[str, Any] = {"failures": {}, "operations": set(), "requests": 0, "statuses": set()}
    for event in schemathesis.engine.from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            out["operations"].add(event.recorder.label)
            out["requests"] += len(event.recorder.interactions)
            out["statuses"] |= {
                (i.request.method, i.response.status_code) for i in event.recorder.interactions.values() if i.response
            }
            for checks in event.recorder.checks.values():
                for check in checks:
                    if check.failure_info is not None:
                        key = f"{event.recorder.label}: {check.name}"
                        out["failures"].setdefault(key, str(check.failure_info.failure)[:1500])
        elif isinstance(event, events.NonFatalError | events.FatalError):
            label = getattr(event, "label", "the run")
            out["failures"].setdefault(f"{label}: error", str(getattr(event, "value", event))[:1500])
    out["seconds"] = round(time.monotonic() - started, 1)
    # `pytest -s` shows the numbers (requests, time) of each run
    print(f"catalog API fuzz: {out['requests']} requests, {len(out['operations'])} operations, {out['seconds']} s")
    return out


def assert_clean(result: dict[str, Any]) -> None:
    assert len(result["operations"]) >= 9  # every operation of the description, not an empty one
    failures = result["failures"]
    assert not failures, f"{len(failures)} failures:\n\n" + "\n\n".join(f"{k}\n{v}" for k, v in failures.items())


@pytest.mark.django_db(transaction=True)
def test_catalog_api_as_a_writer_on_real_tables(uc_site) -> None:
    result = run(uc_site, token=uc_site["token"], pinned=True)
    assert_clean(result)
    # the pinned names reached the data, and the coverage phase sent undeclared methods
    assert {("GET", 200), ("HEAD", 204), ("POST", 200), ("DELETE", 405)} <= result["statuses"]


@pytest.mark.django_db(transaction=True)
def test_catalog_api_as_a_writer_with_generated_names(uc_site) -> None:
    result = run(uc_site, token=uc_site["token"], pinned=False)
    assert_clean(result)
    assert {("GET", 404), ("POST", 400), ("PUT", 405)} <= result["statuses"]


@pytest.mark.django_db(transaction=True)
def test_catalog_api_anonymously(uc_site) -> None:
    result = run(uc_site, token=None, pinned=False)
    assert_clean(result)
    assert {("GET", 401), ("POST", 401), ("PATCH", 405)} <= result["statuses"]
    assert not {status for _, status in result["statuses"]} & {200, 204}


# --- the description against the routes and the docs (no fuzzing) -------------------------------

HTTP_METHODS = ("get", "post", "put", "patch", "delete", "head")


def routes() -> dict[str, set[str]]:
    """uc_urls' API routes as the description's paths, each with the methods its view defines
    (not HEAD that Django derives from GET, nor OPTIONS that DRF answers everywhere)."""
    out: dict[str, set[str]] = {}
    for pattern in uc_urls.urlpatterns:
        view = getattr(pattern.callback, "view_class", None)
        if view is None or view.__name__ == "OpenApiView":
            continue
        regex = pattern.pattern.regex.pattern
        path = "/" + re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", regex).lstrip("^").rstrip("$")
        # a view class has `head` only when it answers HEAD itself (Django adds GET's to instances)
        out[path] = {m for m in HTTP_METHODS if hasattr(view, m)}
    return out


def test_every_route_is_in_the_description_and_back() -> None:
    paths = uc_openapi.document()["paths"]
    described = {path: {m for m in item if m in HTTP_METHODS} for path, item in paths.items()}
    assert routes() == described


def allow_table() -> dict[str, str]:
    """docs/catalog-api.md's table of paths and the `Allow` their 405 carries."""
    rows = re.findall(r"^\| `(/delta/[^`]+)` \| `([A-Z, ]+)` \|", DOCS_PAGE.read_text(), re.M)
    return dict(rows)


@pytest.mark.django_db
def test_a_wrong_method_is_a_405_with_the_documented_allow_before_authentication() -> None:
    documented = allow_table()
    assert set(documented) == set(routes()) | {"/delta/openapi.json", "/delta/openapi.yaml"}
    anonymous = Client()
    for path, allow in documented.items():
        url = PREFIX + path.format(catalog="main", schema="default", table="t", table_id="x")
        response = anonymous.generic("PATCH", url)
        assert response.status_code == 405, (path, response.content)
        assert response.headers["Allow"] == allow, path
        error = response.json()["error"]
        assert error == {"type": "BadRequestException", "code": 405, "message": error["message"]}
        assert f"it allows {allow}" in error["message"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("method", "path", "status", "kind"),
    [
        ("GET", "/delta/v1/nope", 404, "NotFoundException"),
        ("POST", "/delta/v1/config/", 404, "NotFoundException"),
        ("DELETE", "/tables/main.default.t", 404, "NotFoundException"),  # UC's older API: not served
        ("GET", "/delta/v1/catalogs/c/schemas/s/tables/t/x/y%0Az", 404, "NotFoundException"),
        ("POST", "/delta/v1/catalogs/c/schemas/s/tables/t/metrics", 501, "NotImplementedException"),
        ("POST", "/delta/v1/catalogs/c/schemas/s/tables/t/rename", 501, "NotImplementedException"),
        ("GET", "/delta/v1/temporary-path-credentials", 501, "NotImplementedException"),
    ],
)
def test_paths_deltaweb_does_not_serve_answer_in_ucs_shape(method: str, path: str, status: int, kind: str) -> None:
    response = Client().generic(method, PREFIX + path)
    assert response.status_code == status and response.headers["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"type", "code", "message"}
    assert body["error"]["type"] == kind and body["error"]["code"] == status
    assert "/delta/v1/config" in body["error"]["message"]


@pytest.mark.django_db
def test_the_description_is_served_as_yaml_and_json_to_the_catalogs_users(settings) -> None:
    anonymous = Client()
    refused = anonymous.get(DOC)
    assert refused.status_code == 401 and refused.json()["error"]["type"] == "NotAuthorizedException"
    token = Token.objects.create(user=make_user("svc", group=WRITER)).key
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    as_yaml = client.get(f"{PREFIX}/delta/openapi.yaml")
    assert as_yaml.status_code == 200 and as_yaml["Content-Type"].startswith("application/yaml")
    assert as_yaml.content == uc_openapi.SPEC_PATH.read_bytes()
    as_json = client.get(DOC)
    assert as_json.status_code == 200 and as_json.json() == uc_openapi.document()
    settings.DELTAWEB_PUBLIC_SCHEMA = True  # as /api/schema/: public when the deployment says so
    assert anonymous.get(DOC).status_code == 200
