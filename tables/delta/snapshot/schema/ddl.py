"""A version's schema as the Spark SQL statement that creates it: CREATE TABLE ... USING delta
with its columns (nested types, NOT NULL, comments, generated and identity columns, defaults),
partition columns, the table's comment and the properties that matter, then its CHECK
constraints as ALTER TABLE statements.

Names are backquoted (a backquote doubled), strings are single-quoted literals with
backslashes, quotes and control characters escaped, so no name or value of the log can end
its token early. What only a writer keeps (the highest column-mapping id, row tracking's
materialized column names, In-Commit Timestamps' enablement, a commit owner's settings) is
left out: a new table gets its own. Types of the log are validated; one that is not a Delta
type is written as its name (letters, digits, underscores, an argument list of numbers), or
with every other character dropped.

Pure: metaData and protocol in, text out (no Spark).
"""

from __future__ import annotations

import re
from typing import Any

from tables.delta.log.actions import Metadata, Protocol
from tables.delta.snapshot.schema.schema_diff import parse_schema
from tables.delta.text_bounds import cut

MAX_DDL = 1 << 20  # characters: a statement longer than this is cut, and says so
MAX_EXPRESSION = 10_000  # a generation, default or constraint expression, a comment, a value

_PRIMITIVES = {
    "byte": "TINYINT",
    "short": "SMALLINT",
    "integer": "INT",
    "long": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "string": "STRING",
    "binary": "BINARY",
    "boolean": "BOOLEAN",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "timestamp_ntz": "TIMESTAMP_NTZ",
    "variant": "VARIANT",
    "void": "VOID",
}
_DECIMAL = re.compile(r"^decimal\(\s*(\d{1,3})\s*,\s*(\d{1,3})\s*\)$")
_TYPE_NAME = re.compile(r"[a-z_][a-z0-9_]*(\(\s*\d{1,5}(\s*,\s*\d{1,5})*\s*\))?")

# properties a writer maintains for itself, not a choice of the table's owner
_INTERNAL_PROPERTIES = frozenset(
    {
        "delta.columnMapping.maxColumnId",
        "delta.rowTracking.materializedRowIdColumnName",
        "delta.rowTracking.materializedRowCommitVersionColumnName",
        "delta.inCommitTimestampEnablementVersion",
        "delta.inCommitTimestampEnablementTimestamp",
        "delta.inCommitTimestampEnablementVersion-preview",
        "delta.inCommitTimestampEnablementTimestamp-preview",
    }
)
_INTERNAL_PREFIXES = ("delta.coordinatedCommits.", "delta.managedCommit.", "io.unitycatalog.", "delta.constraints.")
# table features no property or column turns on by itself: the statement asks for them
_EXPLICIT_FEATURES = ("allowColumnDefaults", "vacuumProtocolCheck")
CONSTRAINT_PREFIX = "delta.constraints."


def quote_identifier(name: str) -> str:
    """A name as a Spark SQL identifier: backquoted, a backquote doubled."""
    return "`" + name.replace("`", "``") + "`"


_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0"}


def sql_string(value: str) -> str:
    """A Spark SQL string literal: single quotes, backslash escapes for the quote, the
    backslash and control characters (Spark's default parser reads backslash escapes)."""
    return "'" + "".join(_ESCAPES.get(ch, ch) for ch in value) + "'"


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def sql_type(dtype: Any) -> str:
    """A Delta schema type in Spark SQL (`BIGINT`, `DECIMAL(10,2)`, `ARRAY<INT>`,
    `MAP<STRING, BIGINT>`, `STRUCT<`a`: INT NOT NULL>`)."""
    if isinstance(dtype, str):
        t = dtype.strip().lower()
        if t in _PRIMITIVES:
            return _PRIMITIVES[t]
        m = _DECIMAL.match(t)
        if m:
            return f"DECIMAL({int(m.group(1))},{int(m.group(2))})"
        if _TYPE_NAME.fullmatch(t):
            return t.upper()[:200]
        return re.sub(r"\W", "", t).upper()[:200] or "STRING"  # never a bracket or a quote of the log
    if isinstance(dtype, dict):
        kind = dtype.get("type")
        if kind == "array":
            return f"ARRAY<{sql_type(dtype.get('elementType'))}>"
        if kind == "map":
            return f"MAP<{sql_type(dtype.get('keyType'))}, {sql_type(dtype.get('valueType'))}>"
        if kind == "struct":
            fields = [f for f in dtype.get("fields") or [] if isinstance(f, dict)]
            return "STRUCT<" + ", ".join(_struct_field(f) for f in fields) + ">"
    return "STRING"


def _comment(meta: dict[str, Any]) -> str:
    text = _str(meta.get("comment"))
    return f" COMMENT {sql_string(cut(text, MAX_EXPRESSION))}" if text else ""


