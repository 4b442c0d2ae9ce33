"""Browser forms: registering a table, filtering history, time travel, choosing a diff.

Forms only check shapes (numbers, dates, lengths); the use cases decide what is valid for a
table and word the errors.
"""

from __future__ import annotations

from django import forms
from django.conf import settings

from tables.delta.storage.backends import named_schemes
from tables.services.catalog.lookup import INT64_MAX
from tables.services.errors import ServiceError
from tables.services.history.query import check_metric, time_range

MAX_VERSION = INT64_MAX


class RegisterTableForm(forms.Form):
    name = forms.CharField(
        max_length=200,
        help_text="A unique name; the table's address is derived from it.",
        widget=forms.TextInput(attrs={"autofocus": True, "autocomplete": "off", "spellcheck": "false"}),
    )
    location = forms.CharField(
        max_length=2000,
        help_text="Absolute path of the table root (the directory holding _delta_log/), or a file:// URI.",
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false", "placeholder": "/data/tables/…"}),
    )
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # say before submitting where tables may be: the allowed roots, and that a path is absolute
        roots = [str(r) for r in getattr(settings, "DELTAWEB_ALLOWED_ROOTS", [])]
        field = self.fields["location"]
        field.help_text = (
            "An absolute path to the table root (the directory holding _delta_log/), a file:// URI, "
            f"or an object-store location ({named_schemes()}). Allowed under: " + ", ".join(roots) + "."
            if roots
            else field.help_text
        )
        if roots:
            field.widget.attrs["placeholder"] = roots[0].rstrip("/") + "/…"


_ISO_DATE = {"placeholder": "yyyy-mm-dd", "inputmode": "numeric", "pattern": r"\d{4}-\d{2}-\d{2}", "size": 10}


class HistoryFilterForm(forms.Form):
    """GET filters of the history table; every field is optional."""

    operation = forms.CharField(
        required=False, max_length=200, widget=forms.TextInput(attrs={"list": "operations", "placeholder": "any"})
    )
    version_from = forms.IntegerField(required=False, min_value=0, max_value=MAX_VERSION, label="Version from")
    version_to = forms.IntegerField(required=False, min_value=0, max_value=MAX_VERSION, label="to")
    # ISO text fields, as the site writes dates: a browser's date input shows the viewer's
    # locale (mm/dd/yyyy) and takes four Tab stops
    date_from = forms.DateField(
        required=False,
        label="Date from (UTC)",
        input_formats=["%Y-%m-%d"],
        widget=forms.DateInput(format="%Y-%m-%d", attrs=_ISO_DATE),
    )
    date_to = forms.DateField(
        required=False,
        label="to",
        input_formats=["%Y-%m-%d"],
        widget=forms.DateInput(format="%Y-%m-%d", attrs=_ISO_DATE),
    )

    user = forms.CharField(
        required=False,
        max_length=200,
        label="User",
        widget=forms.TextInput(attrs={"placeholder": "name or id", "spellcheck": "false"}),
    )
    params = forms.CharField(
        required=False,
        max_length=200,
        label="Parameters contain",
        widget=forms.TextInput(attrs={"placeholder": "e.g. predicate text", "spellcheck": "false"}),
    )
    metric = forms.CharField(
        required=False,
        max_length=100,
        label="Metric",
        widget=forms.TextInput(attrs={"list": "metric-keys", "placeholder": "numOutputRows", "spellcheck": "false"}),
    )
    metric_min = forms.FloatField(
        required=False,
        min_value=-1e18,
        max_value=1e18,
        label="at least",
        widget=forms.NumberInput(attrs={"step": "any"}),
    )
    metric_max = forms.FloatField(
        required=False,
        min_value=-1e18,
        max_value=1e18,
        label="at most",
        widget=forms.NumberInput(attrs={"step": "any"}),
    )

    def clean(self):
        data = super().clean()
        try:  # the metric's name and range, by the one rule the API's filter follows
            check_metric(data.get("metric"), data.get("metric_min"), data.get("metric_max"))
        except ServiceError as exc:
            raise forms.ValidationError(exc.message) from exc
        vf, vt = data.get("version_from"), data.get("version_to")
        if vf is not None and vt is not None and vf > vt:
            raise forms.ValidationError("The first version of the range is after the last one.")
        df, dt = data.get("date_from"), data.get("date_to")
        if df is not None and dt is not None and df > dt:
            raise forms.ValidationError("The first date of the range is after the last one.")
        return data

    def timestamp_range(self) -> tuple[int | None, int | None]:
        """[since, until] in epoch milliseconds, both inclusive: whole UTC days, by the one rule
        the API's since/until follow too (tables.services.history.query.time_range)."""
        data = self.cleaned_data
        return time_range(data.get("date_from"), data.get("date_to"))

    @property
    def active(self) -> bool:
        return self.is_bound and self.is_valid() and any(v not in (None, "") for v in self.cleaned_data.values())


class TimeTravelForm(forms.Form):
    as_of = forms.CharField(
        label="As of",
        max_length=64,
        help_text="ISO-8601 (UTC unless a zone is given), yyyy-MM-dd[ HH:mm:ss[.SSS]] or epoch milliseconds.",
        widget=forms.TextInput(attrs={"placeholder": "2024-05-01 12:00:00", "spellcheck": "false"}),
    )


class RestoreRequestForm(forms.Form):
    """A restore request: a version or a timestamp (the services check there is exactly one)."""

    version = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_VERSION,
        label="Version",
        widget=forms.NumberInput(attrs={"inputmode": "numeric", "placeholder": "e.g. 12"}),
    )
    timestamp = forms.CharField(
        required=False,
        max_length=64,
        label="or timestamp",
        help_text="The latest version at or before this time (UTC unless a zone is given).",
        widget=forms.TextInput(attrs={"placeholder": "2024-05-01 12:00:00", "spellcheck": "false"}),
    )
    where = forms.CharField(
        required=False,
        max_length=5000,
        label="Only the partitions where (optional)",
        help_text="A predicate on partition columns, e.g. day = '2024-05-01' AND region IN ('eu', 'us'); "
        "other partitions keep their latest data. Blank: the whole table.",
        widget=forms.TextInput(attrs={"placeholder": "day = '2024-05-01'", "spellcheck": "false"}),
    )
    reason = forms.CharField(
        max_length=5000,
        label="Reason",
        help_text="Why the table should go back; the approver reads it.",
        widget=forms.Textarea(attrs={"rows": 3}),
    )
    ignore_missing_files = forms.BooleanField(
        required=False, label="Ignore missing files (restore without the files of the version that are gone)"
    )
    allow_protocol_downgrade = forms.BooleanField(
        required=False, label="Allow a protocol downgrade (write the version's lower protocol)"
    )
    recover_files_first = forms.BooleanField(
        required=False,
        label="Recover files first (copy the version's deleted objects back from the bucket's noncurrent versions)",
    )


class RestoreDecisionForm(forms.Form):
    comment = forms.CharField(
        required=False,
        max_length=5000,
        label="Comment",
        help_text="Shown to the requester; required to reject.",
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    fingerprint = forms.CharField(required=False, max_length=64, widget=forms.HiddenInput)
