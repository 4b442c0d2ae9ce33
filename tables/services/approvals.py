"""Approvals: what every request that waits for an approver shares, whatever it asks for (a
restore, the removal of a pin before its expiry). The flow is request → approve or reject (or
the requester withdraws) → an audit event per step:

- who may decide: an approver (or staff), checked on the server, never on their own request
  (`check_can_decide`; `may_decide` is the same rule for a page's buttons);
- who may withdraw: the requester (and staff, where the feature says so) (`check_withdrawer`);
- a decision or a withdrawal is one conditional UPDATE from the state read: it moves exactly one
  row or refuses (409, someone else moved it meanwhile), and its audit event is written in the
  same transaction (`transition`).

Each feature keeps its own words (the messages say "restore #3" or "pin #3") and its own
states; tables.services.restores.requests and tables.services.pins.lifecycle call these.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet

from tables.services.access import roles
from tables.services.errors import ServiceError


def may_decide(user: Any, requester_id: int | None) -> bool:
    """Whether `user` may approve or reject a request asked by `requester_id`."""
    return roles.can_approve(user) and not is_requester(user, requester_id)


def is_requester(user: Any, requester_id: int | None) -> bool:
    return requester_id is not None and requester_id == getattr(user, "pk", None)


def check_can_decide(user: Any, requester_id: int | None, *, role_needed: str, own_request: str) -> None:
    """Approvers (or staff) decide, never on their own request: ServiceError 403
    permission_denied (`role_needed` says which role) or own_request (`own_request` says whose)."""
    if not roles.can_approve(user):
        raise ServiceError(role_needed, "permission_denied", 403)
    if is_requester(user, requester_id):
        raise ServiceError(own_request, "own_request", 403)


def check_withdrawer(user: Any, requester_id: int | None, *, refused: str, staff: bool = False) -> None:
    """Only the requester withdraws a request (and staff, with `staff`): ServiceError 403 else."""
    if not (is_requester(user, requester_id) or (staff and getattr(user, "is_staff", False))):
        raise ServiceError(refused, "permission_denied", 403)


def transition(rows: QuerySet, changes: dict[str, Any], refused: ServiceError, record: Callable[[], None]) -> None:
    """Move the one request `rows` selects (filtered on the state it was read in) with `changes`,
    then `record` its audit event; `refused` (raised) when it did not move exactly one row:
    another decision or withdrawal landed meanwhile. Call it inside the transaction that holds
    the step's other writes."""
    if rows.update(**changes) != 1:
        raise refused
    record()