def _field_type(f: dict[str, Any], meta: dict[str, Any]) -> str:
    """A field's type, a string's collation included (metadata `__COLLATIONS`, keyed by the
    field's name, valued `provider.NAME`)."""
    collations = meta.get("__COLLATIONS")
    collation = collations.get(f.get("name")) if isinstance(collations, dict) else None
    base = sql_type(f.get("type"))
    if base != "STRING" or not isinstance(collation, str):
        return base
    name = re.sub(r"[^A-Za-z0-9_]", "", collation.rsplit(".", 1)[-1])
    return f"STRING COLLATE {name}" if name else base


def _struct_field(f: dict[str, Any]) -> str:
    meta = f.get("metadata") if isinstance(f.get("metadata"), dict) else {}
    null = " NOT NULL" if f.get("nullable", True) is False else ""
    return f"{quote_identifier(str(f.get('name')))}: {_field_type(f, meta)}{null}{_comment(meta)}"


def _generated(meta: dict[str, Any]) -> str:
    """A column's GENERATED ... or DEFAULT clause, from its field metadata."""
    expr = _str(meta.get("delta.generationExpression"))
    if expr:
        return f" GENERATED ALWAYS AS ({cut(expr, MAX_EXPRESSION)})"
    start, step = meta.get("delta.identity.start"), meta.get("delta.identity.step")
    if type(start) is int and type(step) is int:
        how = "BY DEFAULT" if meta.get("delta.identity.allowExplicitInsert") is True else "ALWAYS"
        return f" GENERATED {how} AS IDENTITY (START WITH {start} INCREMENT BY {step})"
    default = _str(meta.get("CURRENT_DEFAULT"))
    return f" DEFAULT {cut(default, MAX_EXPRESSION)}" if default else ""


def column_definition(f: dict[str, Any]) -> str:
    """One top-level column of CREATE TABLE."""
    meta = f.get("metadata") if isinstance(f.get("metadata"), dict) else {}
    null = " NOT NULL" if f.get("nullable", True) is False else ""
    name = quote_identifier(str(f.get("name")))
    return f"{name} {_field_type(f, meta)}{null}{_generated(meta)}{_comment(meta)}"


def table_properties(md: Metadata, protocol: Protocol, schema: dict[str, Any]) -> dict[str, str]:
    """The properties CREATE TABLE sets: the table's own (writers' bookkeeping left out) and
    the features nothing else in the statement would turn on."""
    props = {
        str(k): str(v)
        for k, v in md.configuration.items()
        if k not in _INTERNAL_PROPERTIES and not str(k).startswith(_INTERNAL_PREFIXES)
    }
    features = set(protocol.writer_features or ()) if protocol.min_writer_version >= 7 else set()
    wanted = {f for f in _EXPLICIT_FEATURES if f in features}
    if any("CURRENT_DEFAULT" in (f.get("metadata") or {}) for f in _fields(schema)):
        wanted.add("allowColumnDefaults")  # DEFAULT in CREATE TABLE needs the feature named
    for feature in sorted(wanted):
        props[f"delta.feature.{feature}"] = "supported"
    return dict(sorted(props.items()))


def _fields(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in schema.get("fields") or [] if isinstance(f, dict)]


def create_table_ddl(md: Metadata, protocol: Protocol, name: str | None = None, where: str = "") -> str:
    """CREATE TABLE for a version's metaData and protocol, named `name` (else the metaData's
    name, else `table`), then one ALTER TABLE ... ADD CONSTRAINT per CHECK constraint."""
    schema = parse_schema(md, where)
    ident = quote_identifier(name or md.name or "table")
    columns = ",\n".join(f"  {column_definition(f)}" for f in _fields(schema))
    lines = [f"CREATE TABLE {ident} (\n{columns}\n)", "USING delta"]
    if md.partition_columns:
        lines.append("PARTITIONED BY (" + ", ".join(quote_identifier(c) for c in md.partition_columns) + ")")
    if md.description:
        lines.append(f"COMMENT {sql_string(cut(md.description, MAX_EXPRESSION))}")
    props = table_properties(md, protocol, schema)
    if props:
        body = ",\n".join(f"  {sql_string(k)} = {sql_string(cut(v, MAX_EXPRESSION))}" for k, v in props.items())
        lines.append(f"TBLPROPERTIES (\n{body}\n)")
    statements = ["\n".join(lines) + ";"]
    for key, expr in sorted(md.configuration.items()):
        if str(key).startswith(CONSTRAINT_PREFIX) and isinstance(expr, str):
            constraint = quote_identifier(str(key)[len(CONSTRAINT_PREFIX) :])
            statements.append(f"ALTER TABLE {ident} ADD CONSTRAINT {constraint} CHECK ({cut(expr, MAX_EXPRESSION)});")
    return cut("\n".join(statements), MAX_DDL)
