"""The API's JSON parser: DRF's, with the nesting of a body bounded.

Why: the json module recurses once per level, so a body of a few kilobytes nested a thousand
levels deep ends in a RecursionError (a 500) inside the parser, and anything that walks the
parsed value afterwards (serializers, the catalog's checks) recurses as deep. A body deeper
than MAX_JSON_DEPTH is a 400 ParseError in the error shape of whichever API it was sent to.
So is a string holding a lone surrogate (`"\\ud800"` is valid JSON but no text): quoted back in
an answer, it could not be encoded, and stored, PostgreSQL refuses it.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from tables.delta.log.jsonline import deeper_than

MAX_JSON_DEPTH = 64


class BoundedJSONParser(JSONParser):
    """A JSON body, refused (400) when nested deeper than MAX_JSON_DEPTH."""

    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = stream.read().decode(encoding) if stream is not None else ""
            data = json.loads(text, parse_constant=self._refuse_constant)
        except RecursionError:
            raise ParseError(f"JSON parse error - nested more than {MAX_JSON_DEPTH} levels deep") from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {str(exc)[:200]}") from None
        if deeper_than(data, MAX_JSON_DEPTH):
            raise ParseError(f"JSON parse error - nested more than {MAX_JSON_DEPTH} levels deep")
        if "\\u" in text:  # only an escape can make a lone surrogate: the decoded text had none
            try:
                json.dumps(data, ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError:
                raise ParseError("JSON parse error - a string holds a lone surrogate (\\ud800-\\udfff)") from None
        return data

    @staticmethod
    def _refuse_constant(name: str) -> Any:
        # DRF's strict mode: NaN and Infinity are not JSON
        raise ValueError(f"{name} is not valid JSON")
