"""No request is answered with a 5xx for its shape alone, whoever sends it: every URL pattern of
the app (walked from Django's resolver, not from a list to keep up), its path parameters filled
with a real registered and shared table where they name one, is sent 1,500 query fields and a
JSON body nested 10,000 levels deep, anonymously and with each kind of credential (a signed-in
session, a REST API token, a Unity Catalog bearer token, a Delta Sharing recipient's token).
Every answer is a 4xx, in the shape the path's API speaks."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from rest_framework.authtoken.models import Token

from tables.models import Recipient, Share, SharedTable, Table
from tables.services.sharing.recipients import issue_token
from tables.services.sync import store as sync
from tests.conftest import golden_path
from tests.web.pages.test_api import make_user

pytestmark = pytest.mark.django_db

FIELDS = "&".join(f"f{i}=x" for i in range(1500))
DEEP = "[" * 10_000 + "]" * 10_000
GOLDEN = "basic-with-inserts-deletes-checkpoint"


def _patterns(patterns: list, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], URLPattern]]:
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from _patterns(p.url_patterns, (*prefix, str(p.pattern)))
        else:
            yield (*prefix, str(p.pattern)), p


def _group_end(regex: str, start: int) -> int:
    """The index just past the group opening at `start` (nested groups, classes, escapes)."""
    depth, i, in_class = 0, start, False
    while i < len(regex):
        c = regex[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError(regex)


def _fill_regex(regex: str, value) -> str:
    out, i = "", 0
    while (at := regex.find("(?P<", i)) >= 0:
        end = _group_end(regex, at)
        name = regex[at + 4 : regex.index(">", at)]
        body = regex[regex.index(">", at) + 1 : end - 1]
        out += regex[i:at] + value(name, body)
        i = end
    out += regex[i:]
    out = out.lstrip("^").rstrip("$")
    if out in ("[\\s\\S]*", ".*"):
        return "no-such-thing"
    return out.replace("\\.", ".")


def _numeric(body: str) -> bool:
    """Whether a parameter takes digits only: a route's int converter, a group of [0-9] or \\d."""
    return body == "int" or body.startswith(("[0-9]", "\\d"))


def _fill_route(route: str, value) -> str:
    return re.sub(r"<(?:(\w+):)?(\w+)>", lambda m: value(m[2], m[1] or ""), route)


@pytest.fixture
def site(settings, tmp_path):
    """A registered, synced table that is also shared; a superuser (session and tokens) and a
    recipient with a bearer token for the share."""
    path = golden_path(GOLDEN)
    settings.DELTAWEB_ALLOWED_ROOTS = [str(path.parent), str(tmp_path)]
    table = Table.objects.create(name="sweep", slug="sweep", location=str(path))
    sync.sync_table(table.id)
    share = Share.objects.create(name="s1")
    SharedTable.objects.create(share=share, name="sweep", table=table)
    recipient = Recipient.objects.create(name="partner")
    recipient.shares.add(share)
    admin = make_user("root", staff=True, superuser=True)
    return {"table": table, "share": share, "admin": admin, "recipient_token": issue_token(recipient)}


def _paths(site: dict) -> list[tuple[str, str]]:
    table = site["table"]

    def value(name: str, body: str) -> str:
        if "|" in body and not body.startswith("["):
            return body.split("|")[0]  # an alternative of the pattern (csv|parquet, an app label)
        return {
            "slug": table.slug,
            "id": str(table.id),
            "table_id": str(table.id),
            "table": table.name,
            "share": site["share"].name,
            "schema": "default",
            "catalog": "main",
            "version": "0",
            "fmt": "csv",
        }.get(name, "1" if name in ("pk", "object_id", "content_type_id") or _numeric(body) else "x")

    out = []
    for parts, pattern in _patterns(get_resolver().url_patterns):
        path = "/" + "".join(
            _fill_regex(p, value) if p.startswith("^") or "(?P<" in p or "[" in p else _fill_route(p, value)
            for p in parts
        )
        match = resolve(path)
        # the filled path is that pattern's, or one declared earlier with the same route (the
        # throttled sign-in form before django.contrib.auth's)
        assert match.func is pattern.callback or match.route == "".join(parts), (parts, path)
        out.append((" ".join(parts), path))
    return out


