"""Every data-job kind the database knows has one declaration, and the declarations drive the
task's work and the reuse rule (tables.services.data.kinds)."""

from __future__ import annotations

import pytest

from tables.models import JobKind
from tables.services.data.kinds import DATA_KINDS, KEPT, UNCHANGED, data_kind


def test_each_data_kind_is_declared_once() -> None:
    assert sorted(DATA_KINDS) == sorted(JobKind.data_kinds())
    assert {k.reuse for k in DATA_KINDS.values()} <= {KEPT, UNCHANGED}
    with pytest.raises(ValueError, match="unknown data job kind 'sync'"):
        data_kind(JobKind.SYNC)


def test_a_kind_says_what_it_is_doing_from_its_parameters() -> None:
    assert data_kind("rowdiff").doing({"from": 1, "to": 3, "keys": ["id", "region"]}) == (
        "joining versions 1 and 3 on id, region"
    )
    assert "id=7" in data_kind("rowhistory").doing({"key": {"id": "7"}, "from": 0, "to": 2})
