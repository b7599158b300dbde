"""`cairn check`: import the workflow modules and print what they register (no database).

It fails when a module cannot be imported, a name is registered twice, or a schedule
starts a workflow nobody registered.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from cairn.authoring.registry import Registry, default_registry
from cairn.authoring.schedules import describe_seconds
from cairn.cli import options, output
from cairn.errors import ConfigError


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register `cairn check`."""
    parser = commands.add_parser(
        "check",
        parents=[common],
        help="import the workflow modules and list what they register",
        description="Import the workflow modules (-m, CAIRN_MODULES or [tool.cairn] "
        "modules) and print their workflows, steps, queues and schedules. Exits 1 when a "
        "module fails to import, a name is registered twice, or a schedule names an "
        "unknown workflow. The database is not opened.",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(handler=check)


def load(modules: tuple[str, ...]) -> None:
    """Import `modules`; a duplicate name becomes a one-line ConfigError saying so."""
    if not modules:
        raise ConfigError(
            "no workflow modules to check: pass -m MODULE, set CAIRN_MODULES, or list "
            "modules under [tool.cairn] in pyproject.toml"
        )
    for name in modules:
        try:
            options.import_module(name)
        except ConfigError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValueError) and "already" in str(cause):
                raise ConfigError(f"duplicate name in module {name!r}: {cause}") from cause
            raise


def problems(registry: Registry) -> list[str]:
    """What is registered but cannot work: schedules of unknown workflows."""
    return [
        f"schedule {sid!r} starts workflow {schedule.workflow!r}, which no module registers"
        for sid, schedule in sorted(registry.schedules.items())
        if schedule.workflow not in registry.workflows
    ]


def _where(fn: Callable[..., Any]) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


def _seconds(value: float | None) -> str | None:
    return None if value is None else describe_seconds(value)


def registered(registry: Registry, modules: tuple[str, ...]) -> dict[str, Any]:
    """The JSON form of what the modules registered."""
    return {
        "modules": list(modules),
        "workflows": [
            {
                "name": w.name,
                "function": _where(w.fn),
                "queue": w.queue,
                "on": w.on,
                "timeout": _seconds(w.timeout),
                "version": w.version,
                "max_recoveries": w.max_recoveries,
            }
            for w in sorted(registry.workflows.values(), key=lambda w: w.name)
        ],
        "steps": [
            {
                "name": s.name,
                "function": _where(s.fn),
                "max_attempts": s.retry.max_attempts,
                "timeout": _seconds(s.timeout),
            }
            for s in sorted(registry.steps.values(), key=lambda s: s.name)
        ],
        "queues": [
            {
                "name": q.name,
                "concurrency": q.concurrency,
                "per_worker": q.per_worker,
                "rate": q.rate,
                "partition_concurrency": q.partition_concurrency,
            }
            for q in sorted(registry.queues.values(), key=lambda q: q.name)
        ],
        "schedules": [
            {
                "id": s.id,
                "workflow": s.workflow,
                "when": s.describe(),
                "overlap": s.overlap,
            }
            for s in sorted(registry.schedules.values(), key=lambda s: s.id)
        ],
    }


def _table(title: str, rows: list[dict[str, Any]], columns: list[str]) -> list[Any]:
    if not rows:
        return []
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in columns:
        table.add_column(column.replace("_", " ").upper(), overflow="fold")
    for row in rows:
        table.add_row(*("" if row[c] is None else str(row[c]) for c in columns))
    return [Text(f"{title} ({len(rows)})", style="bold underline"), table, Text("")]


def check(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn check`."""
    load(glob.modules)
    found = problems(default_registry)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise ConfigError(found[0] + more)
    facts = registered(default_registry, glob.modules)
    if ns.json:
        output.print_json(facts)
        return 0
    parts: list[Any] = []
    parts += _table("workflows", facts["workflows"], ["name", "function", "queue", "on", "timeout"])
    parts += _table("steps", facts["steps"], ["name", "function", "max_attempts", "timeout"])
    parts += _table(
        "queues",
        facts["queues"],
        ["name", "concurrency", "per_worker", "rate", "partition_concurrency"],
    )
    parts += _table("schedules", facts["schedules"], ["id", "workflow", "when", "overlap"])
    counts = ", ".join(
        f"{len(facts[kind])} {kind if len(facts[kind]) != 1 else kind[:-1]}"
        for kind in ("workflows", "steps", "queues", "schedules")
    )
    parts.append(Text(f"ok: imported {', '.join(glob.modules)}: {counts}", style="green"))
    output.stdout().print(Group(*parts))
    if not facts["workflows"]:
        output.stderr().print(
            "note: no workflows registered; are these the modules that define them?",
            markup=False,
        )
    return 0
