"""The rules page's form (alerts.views): a user's rule as fields, its table by slug; what the
rule may say is checked by alerts.services (the field at fault is named there)."""

from __future__ import annotations

from typing import Any

from django import forms

from alerts.models import CustomRule, MetricOp, Severity
from tables.models import Table


class RuleForm(forms.Form):
    name = forms.CharField(max_length=200)
    table = forms.ChoiceField(required=False, help_text="a rule without a table applies to every table")
    severity = forms.ChoiceField(choices=Severity.choices, initial=Severity.WARNING)
    enabled = forms.BooleanField(required=False, initial=True, label="On")
    operation = forms.CharField(max_length=200, required=False, help_text="e.g. MERGE (any case)")
    user = forms.CharField(max_length=500, required=False, help_text="the commitInfo's userName or userId")
    metric = forms.CharField(max_length=200, required=False, help_text="an operationMetrics key, e.g. numDeletedRows")
    metric_op = forms.ChoiceField(choices=[("", "—"), *MetricOp.choices], required=False, label="Compared")
    metric_value = forms.FloatField(required=False, label="with")
    partition = forms.CharField(max_length=500, required=False, help_text="key=value: a file of it added or removed")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        tables = Table.objects.order_by("name").values_list("slug", "name")
        self.fields["table"].choices = [("", "every table"), *tables]
        for name, field in self.fields.items():
            if field.help_text:  # read with the field (aria-describedby), not only seen beside it
                field.widget.attrs["aria-describedby"] = self.help_id(name)

    def mark_errors(self) -> None:
        """Each field in error says so to assistive technology and names its message."""
        for name in self.errors:
            if name not in self.fields:
                continue
            attrs = self.fields[name].widget.attrs
            attrs["aria-invalid"] = "true"
            attrs["aria-describedby"] = " ".join(filter(None, [attrs.get("aria-describedby"), self.error_id(name)]))

    def error_id(self, name: str) -> str:
        return f"{self.auto_id % name}-error" if self.auto_id else f"{name}-error"

    def help_id(self, name: str) -> str:
        return f"{self.auto_id % name}-help" if self.auto_id else f"{name}-help"

    @classmethod
    def of_rule(cls, rule: CustomRule, **kwargs: Any) -> RuleForm:
        """The form filled in with a rule as it is."""
        initial = {name: getattr(rule, name) for name in ("name", "severity", "enabled", "operation", "user")}
        initial.update(
            metric=rule.metric,
            metric_op=rule.metric_op,
            metric_value=rule.metric_value,
            partition=rule.partition,
            table=rule.table.slug if rule.table_id else "",
        )
        return cls(initial=initial, **kwargs)

    def rule_fields(self) -> dict[str, Any]:
        """The cleaned fields as CustomRule's (the table as a row, None for every table)."""
        data = dict(self.cleaned_data)
        slug = data.pop("table") or ""
        data["table"] = Table.objects.filter(slug=slug).first() if slug else None
        data["metric_op"] = data.get("metric_op") or ""
        for name in ("operation", "user", "metric", "partition"):
            data[name] = (data.get(name) or "").strip()
        return data
