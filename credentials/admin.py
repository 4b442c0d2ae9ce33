"""The admin page of storage credentials: staff with the model's permissions add options for a
location prefix. Secret fields are write-only: a page shows which are set, never a value (not
even the encrypted one); a blank field keeps the stored value, "clear" removes it."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin

from credentials.crypto import CredentialsKeyError
from credentials.lookup import canonical_prefix
from credentials.models import StorageCredential
from tables.delta.errors import DeltaError
from tables.delta.storage.backends import all_backends
from tables.delta.storage.objectstore_config import is_secret_option

# the secret options an administrator can set, by the option names delta-rs and obstore take:
# each backend's own (tables.delta.storage.backends), in registration order
SECRET_FIELDS: dict[str, str] = {name: label for b in all_backends() for name, label in b.secret_options.items()}
_LONG = {name for b in all_backends() for name in b.long_secrets}


class SecretTextarea(forms.Textarea):
    """A textarea that never renders a value, not even the one just submitted with an error."""

    def format_value(self, value: Any) -> None:
        return None


def _secret_field(name: str) -> forms.CharField:
    """A write-only field (of the form, not the model): its value is never rendered back."""
    widget = (
        SecretTextarea(attrs={"rows": 3, "autocomplete": "off"})
        if name in _LONG
        else forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"})
    )
    return forms.CharField(label=SECRET_FIELDS[name], required=False, widget=widget, strip=True)


class StorageCredentialForm(forms.ModelForm):
    aws_access_key_id = _secret_field("aws_access_key_id")
    aws_secret_access_key = _secret_field("aws_secret_access_key")
    aws_session_token = _secret_field("aws_session_token")
    azure_storage_account_key = _secret_field("azure_storage_account_key")
    azure_storage_sas_key = _secret_field("azure_storage_sas_key")
    google_service_account_key = _secret_field("google_service_account_key")
    clear_secrets = forms.MultipleChoiceField(
        choices=list(SECRET_FIELDS.items()),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="remove these stored secrets",
    )

    class Meta:
        model = StorageCredential
        fields = ["prefix", "description", "options"]
        help_texts = {
            "options": 'plain options as JSON, e.g. {"aws_region": "eu-west-1", "aws_endpoint": "https://...", '
            '"azure_storage_account_name": "acct"}; secrets go in the fields below',
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        stored = set(self.instance.secret_names or []) if self.instance.pk else set()
        for name in SECRET_FIELDS:
            self.fields[name].help_text = "set (hidden); leave blank to keep it" if name in stored else "not set"

    def clean_prefix(self) -> str:
        try:
            return canonical_prefix(self.cleaned_data["prefix"])
        except DeltaError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_options(self) -> dict[str, Any]:
        options = self.cleaned_data.get("options") or {}
        if not isinstance(options, dict) or not all(isinstance(v, (str, int, float, bool)) for v in options.values()):
            raise forms.ValidationError("options must be a JSON object of names to plain values")
        secret = sorted(k for k in options if is_secret_option(k))
        if secret:
            # a secret in the plain options would be stored unencrypted and shown on this page
            raise forms.ValidationError(
                f"{', '.join(secret)} look like secrets: put them in the secret fields, which are encrypted"
            )
        return {k: (v if isinstance(v, str) else str(v).lower()) for k, v in options.items()}

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        try:
            current = self.instance.secrets() if self.instance.pk else {}
        except CredentialsKeyError as exc:
            raise forms.ValidationError(
                f"the stored secrets cannot be read, so they cannot be changed: {exc}"
            ) from None
        for name in data.get("clear_secrets") or []:
            current.pop(name, None)
        current.update({name: data[name] for name in SECRET_FIELDS if data.get(name)})
        try:
            self.instance.set_secrets(current)
        except CredentialsKeyError as exc:
            raise forms.ValidationError(str(exc)) from None
        return data


@admin.register(StorageCredential)
class StorageCredentialAdmin(admin.ModelAdmin):
    form = StorageCredentialForm
    list_display = ["prefix", "description", "plain_options", "secrets_set", "updated_at", "updated_by"]
    readonly_fields = ["secrets_set", "updated_at", "updated_by"]
    search_fields = ["prefix", "description"]

    @admin.display(description="options")
    def plain_options(self, obj: StorageCredential) -> str:
        return ", ".join(f"{k}={v}" for k, v in sorted(obj.options.items())) or "—"

    @admin.display(description="secrets")
    def secrets_set(self, obj: StorageCredential) -> str:
        names = [SECRET_FIELDS.get(n, n) for n in obj.secret_names or []]
        return ", ".join(f"{n}: ********" for n in names) or "none"

    def save_model(self, request: Any, obj: StorageCredential, form: Any, change: bool) -> None:
        obj.updated_by = request.user
        super().save_model(request, obj, form, change)
