"""The serializer fields and helpers every API concept uses, and the API's error body.

Response bodies use camelCase (as the Delta log and DESCRIBE HISTORY do); query parameters use
snake_case. Timestamps of commits are milliseconds since the epoch (UTC).
"""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from rest_framework import serializers


def _is_staff(serializer: serializers.Serializer) -> bool:
    request = serializer.context.get("request")
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_staff)


def without_staff_detail(serializer: serializers.Serializer, data: dict[str, Any]) -> dict[str, Any]:
    """A job's or restore's result keeps the technical cause of a failure (e.g. Spark's
    exception) under errorDetail; only staff see it."""
    result = data.get("result")
    if isinstance(result, dict) and "errorDetail" in result and not _is_staff(serializer):
        data["result"] = {k: v for k, v in result.items() if k != "errorDetail"}
    return data


class BlankAsNullCharField(serializers.CharField):
    """A text column stored as '' when absent, shown as null (as DESCRIBE HISTORY does)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_null", True)
        kwargs.setdefault("read_only", True)
        super().__init__(**kwargs)

    def to_representation(self, value: Any) -> str | None:
        return None if value in ("", None) else str(value)


class StoredDateTimeField(serializers.DateTimeField):
    """A stored time as Python's ISO 8601 text (`+00:00`, microseconds kept) where the API always
    said it so, rather than DRF's (`Z`)."""

    def to_representation(self, value: Any) -> str:
        return value.isoformat()


# DRF refuses NUL in every CharField, but says so in no schema: this pattern documents it, so
# that clients (and the schema's own fuzzing) know a NUL is not text here.
NO_NUL = r"^[^\x00]*$"


class StrictCharField(serializers.CharField):
    """A string field that refuses numbers and booleans instead of turning them into text
    (DRF's CharField accepts {"reason": 0} as "0"), and documents that NUL is refused."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not any(isinstance(v, RegexValidator) for v in self.validators):
            self.validators.append(RegexValidator(NO_NUL, "Null characters are not allowed."))

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


def add_field(serializer_cls: type[serializers.Serializer], name: str, field: serializers.Field, before: str) -> None:
    """Declare a field whose name cannot be a class attribute ('from', 'fields'), before another."""
    out: dict[str, serializers.Field] = {}
    for key, value in serializer_cls._declared_fields.items():
        if key == before:
            out[name] = field
        out[key] = value
    out.setdefault(name, field)
    serializer_cls._declared_fields = out


def created_by_field() -> serializers.SlugRelatedField:
    """Who created a row (a table, a job): a username, null for commands and the worker."""
    return serializers.SlugRelatedField(
        source="created_by",
        slug_field="username",
        read_only=True,
        allow_null=True,
        help_text="null when created by a command or the worker, or when the user was removed",
    )


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="stable machine name, e.g. not_found, invalid, version_not_found")
    message = serializers.CharField(help_text="what went wrong, in words that can be shown as is")


add_field(
    ErrorDetailSerializer,
    "fields",
    serializers.DictField(required=False, help_text="per-field messages (validation errors only)"),
    before="",
)
ErrorDetailSerializer._declared_fields["files"] = serializers.ListField(
    child=serializers.CharField(), required=False, help_text="missing files, up to 100 (restore_missing_files only)"
)
ErrorDetailSerializer._declared_fields["missingCount"] = serializers.IntegerField(
    required=False, help_text="how many files are missing (restore_missing_files only)"
)


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()
