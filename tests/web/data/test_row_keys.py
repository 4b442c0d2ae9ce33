"""The preview's key for a row's history (tables.web.data.rows): which column is suggested, and the
page's rows in its order."""

from __future__ import annotations

from types import SimpleNamespace

from django.test import RequestFactory

from tables.web.data.rows import default_keys, preview_history


def col(name: str, type_: str = "long", nullable: bool | None = True) -> dict:
    return {"name": name, "type": type_, "nullable": nullable}


def test_the_only_never_null_column_is_the_suggested_key() -> None:
    assert default_keys([col("order_id", nullable=False), col("region", "string")], []) == ["order_id"]
    assert default_keys([col("region", "string", False), col("day", "date")], ["day"]) == ["day", "region"]
    assert default_keys([col("a", nullable=False), col("b", nullable=False)], []) == []  # two: ask
    assert default_keys([col("a"), col("id")], []) == ["id"]  # a column named id still wins
    assert default_keys([col("a", "struct", False)], []) == []  # not a key type


def test_the_preview_page_is_in_key_order() -> None:
    request = RequestFactory().get("/t/x/v/1/", {"hkey": "order_id"})
    job = SimpleNamespace(params={"version": 1}, table=None)
    rows = [{"order_id": 3}, {"order_id": None}, {"order_id": 1}, {"order_id": 2}]
    out = preview_history(request, job, [col("order_id")], rows)
    assert [r["order_id"] for r in rows] == [1, 2, 3, None]
    assert out["history_keys"] == ["order_id"]
