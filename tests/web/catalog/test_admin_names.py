"""The admin console names every model's list in good English: no "Recipient querys"."""

from __future__ import annotations

import re

from django.apps import apps


def test_every_models_plural_name_is_spelled_right() -> None:
    wrong = {
        m._meta.label: str(m._meta.verbose_name_plural)
        for m in apps.get_models()
        if re.search(r"[^aeiou]ys$|(ss|x|ch|sh)s$", str(m._meta.verbose_name_plural))
    }
    assert wrong == {}
