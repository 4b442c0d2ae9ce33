"""A request's query parameters read through a query serializer (400 for a bad one), for the
API's views."""

from __future__ import annotations

import functools
from typing import Any

from rest_framework import serializers
from rest_framework.fields import empty


@functools.cache
def _optional_names(serializer_cls: type[serializers.Serializer]) -> frozenset[str] | None:
    """The field names of a query serializer whose fields are all optional, without defaults
    and without a cross-field check (so that a query naming none of them is valid, and reads
    as {}); None for any other."""
    fields = serializer_cls().fields
    if serializer_cls.validate is not serializers.Serializer.validate:
        return None
    if any(f.required or f.default is not empty for f in fields.values()):
        return None
    return frozenset(fields)


def validated_query(serializer_cls: type[serializers.Serializer], request) -> dict[str, Any]:
    """The query parameters `serializer_cls` validates; ValidationError (a 400) if they are bad."""
    # the first page of a history names no filter: building the serializer (a deep copy of
    # its fields) was a sixth of that request
    names = _optional_names(serializer_cls)
    if names is not None and names.isdisjoint(request.query_params):
        return {}
    ser = serializer_cls(data=request.query_params)
    ser.is_valid(raise_exception=True)
    return ser.validated_data