def _clients(site: dict) -> dict[str, Client]:
    def client(**headers: str) -> Client:
        return Client(raise_request_exception=False, headers=headers)

    key = Token.objects.create(user=site["admin"]).key
    session = client()
    session.force_login(site["admin"])
    return {
        "anonymous": client(),
        "session": session,
        "api token": client(Authorization=f"Token {key}"),
        "catalog token": client(Authorization=f"Bearer {key}"),
        "recipient token": client(Authorization=f"Bearer {site['recipient_token']}"),
    }


def test_every_url_answers_a_4xx_to_too_many_fields_and_deep_json_whoever_sends_them(site) -> None:
    paths = _paths(site)
    assert len(paths) > 250 and any(p.startswith("/delta-sharing/") for _, p in paths)
    failures, sent = [], 0
    for who, client in _clients(site).items():
        for pattern, path in paths:
            answers = [("GET+fields", client.get(f"{path}?{FIELDS}"))]
            for method in ("post", "put", "patch"):
                answer = getattr(client, method)(path, DEEP, content_type="application/json")
                answers.append((f"{method.upper()}+deep json", answer))
            for what, answer in answers:
                sent += 1
                if not 400 <= answer.status_code < 500:
                    failures.append(f"{who} {what} {path} ({pattern}): {answer.status_code}")
    print(f"sent {sent} requests")
    assert not failures, f"{len(failures)} of {sent} requests not answered with a 4xx:\n" + "\n".join(failures)


def test_too_many_fields_is_a_400_in_the_shape_of_each_api(site) -> None:
    clients = _clients(site)
    catalog = clients["catalog token"].get(f"/api/2.1/unity-catalog/delta/v1/config?{FIELDS}")
    assert catalog.status_code == 400, catalog.content[:300]
    assert catalog.json()["error"]["type"] == "BadRequestException" and "1000" in catalog.json()["error"]["message"]
    commits = clients["catalog token"].get(f"/api/2.1/unity-catalog/delta/preview/commits?{FIELDS}")
    assert commits.status_code == 400 and commits.json()["error"]["code"] == 400
    sharing = clients["recipient token"].get(f"/delta-sharing/shares?{FIELDS}")
    assert sharing.status_code == 400, sharing.content[:300]
    assert sharing.json()["errorCode"] == "INVALID_PARAMETER_VALUE" and "1000" in sharing.json()["message"]
    api = clients["api token"].get(f"/api/tables/?{FIELDS}")
    assert api.status_code == 400 and api.json()["error"]["code"] == "too_many_fields"
    page = clients["session"].get(f"/t/sweep/history/?{FIELDS}")
    assert page.status_code == 400 and b"1000" in page.content and b"Traceback" not in page.content
    # a form's body counts as Django counts it
    form = clients["anonymous"].post("/accounts/login/", FIELDS, content_type="application/x-www-form-urlencoded")
    assert form.status_code == 400
    # a request within the limit is served as before
    assert clients["recipient token"].get("/delta-sharing/shares?maxResults=10").status_code == 200
    assert clients["api token"].get("/api/tables/?" + "&".join(f"f{i}=x" for i in range(999))).status_code == 200


def test_a_deeply_nested_json_body_is_a_400_in_the_shape_of_each_api(site) -> None:
    clients = _clients(site)
    table = "/delta-sharing/shares/s1/schemas/default/tables/sweep/query"
    for body in (DEEP, '{"a":' * 10_000 + "1" + "}" * 10_000):
        sharing = clients["recipient token"].post(table, body, content_type="application/json")
        assert sharing.status_code == 400 and sharing.json()["errorCode"] == "INVALID_PARAMETER_VALUE"
        staging = "/api/2.1/unity-catalog/delta/v1/catalogs/main/schemas/default/staging-tables"
        catalog = clients["catalog token"].post(staging, body, content_type="application/json")
        assert catalog.status_code == 400 and catalog.json()["error"]["type"] == "BadRequestException"
        api = clients["api token"].post("/api/tables/", body, content_type="application/json")
        assert api.status_code == 400 and api.json()["error"]["code"] == "parse_error"
        page = clients["session"].post("/tables/register/", body, content_type="text/plain")
        assert page.status_code == 400
    # brackets inside strings are text, not nesting; a body nested a little is served
    query = {"limitHint": 1, "predicateHints": ["[" * 5000]}
    import json

    fine = clients["recipient token"].post(table, json.dumps(query), content_type="application/json")
    assert fine.status_code == 200, fine.content[:300]
