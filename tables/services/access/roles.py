"""Roles: the groups and what they may do, checked on the server by views and the API."""

from __future__ import annotations

ANALYST = "analyst"
APPROVER = "approver"
WRITER = "writer"
ROLES = (ANALYST, APPROVER, WRITER)


def in_group(user, name: str) -> bool:
    if not (user and user.is_authenticated):
        return False
    known = getattr(user, "known_groups", None)  # memberships the authentication looked up already
    if known is not None and name in known:
        return known[name]
    return user.groups.filter(name=name).exists()


def can_browse(user) -> bool:
    return bool(user and user.is_authenticated and user.is_active)


def can_register(user) -> bool:
    """Register tables and trigger syncs: analysts, approvers and staff."""
    return bool(
        user and user.is_authenticated and (user.is_staff or in_group(user, ANALYST) or in_group(user, APPROVER))
    )


def can_delete_table(user) -> bool:
    """Unregistering a table drops its cached history and requests: superusers only (approvers
    are staff to reach the admin console, which must not make them able to delete)."""
    return bool(user and user.is_authenticated and user.is_superuser)


def can_request_restore(user) -> bool:
    """Ask for a restore (it still needs an approver): analysts, approvers and staff."""
    return can_register(user)


def can_approve(user) -> bool:
    """Approve or reject restores (never one's own request: the services check that)."""
    return bool(user and user.is_authenticated and (user.is_staff or in_group(user, APPROVER)))


def can_write_managed(user) -> bool:
    """Commit to tables deltaweb owns through /api/owner/ (writers' service accounts, staff)."""
    return bool(user and user.is_authenticated and user.is_active and (user.is_staff or in_group(user, WRITER)))
