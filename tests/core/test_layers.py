"""The layers, declared once and held against every import of the code, inside functions too.

A module may import its own layer's package and the layers below it, never one above, and
never a sibling of its own layer (the pages and the API stand side by side). The plug-ins
(alerts, credentials) sit above the host, which never imports them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

# lowest first: each layer's packages and modules; one tuple, side by side
LAYERS: tuple[tuple[str, ...], ...] = (
    ("tables.delta",),
    ("tables.spark",),
    ("tables.models", "tables.signals", "tables.apps", "tables.plugins"),
    ("tables.services",),
    ("tables.api", "tables.web"),
    ("tables.site",),
    ("tables.tasks", "tables.admin", "tables.urls", "tables.management", "tables.templatetags"),
    ("alerts", "credentials"),
)
# inside the core, lowest first: its folders in the order they build on each other
CORE: tuple[tuple[str, ...], ...] = (
    ("tables.delta.errors", "tables.delta.text_bounds", "tables.delta.gc_pause", "tables.delta.json_values"),
    ("tables.delta.storage",),
    ("tables.delta.log",),
    ("tables.delta.managed",),
    ("tables.delta.snapshot",),
    ("tables.delta.predicates",),  # the one partition-predicate evaluator (restore, sharing)
    ("tables.delta.history",),
    ("tables.delta.write",),
    ("tables.delta.restore",),
    ("tables.delta.discover", "tables.delta.cli"),
)
# inside a package, lowest first, the same rule: a module imports its own entry (a module, or a
# folder taken whole) and the layers below, never one above or beside it, at module level or
# inside a function alike. The imports made inside functions today (to keep a module light to
# import) all point down this order, so none is an exception.
ROW_HISTORY: tuple[tuple[str, ...], ...] = tuple(
    (f"tables.delta.history.row_history.{name}",) for name in ("key", "pruning", "reader", "plan", "replay")
)
CLI: tuple[tuple[str, ...], ...] = tuple(
    tuple(f"tables.delta.cli.{name}" for name in layer)
    for layer in (
        ("base",),  # exit statuses, the `error:` line, the text table
        # the options beside one module per subcommand or group of them (its payload, its text)
        ("parser", "snapshot", "history", "restore", "reachability", "row_history", "verify", "audit"),
        ("entry",),  # main, script, execute: a subcommand's module is imported once it runs
        ("__main__",),  # python -m tables.delta.cli
    )
)
SERVICES: tuple[tuple[str, ...], ...] = tuple(
    tuple(f"tables.services.{name}" for name in layer)
    for layer in (
        ("errors",),  # the app's errors and their statuses
        ("access",),  # who may do what
        ("approvals",),  # request, decide, audit: what pins and restores share
        ("jobs",),  # the job rows, the broker, injected faults
        ("catalog",),  # registering and finding tables, where tables may live
        ("history", "owner", "pins"),  # a table's stored history, its owner, its pins
        ("chain",),  # what was first seen of each commit, and the signed audit export made from it
        ("versions",),  # reading a version, from the table or a pin; reachability
        ("data", "sharing"),  # data jobs on Spark; Delta Sharing's answers
        ("sync", "query"),  # syncing a table's log runs its counts and reachability
        ("managed", "ops"),  # deltaweb as a commit-owner; operations
        ("restores",),  # a restore syncs, pins, plans and commits
    )
)
WEB: tuple[tuple[str, ...], ...] = tuple(
    tuple(f"tables.web.{name}" for name in layer)
    for layer in (
        ("base",),  # what every page is made of: ui, forms, presentation, charts, static files
        # sign-in and the account; operators' endpoints; data jobs' rows and a row's history;
        # pins and restore requests; the table list and discovery
        ("account", "ops", "data", "approvals", "catalog"),
        ("tabs",),  # a table's tabs show its pins and rows
    )
)
API: tuple[tuple[str, ...], ...] = tuple(
    tuple(f"tables.api.{name}" for name in layer)
    for layer in (
        ("base",),  # tokens, parameters, parsers, roles, the error format, shared fields, paging
        ("jobs", "pins"),  # a job's body (every answer that starts one carries it); pins
        ("history",),  # commits, their export, the timeline (a table's ICT block), audit, removals
        ("versions",),  # one version, reachability, resolve (reachability's entry), diff, schema
        # what stands on the versions (data jobs take diff's two-version query) and on base alone:
        # deltaweb's other endpoints, the catalog's, Delta Sharing's
        ("data", "restores", "owner", "discovery", "auth", "catalog", "sharing"),
        ("tables",),  # TableViewSet: composed of the concepts' table actions
        ("urls",),
    )
)
INSIDE = {
    "tables.delta.history.row_history": ROW_HISTORY,
    "tables.delta.cli": CLI,
    "tables.services": SERVICES,
    "tables.web": WEB,
    "tables.api": API,
}
CODE = ("tables", "alerts", "credentials")


def layer_of(module: str, layers: tuple[tuple[str, ...], ...] = LAYERS) -> tuple[int, str] | None:
    for index, members in enumerate(layers):
        for member in members:
            if module == member or module.startswith(member + "."):
                return index, member
    return None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(here: str, source: str, is_package: bool = False) -> list[tuple[str, int]]:
    """Every module the source of module `here` imports, wherever the statement is, relative
    ones resolved."""
    package = here if is_package else here.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            found += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
    return found


def violations(here: str, source: str, is_package: bool = False, layers=LAYERS) -> list[str]:
    mine = layer_of(here, layers)
    if mine is None:
        return []
    out = []
    for target, line in imported(here, source, is_package):
        theirs = layer_of(target, layers)
        if theirs is not None and theirs[1] != mine[1] and theirs[0] >= mine[0]:
            out.append(f"{here}:{line} imports {target} (a layer above it, or beside it)")
    return out


def code_files() -> list[Path]:
    return [
        path
        for top in CODE
        for path in sorted((REPO / top).rglob("*.py"))
        if "migrations" not in path.parts and "__pycache__" not in path.parts
    ]


def test_every_module_of_the_code_is_in_a_declared_layer() -> None:
    loose = [module_name(p) for p in code_files() if layer_of(module_name(p)) is None]
    assert loose == [p for p in loose if p in CODE], f"put these in a layer: {loose}"


def test_no_import_points_up_or_sideways() -> None:
    found = [v for p in code_files() for v in violations(module_name(p), p.read_text(), p.name == "__init__.py")]
    assert found == []


def test_the_cores_folders_import_only_those_below_them() -> None:
    """storage, then the log, owners, a version's state, history, writing, RESTORE: a folder
    never imports one above it (writing reads the state; reading never writes)."""
    core = [p for p in code_files() if module_name(p).startswith("tables.delta")]
    loose = [module_name(p) for p in core if layer_of(module_name(p), CORE) is None]
    assert loose == ["tables.delta"]
    found = [v for p in core for v in violations(module_name(p), p.read_text(), p.name == "__init__.py", CORE)]
    assert found == []
    assert violations(
        "tables.delta.log.listing", "from tables.delta.snapshot.state import load_snapshot\n", layers=CORE
    )


def test_an_import_against_the_order_is_caught_even_inside_a_function() -> None:
    """The check itself: what a core module, a Spark job and a page must not do."""
    inside = "def f():\n    from tables.services.jobs import lifecycle\n    return lifecycle\n"
    assert violations("tables.delta.write.commit", inside) == [
        "tables.delta.write.commit:2 imports tables.services.jobs.lifecycle (a layer above it, or beside it)"
    ]
    assert violations("tables.spark.jobs.preview", "from ...services.jobs import send\n")
    assert violations("tables.web.base.ui", "from tables.api.errors import api_error\n")
    assert violations("tables.models", "import alerts.models\n")
    assert not violations("tables.api.data.rows", "from tables.spark.results import read_page\n")


def test_the_host_names_no_plug_in_outside_the_registrys_documentation() -> None:
    """tables/ and the project's templates reach the alerts app only through tables.plugins."""
    named = [
        f"{path.relative_to(REPO)}:{n}"
        for top in ("tables", "templates")
        for path in sorted((REPO / top).rglob("*"))
        if path.suffix in (".py", ".html") and "migrations" not in path.parts
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "alerts" in line and path != REPO / "tables" / "plugins.py"
    ]
    assert named == []


