"""The history's commitInfo columns, declared once.

Each `Column` is one DESCRIBE HISTORY column read from a commit's commitInfo: its name (the
commitInfo key, the API field and the export header), the database column it is cached in,
its kind, its bound, and how the History tab shows it. The core's history rows, the Commit
model's fields, the sync's INSERT, the API serializer, the CSV/Parquet export and the History
tab's table are all built from `COLUMNS`: adding a column is one entry here, a migration and a
test. The order is DESCRIBE HISTORY's.

Kinds: "text" (a string, cut to `max_length`; blank when absent), "json" (any JSON value,
bounded as a whole), "int" (an integer, not a bool), "bool".
Shown as: "text", "small" (small print), "num" (right-aligned), "yesno", "chips" (a JSON
object as key/value chips), "metrics" (chips, numbers with their units), "operation" (bold, with the restore request it carried out);
None: not a column of the tab (the API and the export still have it). Every DESCRIBE HISTORY
column is one today: those not `at_first` wait in the tab's column chooser.
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("text", "json", "int", "bool")
SHOWN = ("text", "small", "num", "yesno", "chips", "metrics", "operation")
MAX_TEXT = (
    10_000  # the bound of a text column without a length of its own (userMetadata), and of strings inside JSON columns
)


@dataclass(frozen=True)
class Column:
    name: str
    field: str
    kind: str
    max_length: int | None = None  # text only; None: a TextField cut at MAX_TEXT
    shown: str | None = None
    sort: str | None = None  # the history's sort key (`?sort=`) that orders by this column
    indexed: bool = False
    # shown before a reader chooses columns: the ones most read; the others are in the chooser
    # (all of them left the metrics column off-screen at 1,280 px)
    at_first: bool = True

    def __post_init__(self) -> None:
        if self.kind not in KINDS or (self.shown is not None and self.shown not in SHOWN):
            raise ValueError(f"history column {self.name}: kind {self.kind!r}, shown {self.shown!r}")

    @property
    def limit(self) -> int:
        """How long a stored text value may be."""
        return self.max_length or MAX_TEXT


COLUMNS: tuple[Column, ...] = (
    Column("userId", "user_id", "text", 500, shown="small", at_first=False),
    Column("userName", "user_name", "text", 500, shown="text", sort="user"),
    Column("operation", "operation", "text", 200, shown="operation", sort="operation", indexed=True),
    Column("operationParameters", "operation_parameters", "json", shown="chips"),
    Column("job", "job", "json", shown="chips", at_first=False),
    Column("notebook", "notebook", "json", shown="chips", at_first=False),
    Column("clusterId", "cluster_id", "text", 500, shown="small", at_first=False),
    Column("readVersion", "read_version", "int", shown="num", at_first=False),
    Column("isolationLevel", "isolation_level", "text", 100, shown="text", at_first=False),
    Column("isBlindAppend", "is_blind_append", "bool", shown="yesno", at_first=False),
    Column("operationMetrics", "operation_metrics", "json", shown="metrics"),
    Column("userMetadata", "user_metadata", "text", shown="small", at_first=False),
    Column("engineInfo", "engine_info", "text", 500, shown="small", at_first=False),
)

HISTORY_FIELDS = tuple(c.name for c in COLUMNS)
SHOWN_COLUMNS = tuple(c for c in COLUMNS if c.shown)
