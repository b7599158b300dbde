"""The layers of src/cairn, pinned by reading the imports of every module in it.

Bottom to top: the plain modules (errors, models, names, serialization, ...), then store/
and authoring/ side by side, core/, runtime/, then client, testing/ and representation/,
and the surfaces cli/ and dashboard/ on top. Every import counts, at module level, inside
a function or under TYPE_CHECKING alike: a lazy import is still a dependency. The public
names of `cairn` and `cairn.testing` are pinned in tests/test_public_api.py; the layers are
drawn in docs/explanation/architecture.md.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "cairn"


@dataclass(frozen=True)
class Import:
    """One import statement's target, as a dotted name, and where it is."""

    module: str  # the importing module, e.g. cairn.cli.runs
    target: str  # what it imports, e.g. cairn.runtime.control or sqlite3
    line: int

    def __str__(self) -> str:
        return f"{self.module}:{self.line} imports {self.target}"


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(dotted: str) -> bool:
    base = SRC.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports_of(path: Path) -> list[Import]:
    """Every import in `path`; `from cairn import config` counts as cairn.config."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [Import(module, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x, from ..store import y
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                named = f"{base}.{alias.name}"
                target = named if is_module(named) else base
                found.append(Import(module, target, node.lineno))
    return found


ALL = [found for path in sorted(PACKAGE.rglob("*.py")) for found in imports_of(path)]


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def crossings(importer: str, imported: tuple[str, ...]) -> list[Import]:
    """Where a module of package `importer` imports from any of the packages `imported`."""
    return [
        found
        for found in ALL
        if within(found.module, importer) and any(within(found.target, p) for p in imported)
    ]


SURFACES = ("cairn.cli", "cairn.dashboard", "cairn.mcp_server")
# (importer, packages it must not import, why)
RULES = [
    (
        "cairn.store",
        ("cairn.core", "cairn.runtime", "cairn.authoring", "cairn.client", "cairn.testing"),
        "the store keeps records; it knows nothing of runs being executed",
    ),
    (
        "cairn.authoring",
        ("cairn.core", "cairn.runtime", "cairn.store", "cairn.client", "cairn.testing"),
        "what users write against is declared below the engine that runs it",
    ),
    (
        "cairn.core",
        ("cairn.runtime", "cairn.client", "cairn.testing", "cairn.representation", *SURFACES),
        "one run's execution knows nothing of workers, engines or surfaces",
    ),
    (
        "cairn.runtime",
        ("cairn.client", "cairn.testing", "cairn.representation", *SURFACES),
        "the engine and its workers serve every surface, and import none",
    ),
    ("cairn.client", ("cairn.testing", "cairn.representation", *SURFACES), "below surfaces"),
    ("cairn.testing", ("cairn.client", "cairn.representation", *SURFACES), "below surfaces"),
    (
        "cairn.representation",
        ("cairn.client", "cairn.testing", *SURFACES),
        "the JSON forms and words both surfaces share sit below both",
    ),
    (
        "cairn.dashboard",
        ("cairn.cli", "cairn.mcp_server"),
        "the dashboard shares cairn.representation, not the CLI",
    ),
    (
        "cairn.mcp_server",
        ("cairn.cli",),
        "the MCP tools share the verb table and cairn.representation, not the CLI",
    ),
    ("cairn.steps", ("cairn.core", "cairn.runtime", "cairn.store"), "step libraries are user code"),
    (
        "cairn.compat",
        ("cairn.core", "cairn.runtime", "cairn.store"),
        "other spellings are user code",
    ),
    (
        "cairn.observability",
        (
            "cairn.core",
            "cairn.runtime",
            "cairn.client",
            "cairn.testing",
            "cairn.representation",
            *SURFACES,
        ),
        "logs, metrics and traces read records and the run's context, and serve the engine",
    ),
    (
        "cairn.celery",
        ("cairn.client", "cairn.testing", *SURFACES),
        "a way to run workers, below surfaces",
    ),
    (
        "cairn.aws",
        ("cairn.core", "cairn.runtime", "cairn.store", "cairn.client", "cairn.testing", *SURFACES),
        "on Lambda the service checkpoints: cairn.aws implements RunContext over the AWS SDK",
    ),
]


def test_layers__contrib_uses_only_the_public_api():
    # Integrations with other libraries are user code: `import cairn` and one another.
    inner = [
        str(found)
        for found in ALL
        if within(found.module, "cairn.contrib")
        and within(found.target, "cairn")
        and found.target != "cairn"
        and not within(found.target, "cairn.contrib")
    ]
    assert inner == []
    assert crossings("cairn.contrib", ("cairn",)), "contrib's imports of cairn are read"


# The one import between the surfaces: `cairn dashboard` is the CLI command that starts
# the dashboard's server, so it imports the server (and its host check) to run it.
CLI_STARTS_DASHBOARD = {
    ("cairn.cli.dashboard", "cairn.dashboard.serve"),
    ("cairn.cli.dashboard", "cairn.dashboard.guard"),
}


# `cairn mcp` starts the MCP server the same way.
CLI_STARTS_MCP = {("cairn.cli.mcp", "cairn.mcp_server.serve")}


@pytest.mark.parametrize(("importer", "imported", "why"), RULES, ids=[r[0] for r in RULES])
def test_layers__a_package_imports_nothing_above_it(importer, imported, why):
    assert [str(found) for found in crossings(importer, imported)] == [], why


def test_layers__the_cli_imports_the_dashboard_only_to_start_it():
    found = crossings("cairn.cli", ("cairn.dashboard",))
    assert [str(f) for f in found if (f.module, f.target) not in CLI_STARTS_DASHBOARD] == []


def test_layers__the_cli_imports_the_mcp_server_only_to_start_it():
    found = crossings("cairn.cli", ("cairn.mcp_server",))
    assert [str(f) for f in found if (f.module, f.target) not in CLI_STARTS_MCP] == []
    assert {(f.module, f.target) for f in found} == CLI_STARTS_MCP


# The store's own drivers are the store's business; the step library (cairn.steps) talks
# to the application's databases, never to cairn's.
STORE_DRIVERS = ("sqlite3", "psycopg", "psycopg_pool")
APP_DATABASE_CLIENTS = ("sqlalchemy", "pymysql", "asyncpg", "aiosqlite", "psycopg2", "redis")


def test_layers__only_the_store_imports_a_database_driver():
    outside = [
        str(found)
        for found in ALL
        if any(within(found.target, d) for d in STORE_DRIVERS + APP_DATABASE_CLIENTS)
        and not (
            within(found.module, "cairn.store")
            and any(within(found.target, d) for d in STORE_DRIVERS)
        )
        and not (
            within(found.module, "cairn.steps")
            and any(within(found.target, d) for d in APP_DATABASE_CLIENTS)
        )
    ]
    assert outside == []


def test_layers__the_store_does_import_its_drivers():
    # Guards the test above against reading nothing: the store's backends are found.
    drivers = {found.target.partition(".")[0] for found in crossings("cairn.store", STORE_DRIVERS)}
    assert drivers == set(STORE_DRIVERS)


def test_layers__every_package_is_read():
    packages = {found.module.split(".")[1] for found in ALL if found.module.count(".") >= 1}
    named = {name.rpartition(".")[2] for name, _, _ in RULES} | {"observability", "contrib"}
    assert named <= packages


def test_layers__relative_and_from_imports_resolve():
    here = PACKAGE / "cli" / "runs.py"
    targets = {found.target for found in imports_of(here)}
    assert "cairn.representation.runs" in targets  # from cairn.representation import runs
    assert "cairn.cli.control" in targets  # from cairn.cli import control, ...


# A module split by concern keeps its hub: the satellites build on one another and the hub
# imports them, never the reverse, so each can be read without the hub.
SATELLITES = {
    # LiveRun's parts, and the functions LiveSteps hands itself to, which take a LiveView.
    "cairn.core.live_run": (
        "cairn.core.run_env",
        "cairn.core.live_attempt",
        "cairn.core.live_steps",
        "cairn.core.live_view",
        "cairn.core.live_waits",
        "cairn.core.attempts",
        "cairn.core.children",
        "cairn.core.durable",
        "cairn.core.emits",
        "cairn.core.failed_attempts",
        "cairn.core.mailbox",
        "cairn.core.remote_steps",
        "cairn.core.transaction_steps",
        "cairn.core.waits",
    ),
    "cairn.runtime.control": (
        "cairn.runtime.control_view",
        "cairn.runtime.handle",
        "cairn.runtime.local_executor",
        "cairn.runtime.run_reading",
        "cairn.runtime.run_waiting",
        "cairn.runtime.run_verbs",
    ),
    "cairn.runtime.engine": ("cairn.runtime.engine_verbs",),
    "cairn.runtime.worker": (
        "cairn.runtime.executing",
        "cairn.runtime.claiming",
        "cairn.runtime.reconciling",
    ),
    "cairn.serialization": (
        "cairn.serialization.classes",
        "cairn.serialization.json_text",
        "cairn.serialization.serializers",
        "cairn.serialization.tagged",
    ),
}


@pytest.mark.parametrize("hub", sorted(SATELLITES))
def test_layers__satellites_do_not_import_their_hub(hub):
    assert all(is_module(name) for name in SATELLITES[hub])
    found = [f for f in ALL if f.module in SATELLITES[hub] and f.target == hub]
    assert [str(f) for f in found] == []


# Packages whose modules import one another one way only: no circle, not even through an
# import under TYPE_CHECKING, so each module reads with what it imports and nothing above.
ACYCLIC = ("cairn.core", "cairn.store", "cairn.aws", "cairn.runtime", "cairn.authoring")


def circles(package: str) -> list[list[str]]:
    """The groups of modules of `package` that import one another round."""
    edges = [
        (found.module, found.target)
        for found in ALL
        if within(found.module, package) and within(found.target, package)
    ]
    return circles_in(edges)


def circles_in(edges: list[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected groups (two or more) of a graph's nodes (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for source, target in edges:
        if source != target:
            graph.setdefault(source, set()).add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


@pytest.mark.parametrize("package", ACYCLIC)
def test_layers__no_import_circle_within(package):
    assert circles(package) == []


# The classes once built as chains of base classes over several modules (RunControl,
# Worker), and the modules they hand themselves to: none of them is in an import circle.
SPLIT = (
    "cairn.runtime.control",
    "cairn.runtime.control_view",
    "cairn.runtime.run_reading",
    "cairn.runtime.run_waiting",
    "cairn.runtime.run_verbs",
    "cairn.runtime.catalog",
    "cairn.runtime.hooks",
    "cairn.runtime.queues",
    "cairn.runtime.scheduler",
    "cairn.runtime.schedules",
    "cairn.runtime.tasks",
    "cairn.runtime.triggers",
    "cairn.runtime.transient_rules",
    "cairn.runtime.worker",
    "cairn.runtime.executing",
    "cairn.runtime.claiming",
    "cairn.runtime.reconciling",
)


def test_layers__split_classes_are_in_no_import_circle():
    assert all(is_module(name) for name in SPLIT)
    circled = {module for group in circles("cairn") for module in group}
    assert sorted(circled & set(SPLIT)) == []


def test_layers__circles_are_found():
    # Guards the test above against finding nothing: a circle through a third module.
    edges = [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "d")]
    assert circles_in(edges) == [["a", "b", "c"]]


def test_layers__representation_shows_and_refuses_nothing():
    # What a verb refuses is decided where the verb is (runtime/steering.py for what the
    # surfaces refuse), never in the forms both surfaces print.
    raising = [
        f"{path.relative_to(SRC)}:{node.lineno}"
        for path in sorted((PACKAGE / "representation").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Raise)
    ]
    assert raising == []


# docs/explanation/architecture.md, the map of this code, kept true: the packages and
# modules it names exist and every one that exists is named; what it calls plain is.
DOC = (SRC.parent / "docs" / "explanation" / "architecture.md").read_text()
# The first ```-block of the doc: the drawing of the layers.
DRAWING = DOC.split("```", 2)[1]


def top_level() -> tuple[set[str], set[str]]:
    """The packages and the modules (without .py) directly in src/cairn."""
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    return packages, modules


def plain_in_doc() -> list[str]:
    listed = DRAWING.split("plain modules:", 1)[1]
    return [name.strip() for name in listed.replace("\n", " ").split(",") if name.strip()]


def test_architecture_doc__names_every_package_and_only_those():
    packages, _ = top_level()
    # `name/` standing alone (not the tail of a path like store/sqlite/, nor a folder
    # a path goes on into, like core/live_run.py).
    named = set(re.findall(r"(?<![\w/.])([a-z_]+)/(?![\w])", DOC))
    named |= packages & set(plain_in_doc())  # a plain package (serialization) is listed by name
    assert named - packages == set(), "the doc names packages that do not exist"
    assert packages - named == set(), "packages missing from the doc"


def test_architecture_doc__names_every_top_level_module():
    packages, modules = top_level()
    plain = set(plain_in_doc())
    assert plain <= packages | modules, "the doc calls plain what does not exist"
    named = plain | set(re.findall(r"(?<![\w/.])([a-z_]+)\.py\b", DOC))
    assert modules - named == set(), "modules of src/cairn missing from the doc"


def test_architecture_doc__plain_modules_import_only_plain_modules():
    plain = [f"cairn.{name}" for name in plain_in_doc()]
    upward = [
        str(found)
        for found in ALL
        if any(within(found.module, p) for p in plain)
        and within(found.target, "cairn")
        and not any(within(found.target, p) for p in plain)
    ]
    assert upward == [], "a module the doc calls plain imports from above"


def test_architecture_doc__names_every_store_program_module():
    programs = {p.name for p in (PACKAGE / "store" / "programs").glob("*.py")} - {"__init__.py"}
    # Listed in "Where a new store goes", item 2, by file name.
    item = DOC.split("2. Implements `Backend`.", 1)[1].split("\n3. ", 1)[0]
    named = set(re.findall(r"`([a-z_]+\.py)`", item))
    assert named == programs


def test_layers__the_plain_modules_import_no_circle():
    # errors.py and step_failures.py imported each other (StepFailed's rebuild from its
    # record): the plain modules stand in an order, each importing only those below it.
    plain = set(plain_in_doc())

    def top(dotted: str) -> str:
        return dotted.split(".")[1] if within(dotted, "cairn") and "." in dotted else ""

    imports: dict[str, set[str]] = {name: set() for name in plain}
    for found in ALL:
        importer, imported = top(found.module), top(found.target)
        if importer in plain and imported in plain and importer != imported:
            imports[importer].add(imported)

    def reached(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(imports[start])
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo += imports[name]
        return seen

    assert sorted(name for name in plain if name in reached(name)) == []


def test_modules__none_is_over_400_lines() -> None:
    """A module past 400 lines holds more than one job: split it where the jobs part."""
    long = {
        str(path.relative_to(SRC)): lines
        for path in PACKAGE.rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > 400
    }
    assert long == {}
