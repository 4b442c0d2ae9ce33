"""REST API for pins: GET/POST tables/{id}/pins/ (a table's pins; pin a version), GET pins/{id}/
(one pin with its audit trail), POST pins/{id}/unpin/ (ask to remove it), pins/{id}/approve/ and
pins/{id}/reject/ (an approver decides a removal), POST pins/{id}/withdraw/ (the requester takes
their removal request back).

Each view checks permissions and calls one function of tables.services.pins.lifecycle; errors are
rendered by tables.api.base.errors.exception_handler.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from tables.api.base.common import TABLE_ID, _errors, table_or_404
from tables.api.base.fields import BlankAsNullCharField, add_field
from tables.api.base.permissions import CanApprove, CanBrowse, CanRequestRestore
from tables.models import Pin, PinState
from tables.services.catalog.lookup import INT64_MAX
from tables.services.pins import lifecycle as pins
from tables.services.pins import queries as pin_queries
from tables.services.versions.unreadable import refuse_pin

LISTED = 500  # a table's pins in one answer, newest first


class IsoDateTimeField(serializers.CharField):
    """A stored time as Python's ISO 8601 text (`+00:00`, microseconds kept), as pins always said it."""

    def to_representation(self, value: datetime) -> str:
        return value.isoformat()


class UsernameField(serializers.CharField):
    """Who did something: the user's name, null for none."""

    def to_representation(self, value: Any) -> str:
        return value.get_username()


class PinFactField(serializers.CharField):
    """A pin's value the services work out (who decided, what holds it): `fact(pin)`."""

    def __init__(self, fact: Callable[[Pin], str | None], **kwargs: Any) -> None:
        self.fact = fact
        super().__init__(source="*", **kwargs)

    def to_representation(self, value: Pin) -> str | None:
        return self.fact(value)


# one PinEvent row of a pin's audit trail
class PinEventSerializer(serializers.Serializer):
    at = IsoDateTimeField()
    actor = UsernameField(allow_null=True)
    to = serializers.CharField(source="to_state")
    note = serializers.CharField(allow_blank=True)


# 'from' cannot be a class attribute: the state the pin left (null for its creation)
add_field(PinEventSerializer, "from", BlankAsNullCharField(source="from_state", read_only=False), before="to")


def _decision_comment(pin: Pin) -> str | None:
    if hasattr(pin, "decision_note"):  # annotated by the query that listed it (pin_queries.listed)
        return pin.decision_note
    return (pins.decisions([pin.pk]).get(pin.pk) or {}).get("note")


class PinSerializer(serializers.Serializer):
    """A pin: what it keeps, how the pin store holds it, its state and its audit trail."""

    id = serializers.IntegerField()
    table = serializers.IntegerField(source="table_id")
    version = serializers.IntegerField()
    name = serializers.CharField()
    reason = serializers.CharField()
    expiresAt = IsoDateTimeField(source="expires_at", allow_null=True)
    state = serializers.ChoiceField(choices=[c for c, _ in Pin._meta.get_field("state").choices])
    createdBy = UsernameField(source="created_by", allow_null=True)
    createdAt = IsoDateTimeField(source="created_at", allow_null=True)
    protection = BlankAsNullCharField(
        read_only=False,
        help_text="hard links, copies, server-side copies or legal holds: how the pin store holds the files; "
        "'not protected' when the store could not keep the version",
    )
    files = serializers.IntegerField()
    bytes = serializers.IntegerField()
    bytesCopied = serializers.IntegerField(source="bytes_copied", help_text="bytes written anew (0 with hard links)")
    removalRequestedBy = UsernameField(source="removal_requested_by", allow_null=True)
    removalReason = BlankAsNullCharField(source="removal_reason", read_only=False)
    decidedBy = UsernameField(source="decided_by", allow_null=True)
    decisionComment = PinFactField(
        _decision_comment, allow_null=True, help_text="the approver's last decision on a removal, with their comment"
    )
    heldBy = PinFactField(pins.held_by, help_text="what holds the version now: the protection, or nothing once removed")
    error = BlankAsNullCharField(read_only=False, help_text="why a pin failed (or a removal left files)")
    events = PinEventSerializer(many=True)


class PinCreateSerializer(serializers.Serializer):
    version = serializers.IntegerField(min_value=0, max_value=INT64_MAX)
    name = serializers.CharField(max_length=pins.MAX_NAME, min_length=1)
    reason = serializers.CharField(max_length=pins.MAX_TEXT, min_length=1)
    expiresAt = serializers.DateTimeField(required=False, allow_null=True, help_text="none: kept until removed")


