"""Names handed to Spark as text: column names quoted as SQL identifiers, and file paths
escaped so that Hadoop's path globbing takes them literally (a table's file may be called
`a[1].parquet`)."""

from __future__ import annotations

import re

_GLOB = re.compile(r"([\\{}\[\]*?])")


def quote_column(name: str) -> str:
    """`name` as a backquoted identifier (a backquote inside it doubled)."""
    return "`" + name.replace("`", "``") + "`"


def escape_glob(path: str) -> str:
    """`path` with Hadoop's glob characters backslash-escaped."""
    return _GLOB.sub(r"\\\1", path)
