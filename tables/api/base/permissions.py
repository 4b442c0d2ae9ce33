"""API permissions: thin adapters over tables.services.access.roles, so the UI and the API agree."""

from __future__ import annotations

from rest_framework.permissions import BasePermission

from tables.services.access import roles


class CanBrowse(BasePermission):
    message = "Your account cannot read tables."

    def has_permission(self, request, view) -> bool:
        return roles.can_browse(request.user)


class CanRegister(BasePermission):
    message = "Registering and syncing tables needs the analyst or approver role (or staff)."

    def has_permission(self, request, view) -> bool:
        return roles.can_register(request.user)


class CanDeleteTable(BasePermission):
    message = "Only an administrator (superuser) can delete tables."

    def has_permission(self, request, view) -> bool:
        return roles.can_delete_table(request.user)


class CanRequestRestore(BasePermission):
    message = "Requesting a restore needs the analyst or approver role (or staff)."

    def has_permission(self, request, view) -> bool:
        return roles.can_request_restore(request.user)


class CanApprove(BasePermission):
    message = "Approving or rejecting restores needs the approver role (or staff)."

    def has_permission(self, request, view) -> bool:
        return roles.can_approve(request.user)
