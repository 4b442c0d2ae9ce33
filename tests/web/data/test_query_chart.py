"""The Query tab's charts (tables.web.tabs.query): which result shapes get one, bars per
category, lines over time in time order, text escaped for plotly, and a comparison's per-group
change of its first numeric column."""

from __future__ import annotations

from tables.web.tabs.query import _change_chart, chart_of


def test_one_category_and_numeric_columns_make_bars() -> None:
    columns = [
        {"name": "region", "type": "string"},
        {"name": "n", "type": "long"},
        {"name": "t", "type": "decimal(10,2)"},
    ]
    rows = [{"region": "eu", "n": 2, "t": "3.50"}, {"region": "<b>us</b>", "n": 1, "t": None}]
    fig = chart_of(columns, rows)
    assert fig["kind"] == "bar" and [t["type"] for t in fig["data"]] == ["bar", "bar"]
    assert fig["data"][0]["x"] == ["eu", "&lt;b&gt;us&lt;/b&gt;"]
    assert fig["data"][1]["y"] == [3.5, None]


def test_one_time_column_makes_lines_in_time_order() -> None:
    columns = [{"name": "day", "type": "date"}, {"name": "n", "type": "long"}]
    rows = [{"day": "2026-01-02", "n": 5}, {"day": None, "n": 9}, {"day": "2026-01-01", "n": 3}]
    fig = chart_of(columns, rows)
    assert fig["kind"] == "line" and fig["layout"]["xaxis"]["type"] == "date"
    assert fig["data"][0]["x"] == ["2026-01-01", "2026-01-02"] and fig["data"][0]["y"] == [3, 5]


def test_other_shapes_get_no_chart() -> None:
    n = {"name": "n", "type": "long"}
    s = {"name": "s", "type": "string"}
    assert chart_of([n], [{"n": 1}]) is None  # no category
    assert chart_of([s, {"name": "u", "type": "string"}, n], [{"s": "a", "u": "b", "n": 1}]) is None
    assert chart_of([s], [{"s": "a"}]) is None  # nothing numeric
    assert chart_of([{"name": "b", "type": "binary"}, n], [{"b": "AA==", "n": 1}]) is None
    assert chart_of([s, n], []) is None


def test_a_comparison_charts_the_change_of_its_first_numeric_column() -> None:
    cmp = {
        "keys": ["region"],
        "numeric": ["n", "total"],
        "changed": [{"key": {"region": "us"}, "changes": [{"column": "n", "before": 3, "after": 5, "delta": 2.0}]}],
        "onlyFrom": [{"region": "eu", "n": 4}],
        "onlyTo": [{"region": "latam", "n": 1}],
    }
    fig = _change_chart(cmp)
    assert dict(zip(fig["data"][0]["x"], fig["data"][0]["y"], strict=True)) == {"eu": -4, "latam": 1, "us": 2.0}
    assert fig["column"] == "n" and fig["groups"] == 3
    assert _change_chart({**cmp, "numeric": []}) is None
    assert _change_chart({**cmp, "changed": [], "onlyFrom": [], "onlyTo": []}) is None
