"""The Delta Sharing server fuzzed from the protocol's own OpenAPI description (Schemathesis),
filtered to the operations deltaweb serves, on the live server as a recipient with a token.

Every response is checked: never a 5xx, a status code the description lists. Path parameters
name the real share, schema and table in every other request, so the generated query
parameters and bodies reach the table's own use cases, not only the lookup's 404. Bounded:
a fixed seed and FUZZ_EXAMPLES requests per operation (DELTAWEB_FUZZ_EXAMPLES raises it)."""

from __future__ import annotations

import os

import pytest
import schemathesis
import yaml
from hypothesis import HealthCheck, Phase, given, seed, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import status_code_conformance

from tests.conftest import REPO, golden_path

from ..sharing_site import register, share_tables

FUZZ_EXAMPLES = int(os.environ.get("DELTAWEB_FUZZ_EXAMPLES", "5"))
FUZZ_SEED = int(os.environ.get("DELTAWEB_FUZZ_SEED", "20261129"))
DESCRIPTION = REPO.parent / "shared" / "reference" / "delta-sharing" / "openapi.yml"
TABLE = "/shares/{share}/schemas/{schema}/tables/{table}"
SERVED = {
    ("GET", "/shares"),
    ("GET", "/shares/{share}"),
    ("GET", "/shares/{share}/schemas"),
    ("GET", "/shares/{share}/schemas/{schema}/tables"),
    ("GET", "/shares/{share}/all-tables"),
    ("GET", f"{TABLE}/version"),
    ("GET", f"{TABLE}/metadata"),
    ("POST", f"{TABLE}/query"),
    ("GET", f"{TABLE}/changes"),
}
REAL = {"share": "s1", "schema": "default", "table": "t"}


def served_description() -> dict:
    """The protocol's description with only the operations deltaweb serves."""
    if not DESCRIPTION.is_file():
        pytest.skip(f"the protocol's OpenAPI description is not at {DESCRIPTION}")
    spec = yaml.safe_load(DESCRIPTION.read_text())
    spec["servers"] = [{"url": "/delta-sharing"}]
    for path, operations in list(spec["paths"].items()):
        for method in [m for m in operations if m in ("get", "post", "head", "put", "delete", "patch")]:
            if (method.upper(), path) not in SERVED:
                del operations[method]
        if not any(m in operations for m in ("get", "post", "head", "put", "delete", "patch")):
            del spec["paths"][path]
    return spec


def checked(operation, base: str, headers: dict[str, str], sent: list[int]):
    @seed(FUZZ_SEED)
    @settings(
        max_examples=FUZZ_EXAMPLES,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
        database=None,
        phases=[Phase.explicit, Phase.generate],
    )
    @given(case=operation.as_strategy())
    def check(case) -> None:
        sent[0] += 1
        if sent[0] % 2 and case.path_parameters:
            case.path_parameters.update({k: v for k, v in REAL.items() if k in case.path_parameters})
        case.call_and_validate(
            base_url=base, headers=headers, timeout=60, checks=[not_a_server_error, status_code_conformance]
        )

    return check


def test_the_protocol_description_finds_no_server_error(live_server, settings, tmp_path) -> None:
    path = golden_path("time-travel-partition-changes-b")
    settings.DELTAWEB_ALLOWED_ROOTS = [str(path.parent)]
    site = share_tables(live_server.url, tmp_path, {"t": {"table": register("t", path), "change_data": True}})
    api = schemathesis.openapi.from_dict(served_description())
    headers = {"Authorization": f"Bearer {site.token}"}
    failures, operations, sent = [], 0, [0]
    for result in api.get_all_operations():
        operation = result.ok()
        operations += 1
        try:
            checked(operation, f"{live_server.url}/delta-sharing", headers, sent)()
        except (Exception, BaseExceptionGroup) as exc:
            failures.append(f"{operation.label}: {str(exc)[:1500]}")
    print(f"schemathesis on the sharing protocol: {sent[0]} requests to {operations} operations")
    assert operations == len(SERVED)
    assert not failures, f"{len(failures)} of {operations} operations:\n\n" + "\n\n".join(failures)
