"""The OpenAPI description of the catalog API (openapi.yaml, derived from Unity Catalog's own
`delta-api.yaml`): served at /api/2.1/unity-catalog/delta/openapi.yaml as the file is, and at
.../openapi.json as the same document in JSON."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import orjson
import yaml

SPEC_PATH = Path(__file__).with_name("openapi.yaml")
MEDIA_TYPES = {"yaml": "application/yaml; charset=utf-8", "json": "application/json"}


@functools.cache
def document() -> dict[str, Any]:
    """The parsed document (read once per process: it changes only with a deployment)."""
    return yaml.load(SPEC_PATH.read_bytes(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@functools.cache
def rendered(fmt: str) -> bytes:
    """The document as `fmt` ("yaml": the file byte for byte, comments and UC's layout kept)."""
    if fmt == "yaml":
        return SPEC_PATH.read_bytes()
    return orjson.dumps(document())