@pytest.mark.parametrize("package", list(INSIDE))
def test_every_module_inside_a_package_with_an_order_is_in_its_order(package: str) -> None:
    mine = [p for p in code_files() if module_name(p).startswith(package + ".") or module_name(p) == package]
    loose = [module_name(p) for p in mine if layer_of(module_name(p), INSIDE[package]) is None]
    assert loose == [package], f"put these in a layer of {package}: {[m for m in loose if m != package]}"


@pytest.mark.parametrize("package", list(INSIDE))
def test_inside_a_package_no_import_runs_back_up(package: str) -> None:
    mine = [p for p in code_files() if module_name(p).startswith(package + ".")]
    found = [
        v for p in mine for v in violations(module_name(p), p.read_text(), p.name == "__init__.py", INSIDE[package])
    ]
    assert found == []


def test_an_import_back_up_inside_the_services_or_the_api_is_caught() -> None:
    """The check itself: a job row importing a restore, a job's body importing the table's view."""
    inside = "def f():\n    from tables.services.restores import runs\n    return runs\n"
    assert violations("tables.services.jobs.lifecycle", inside, layers=SERVICES) == [
        "tables.services.jobs.lifecycle:2 imports tables.services.restores.runs (a layer above it, or beside it)"
    ]
    assert violations("tables.api.jobs", "from .tables import TableViewSet\n", layers=API)
    assert violations("tables.api.history.timeline", "from tables.api.versions.diff import DiffActions\n", layers=API)
    assert not violations("tables.api.tables", "from tables.api.restores import RestoreActions\n", layers=API)
    assert violations("tables.web.base.ui", "from tables.web.tabs.history import history\n", layers=WEB)
    assert violations("tables.web.data.rows", "from tables.web.approvals.pins import pins_context\n", layers=WEB)
    assert not violations(
        "tables.services.restores.runs", "from tables.services.pins import lifecycle\n", layers=SERVICES
    )
