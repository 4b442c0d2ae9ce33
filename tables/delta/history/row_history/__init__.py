"""The history of one row: the versions of a range where the row with a given key was inserted,
changed or deleted, its values before and after, who committed each and when.

Rules:
- The key is one or more top-level columns with values given as text, cast to the column's
  type in the range's last schema (byte, short, integer, long, string, date, decimal(p,s),
  boolean); an unknown column, a type that cannot be a key or text that does not cast raises
  InvalidColumnsError. More than one row with the key, at `start` or after any version, raises
  InvalidColumnsError (key not unique) rather than picking one.
- The row present at `start` is an insert at `start`, with that commit's user and time (the
  versions before `start` are not looked at). After that, a version is an event when the
  row's values differ before and after it: an insert, an update (the columns whose values
  differ are `changed`; an insert or a delete lists every column) or a delete. A version that
  rewrites the row with the same values (OPTIMIZE, an UPDATE setting the value it had) is not
  one.
- What changed in each version comes from `snapshot.changes.plan_changes` (change data files
  where a commit has them, else its added and removed files with their deletion vectors), so
  this package holds no second copy of those rules. The row is carried forward from version to
  version: only files of a version that could hold the key are read, never a whole snapshot
  again.
- Pruning, before any data file is read: a file whose partition values differ from the key's
  (for key columns that partition the table), or whose statistics (`minValues`, `maxValues`,
  `nullCount`, `numRecords` of its add) rule the key out, is skipped. Change data files carry
  no statistics, so a version with change data is read only when one of its added or removed
  files could hold the key. Truncated string statistics are compared as prefixes.
- Timestamps follow tables.delta.history.timestamps (In-Commit Timestamps from the enablement
  version on, monotonized file times before), as `plan_changes` gives them; the user is the
  commitInfo's userName, else its userId.
- Values are read with the range's last schema: column mapping (name and id) gives the logical
  names, partition values come from the log, a column a file lacks is null.
- Planning and reading are apart: `plan_row_history` decides from the log alone which files of
  which versions are read (`RowPlan.reads`, every pruning decision above taken); a data engine
  reads those files' rows with the key (`ParquetKeyReader` with pyarrow, each file when the
  replay first needs it; tables.spark.jobs.row_history on Spark) and `replay` turns them into
  events, applying deletion vectors and row selections. `row_history` is the two with pyarrow.
- `RowHistory.to_dict` is JSON-safe, by tables.delta.json_values (the one rendering of values).

One module per concept, each importing only those listed before it: `key` (the key's
columns, typed), `pruning` (partition values and statistics), `reader` (the rows with the key of
one file: `ParquetKeyReader`), `plan` (`plan_row_history`, `RowPlan`) and `replay` (`replay`,
`RowHistory`, the events). Callers import each name from the module that defines it.

Pure: storage only through tables.delta.storage; no Django, no Spark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tables.delta.history.row_history.plan import plan_row_history
from tables.delta.history.row_history.reader import ParquetKeyReader
from tables.delta.history.row_history.replay import RowHistory
from tables.delta.history.row_history.replay import replay as replay_plan
from tables.delta.storage.api import Storage

__all__ = ["row_history"]


def row_history(
    location: str | Storage,
    key: Mapping[str, Any] | Iterable[tuple[str, Any]],
    start: int | None = None,
    end: int | None = None,
) -> RowHistory:
    """The history of the row with `key` (column -> value text) in versions start..end
    (default: the earliest version the log can rebuild .. the latest); see the package's rules.
    The planned files are read with pyarrow, each when the replay first needs it."""
    plan = plan_row_history(location, key, start, end)
    return replay_plan(plan, ParquetKeyReader(plan.storage, plan.layout, plan.keys))
