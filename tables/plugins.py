"""What apps that plug into tables contribute to its pages and metrics.

An app registers its contributions in its AppConfig.ready() (alerts/plugin.py is the worked
example); the host reads them here and names no plug-in, neither its models nor its templates.
Without a plug-in installed, every list below is empty and the pages show nothing of it.

- `TableFilter`: a status in the table list's filter, and the rows it keeps;
- `TableColumn`: a number column of the table list, counted for a page of tables at once;
- `OverviewPanel`: a card on a table's Overview, its template given `panel` (the context);
- `Include`: a template included in every page's navigation (`nav`) or in every tab of a
  table (`frame`, under the tabs);
- `Collector`: metric families yielded at each scrape of /metrics.

Registering again under the same key (a second ready(), a test) replaces the first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TableFilter:
    key: str  # the `status` query parameter's value
    label: str
    keep: Callable[[Any], Any]  # a QuerySet of Table -> the rows to show


@dataclass(frozen=True)
class TableColumn:
    key: str
    header: str
    counts: Callable[[list[int]], dict[int, int]]  # table ids -> each one's number (0 if absent)


@dataclass(frozen=True)
class OverviewPanel:
    key: str
    template: str
    context: Callable[[Any], dict[str, Any]]  # the Table -> what its template reads as `panel`


@dataclass(frozen=True)
class Include:
    key: str
    template: str
    place: str  # "nav" or "frame"


@dataclass(frozen=True)
class Collector:
    key: str
    collect: Callable[[], Iterable[object]]  # prometheus-client metric families


_REGISTRY: dict[type, dict[str, Any]] = {
    kind: {} for kind in (TableFilter, TableColumn, OverviewPanel, Include, Collector)
}


def register(*contributions: TableFilter | TableColumn | OverviewPanel | Include | Collector) -> None:
    """Add (or replace, by key) an app's contributions."""
    for item in contributions:
        _REGISTRY[type(item)][item.key] = item


def table_filters() -> list[TableFilter]:
    return list(_REGISTRY[TableFilter].values())


def table_columns() -> list[TableColumn]:
    return list(_REGISTRY[TableColumn].values())


def overview_panels() -> list[OverviewPanel]:
    return list(_REGISTRY[OverviewPanel].values())


def includes(place: str) -> list[str]:
    return [i.template for i in _REGISTRY[Include].values() if i.place == place]


def collectors() -> list[Collector]:
    return list(_REGISTRY[Collector].values())
