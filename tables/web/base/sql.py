"""Queries to copy (templates/tables/_sql.html): a version read in Spark and Databricks SQL, two
versions' rows compared."""

from __future__ import annotations

from tables.delta.history.timestamps import format_ms


def sql_identifier(location: str) -> str:
    """A path table in Spark SQL: delta.`location`, a backtick in the path doubled."""
    return "delta.`" + location.replace("`", "``") + "`"


def sql_snippets(location: str, version: int, timestamp_ms: int | None) -> list[dict[str, str]]:
    """The queries that read this version, in Spark and Databricks SQL (VERSION AS OF,
    TIMESTAMP AS OF and Databricks' @v shorthand)."""
    ident = sql_identifier(location)
    out = [{"label": "Spark SQL, by version", "sql": f"SELECT * FROM {ident} VERSION AS OF {version}"}]
    if timestamp_ms is not None:
        ts = format_ms(timestamp_ms)  # ISO-8601 with Z: UTC whatever the session's time zone
        out.append({"label": "Spark SQL, by time", "sql": f"SELECT * FROM {ident} TIMESTAMP AS OF '{ts}'"})
    out.append({"label": "Databricks SQL", "sql": f"SELECT * FROM {ident}@v{version}"})
    return out


def diff_sql(location: str, v_from: int, v_to: int) -> list[dict[str, str]]:
    """Rows in one version and not the other, as queries (Spark and Databricks SQL alike)."""
    ident = sql_identifier(location)
    a, b = f"{ident} VERSION AS OF {v_from}", f"{ident} VERSION AS OF {v_to}"
    return [
        {"label": f"rows in {v_to} and not in {v_from}", "sql": f"SELECT * FROM {b}\nEXCEPT ALL\nSELECT * FROM {a}"},
        {"label": f"rows in {v_from} and not in {v_to}", "sql": f"SELECT * FROM {a}\nEXCEPT ALL\nSELECT * FROM {b}"},
    ]
