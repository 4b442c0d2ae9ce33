"""The one rendering of values (tables.delta.json_values): what a preview, a diff, a query's
result and a row's history all show for the same value."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal

import pyarrow as pa

from tables.delta.json_values import json_value


def test_a_duration_is_iso_8601() -> None:
    cases = {
        timedelta(0): "PT0S",
        timedelta(days=1, hours=2, minutes=3, seconds=4, milliseconds=500): "P1DT2H3M4.5S",
        timedelta(seconds=-1): "-PT1S",
        timedelta(microseconds=1): "PT0.000001S",
        timedelta(days=3): "P3D",
        timedelta(days=-1, seconds=5): "-PT23H59M55S",
    }
    assert {td: json_value(td) for td in cases} == cases


def test_a_query_result_and_a_row_history_render_alike() -> None:
    # the same values through Arrow (a query's result page) and untyped (a row's history key)
    table = pa.table(
        {
            "d": pa.array([Decimal("1E+2")], pa.decimal128(10, 0)),
            "gap": pa.array([timedelta(hours=1, seconds=1)], pa.duration("us")),
            "m": pa.array([[(1, "a"), (2, None)]], pa.map_(pa.int32(), pa.string())),
            "s": pa.array([{"x": Decimal("0.10")}], pa.struct([("x", pa.decimal128(4, 2))])),
        }
    )
    row = table.to_pylist()[0]
    typed = {k: json_value(v, table.schema.field(k).type) for k, v in row.items()}
    assert typed == {
        "d": "100",
        "gap": "PT1H1S",
        "m": [{"key": 1, "value": "a"}, {"key": 2, "value": None}],
        "s": {"x": "0.10"},
    }
    assert json_value(Decimal("1E+2")) == typed["d"]
    assert json_value(timedelta(hours=1, seconds=1)) == typed["gap"]
    json.dumps(typed, allow_nan=False)