class PinTableListSerializer(serializers.Serializer):
    pins = PinSerializer(many=True)
    note = serializers.CharField(allow_null=True, help_text="where the pin store cannot link or copy server-side")


class PinCommentSerializer(serializers.Serializer):
    comment = serializers.CharField(max_length=pins.MAX_TEXT, required=False, allow_blank=True, default="")


class PinUnpinSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=pins.MAX_TEXT, min_length=1)


def _pin_or_404(pk: str) -> Pin:
    pin = Pin.objects.select_related("table").filter(pk=int(pk)).first() if pk.isdigit() and len(pk) < 19 else None
    if pin is None:
        raise NotFound(f"No pin with id '{pk[:40]}'.")
    return pin


def _body(pin: Pin) -> dict:
    return PinSerializer(pin_queries.listed(Pin.objects.filter(pk=pin.pk)).get()).data


class TablePinsView(APIView):
    """A table's pins (newest first), and pinning one of its versions."""

    def get_permissions(self):
        if self.request.method == "POST":
            return [IsAuthenticated(), CanRequestRestore()]
        return [IsAuthenticated(), CanBrowse()]

    @extend_schema(parameters=[TABLE_ID], responses={200: PinTableListSerializer, **_errors(401, 403, 404)})
    def get(self, request, id: str):
        table = table_or_404(id)
        rows = pin_queries.listed(Pin.objects.filter(table=table))  # a few queries, however many pins
        body = {"pins": rows[:LISTED], "note": pins.store_note(table)}
        return Response(PinTableListSerializer(body).data)

    @extend_schema(
        parameters=[TABLE_ID],
        request=PinCreateSerializer,
        responses={
            201: PinSerializer,
            202: OpenApiResponse(PinSerializer, description="writing: a worker keeps the version (object stores)"),
            **_errors(400, 401, 403, 404, 409, 422),
        },
    )
    def post(self, request, id: str):
        """Pin a version: on local disk it is written into the pin store at once (hard links where
        the store shares the table's file system), 201; where the table or the store is an
        object store a worker writes it, 202 with state `writing` (poll pins/{id}/ until
        `active`, or `failed` with `error`). 409 pin_exists for a name the table's pins have;
        422 version_unreadable for a version the table no longer gives whole (its files
        vacuumed or its commits cleaned up): nothing is left to keep."""
        table = table_or_404(id)
        ser = PinCreateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        refuse_pin(table, d["version"])  # a version the table no longer gives whole: 422, nothing made
        pin = pins.create_pin(table, d["version"], d["name"], d["reason"], request.user, d.get("expiresAt"))
        code = status.HTTP_202_ACCEPTED if pin.state == PinState.WRITING else status.HTTP_201_CREATED
        return Response(_body(pin), status=code)


class PinView(APIView):
    permission_classes = [IsAuthenticated, CanBrowse]

    @extend_schema(responses={200: PinSerializer, **_errors(401, 403, 404)})
    def get(self, request, pk: str):
        return Response(_body(_pin_or_404(pk)))


class PinUnpinView(APIView):
    permission_classes = [IsAuthenticated, CanRequestRestore]

    @extend_schema(request=PinUnpinSerializer, responses={200: PinSerializer, **_errors(400, 401, 403, 404, 409)})
    def post(self, request, pk: str):
        """Ask to remove a pin: before its expiry an approver must accept (state
        unpin_requested); after it, removed at once."""
        ser = PinUnpinSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        return Response(_body(pins.request_unpin(_pin_or_404(pk), request.user, ser.validated_data["reason"])))


class PinWithdrawView(APIView):
    permission_classes = [IsAuthenticated, CanRequestRestore]

    @extend_schema(request=None, responses={200: PinSerializer, **_errors(401, 403, 404, 409)})
    def post(self, request, pk: str):
        """Withdraw your own removal request: the pin is active again and its audit trail says
        the request was withdrawn. 403 for anyone but the requester, 409 with no request."""
        return Response(_body(pins.withdraw_unpin(_pin_or_404(pk), request.user)))


class PinDecisionView(APIView):
    permission_classes = [IsAuthenticated, CanApprove]
    approve = True

    @extend_schema(request=PinCommentSerializer, responses={200: PinSerializer, **_errors(400, 401, 403, 404, 409)})
    def post(self, request, pk: str):
        """Approvers (or staff) only, never the one who asked (403 own_request); a rejection
        needs a comment saying why."""
        ser = PinCommentSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        pin, comment = _pin_or_404(pk), ser.validated_data["comment"]
        if self.approve:
            return Response(_body(pins.approve_unpin(pin, request.user, comment)))
        return Response(_body(pins.reject_unpin(pin, request.user, comment)))
