"""The admin's side of approvals (restores, pin removals): Approve and Reject buttons on a
request's own page, with a comment, and the list actions that decide several at once
(BulkDecision). Every decision goes through the feature's use case (tables.services.approvals
holds the rules they share), so the server's rules hold here too: approvers (or staff) only,
never on their own request. A subclass names its use cases, its words and its pages."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import path, reverse

from tables.admin.base import BulkDecision, DecisionForm
from tables.services import approvals
from tables.services.errors import ServiceError


class ApprovalAdmin(BulkDecision):
    """Approve / reject views for a model whose rows are requests. A subclass sets `decide`
    (approve, reject), `missing` (the words for "There is no <missing> 7."), `decided` (the
    messages after an approval and a rejection, formatted with `pk`) and answers
    `awaiting`, `requester_id` and `ui_url` for a row."""

    missing: str
    decided: tuple[str, str]

    def awaiting(self, obj: Any) -> bool:
        raise NotImplementedError

    def requester_id(self, obj: Any) -> int | None:
        raise NotImplementedError

    def ui_url(self, obj: Any) -> str:
        raise NotImplementedError

    def decision_context(self, obj: Any | None) -> dict[str, Any]:
        """What the change page shows beside the buttons, besides the shared context."""
        return {}

    def decision_kwargs(self, request: Any, approve: bool) -> dict[str, Any]:
        """More arguments for the use case (e.g. the plan's fingerprint the approver saw)."""
        return {}

    def _url_name(self, verb: str) -> str:
        return f"{self.model._meta.app_label}_{self.model._meta.model_name}_{verb}"

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("<path:object_id>/approve/", view(self.approve_view), name=self._url_name("approve")),
            path("<path:object_id>/reject/", view(self.reject_view), name=self._url_name("reject")),
            *super().get_urls(),
        ]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, object_id)
        extra = {
            "show_save": False,
            "show_save_and_continue": False,
            "show_save_and_add_another": False,
            "show_delete": False,
            "decision_form": DecisionForm(),
            **self.decision_context(None),
        }
        if obj is not None:
            awaiting, requester = self.awaiting(obj), self.requester_id(obj)
            extra["can_decide"] = awaiting and approvals.may_decide(request.user, requester)
            extra["own_request"] = awaiting and approvals.is_requester(request.user, requester)
            extra["ui_url"] = self.ui_url(obj)
            extra.update(self.decision_context(obj))
        return super().change_view(request, object_id, form_url, {**extra, **(extra_context or {})})

    def _decide(self, request, object_id: str, approve: bool):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        obj = self.get_object(request, object_id)
        if obj is None:
            raise Http404(f"There is no {self.missing} {object_id}.")
        if not self.has_change_permission(request, obj):
            raise PermissionDenied
        form = DecisionForm(request.POST)
        comment = form.cleaned_data["comment"] if form.is_valid() else ""
        which = 0 if approve else 1
        try:
            self.decide[which](obj, request.user, comment, **self.decision_kwargs(request, approve))
            messages.success(request, self.decided[which].format(pk=obj.pk))
        except ServiceError as exc:
            messages.error(request, exc.message)
        return HttpResponseRedirect(reverse(f"admin:{self._url_name('change')}", args=[obj.pk]))

    def approve_view(self, request, object_id: str):
        return self._decide(request, object_id, approve=True)

    def reject_view(self, request, object_id: str):
        return self._decide(request, object_id, approve=False)
