"""`cairn check`: import the workflow modules and print what they register (no database).

It fails when a module cannot be imported, a name is registered twice, or a schedule
starts a workflow nobody registered. With `--db URL` (or `--replay`, for the configured
database) it also replays every unfinished run against the code imported now, offline,
and exits 1 when any run would diverge: the gate before a deploy.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from typing import Any

from rich.console import Group
from rich.text import Text

from cairn import codecs, serialization
from cairn.authoring.registry import Registry, default_registry
from cairn.authoring.schedule_ticks import describe_seconds
from cairn.blobs import offloading
from cairn.cli import options, output
from cairn.errors import ConfigError
from cairn.runtime import deploy_check
from cairn.runtime.deploy_check import CheckReport
from cairn.store import opened


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
    parser.add_argument(
        "--replay",
        action="store_true",
        help="replay the unfinished runs of the configured database (implied by --db)",
    )
    parser.add_argument(
        "--workflow", metavar="NAME", default=None, help="replay only runs of this workflow"
    )
    parser.add_argument(
        "--sample",
        metavar="N",
        type=int,
        default=None,
        help="replay at most N unfinished runs per workflow",
    )
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
    """A titled table, one line a row at any width (output.FittedTable).

    The first column always shows, then the others in order while there is room (the
    function last; empty columns left out); names and functions are cut in the middle.
    """
    if not rows:
        return []
    heads = {c: c.replace("_", " ").upper() for c in columns}
    wants: dict[str, tuple[int | None, int, int | None]] = {}
    for rank, column in enumerate(columns):
        last = column == "function"  # where it is defined: after its settings
        wants[heads[column]] = (
            (16, 0, 40) if rank == 0 else (10, len(columns) if last else rank, 32)
        )
    cells: list[dict[str, str | Text]] = [
        {heads[c]: "" if row[c] is None else str(row[c]) for c in columns} for row in rows
    ]
    middle = [heads[c] for c in columns if c in ("name", "id", "function", "workflow")]
    table = output.FittedTable(
        wants, cells, optional=[heads[c] for c in columns[1:]], middle=middle
    )
    return [Text(f"{title} ({len(rows)})", style="bold underline"), table, Text("")]


def check(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn check`."""
    load(glob.modules)
    found = problems(default_registry)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise ConfigError(found[0] + more)
    explicit_db = getattr(ns, "db_cmd", None) or getattr(ns, "db", None)
    replaying = bool(explicit_db or ns.replay)
    if not replaying and (ns.sample is not None or ns.workflow is not None):
        raise options.UsageError("--sample and --workflow need --db URL (or --replay)")
    if ns.sample is not None and ns.sample < 1:
        raise options.UsageError(f"--sample must be at least 1, got {ns.sample}")
    facts = registered(default_registry, glob.modules)
    report = asyncio.run(_replay(glob.url, ns.workflow, ns.sample)) if replaying else None
    if ns.json:
        output.print_json(facts if report is None else {**facts, "replay": report.to_dict()})
        return 0 if report is None or report.ok else 1
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
    return 0 if report is None else print_replay(report)


def print_replay(report: CheckReport) -> int:
    """Print what `cairn check --db URL` found; 1 if any run would diverge."""
    out = output.stdout()
    if not report.workflows:
        out.print(Text("ok: no unfinished runs to replay", style="green"))
    for group in report.workflows:
        version = f" (version {group.version})" if group.version else ""
        line = Text(f"{group.workflow}{version}: {group.runs} unfinished, ")
        line.append(f"{group.clean} replay cleanly", style="green")
        if group.diverged:
            line.append(", ")
            line.append(f"{len(group.diverged)} diverge", style="red")
        if group.cache_misses:
            line.append(", ")
            misses = len(group.cache_misses)
            line.append(f"{misses} re-run steps their history has (cache misses)", style="yellow")
        out.print(line)
        for divergence in group.diverged:
            out.print(Text(f"  {divergence.describe()}", style="red"), soft_wrap=True)
        for miss in group.cache_misses:
            out.print(Text(f"  {miss.describe()}", style="yellow"), soft_wrap=True)
    for patch in report.patches:
        if patch.safe_to_remove:
            out.print(f"patch {patch.change_id!r}: no unfinished run predates it: safe to remove")
        else:
            runs = "run predates" if patch.predating == 1 else "runs predate"
            out.print(f"patch {patch.change_id!r}: {patch.predating} unfinished {runs} it")
    if report.ok:
        out.print(Text(f"ok: {report.runs} unfinished runs replay cleanly", style="green"))
        return 0
    output.stderr().print(
        f"error: {len(report.divergences)} of {report.runs} unfinished runs would diverge "
        "under this code",
        markup=False,
    )
    return 1


async def _replay(url: str, workflow: str | None, sample: int | None) -> CheckReport:
    async with opened(url, migrate=False) as store:  # a check changes no schema
        return await deploy_check.check(
            store,
            default_registry,
            # Encrypted values read with CAIRN_KEYS, offloaded ones fetched from the blob store.
            offloading(codecs.coding(serialization.get("json"), codecs.from_env()), store),
            workflow=workflow,
            sample=sample,
        )
