"""`cairn runs list` and `cairn runs show`: read-only views of stored runs.

They open the database with an engine that has no workers, so looking never executes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import UTC, datetime
from typing import Any

from rich.console import Group
from rich.text import Text

from cairn.cli import options, output
from cairn.models import RunStatus
from cairn.runtime.control import RunControl
from cairn.runtime.engine import Engine
from cairn.store.records import RunRecord


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register `cairn runs list|show`."""
    runs = commands.add_parser(
        "runs", parents=[common], help="list and inspect runs", description="Inspect runs."
    )
    actions = runs.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser(
        "list",
        parents=[common],
        help="list runs, newest first",
        description="List runs, newest first, as a table or as JSON.",
    )
    listing.add_argument("--status", metavar="S", help="only runs in this status (e.g. FAILED)")
    listing.add_argument("--workflow", metavar="W", help="only runs of this workflow name")
    listing.add_argument(
        "--where",
        metavar="COL=VALUE",
        action="append",
        nargs="+",
        help="only runs whose column COL (set with cairn.set_columns) equals VALUE; VALUE is "
        "JSON when it parses, else a string; repeat to AND several",
    )
    listing.add_argument("--limit", metavar="N", type=int, default=50, help="at most N runs (50)")
    listing.add_argument("--cursor", metavar="C", help="continue after a previous page")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.set_defaults(handler=list_runs)

    show = actions.add_parser(
        "show",
        parents=[common],
        help="show one run: facts, step history, failed attempts",
        description="Show one run: its facts, its history of steps (with attempts and "
        "errors) and every failed attempt.",
    )
    show.add_argument("run_id", metavar="RUN_ID")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    show.set_defaults(handler=show_run)


def list_runs(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn runs list`."""
    status = None if ns.status is None else RunStatus.parse(ns.status)
    where = options.parse_where([item for group in ns.where or () for item in group])
    if ns.limit < 1:
        raise ValueError(f"--limit must be a positive integer, got {ns.limit}")
    options.import_modules(glob.modules)

    async def fetch() -> Any:
        async with Engine(glob.url, workers=0, modules=glob.modules) as engine:
            return await engine.list_runs(
                status=status,
                workflow=ns.workflow,
                columns=where or None,
                limit=ns.limit,
                cursor=ns.cursor,
            )

    page = asyncio.run(fetch())
    if ns.json:
        output.print_json(
            {"runs": [output.summary_dict(r) for r in page], "next_cursor": page.next_cursor}
        )
        return 0
    console = output.stdout()
    if not page.runs:
        console.print("no runs")
        return 0
    console.print(output.runs_table(page))
    if page.next_cursor is not None:
        output.stderr().print(
            f"more runs: add --cursor '{page.next_cursor}'", markup=False, style="dim"
        )
    return 0


def show_run(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn runs show`."""
    options.import_modules(glob.modules)

    async def fetch() -> tuple[RunRecord, Any, Any, Any, list[Any], list[dict[str, Any]]]:
        async with Engine(glob.url, workers=0, modules=glob.modules) as engine:
            control = engine.control
            run = await control.record(ns.run_id)
            history = await control.history(ns.run_id)
            attempts = await control.attempts(ns.run_id)
            args = _decode(control, run.args)
            result = _decode(control, run.result)
            error = None if run.error is None else json.loads(run.error)
            return run, args, result, error, history, attempts

    run, args, result, error, history, attempts = asyncio.run(fetch())
    if ns.json:
        output.print_json(
            {
                "run": run_dict(run, args, result, error),
                "history": [output.entry_dict(e) for e in history],
                "attempts": output.jsonable(attempts),
            }
        )
        return 0
    parts: list[Any] = [output.facts_table(run, args, result, error)]
    parts += [Text(""), Text(f"history ({len(history)})", style="bold underline")]
    parts.append(output.history_table(history) if history else Text("no steps yet"))
    if attempts:
        parts += [Text(""), Text(f"failed attempts ({len(attempts)})", style="bold underline")]
        parts.append(output.attempts_table(attempts))
    if error and error.get("traceback"):
        parts += [Text(""), Text("traceback", style="bold underline")]
        parts.append(Text(str(error["traceback"]).rstrip()))
    output.stdout().print(Group(*parts))
    return 0


def _decode(control: RunControl, text: str | None) -> Any:
    if text is None:
        return None
    try:
        return control.serializer.loads(text)
    except Exception:
        # Written by another serializer or a type no longer importable: show what is stored.
        return text


def run_dict(run: RunRecord, args: Any, result: Any, error: Any) -> dict[str, Any]:
    """The JSON form of one run's facts."""
    return {
        "run_id": run.run_id,
        "workflow": run.workflow,
        "status": run.status,
        "args": output.jsonable((args or {}).get("args", []) if isinstance(args, dict) else args),
        "kwargs": output.jsonable(args.get("kwargs", {}) if isinstance(args, dict) else {}),
        "result": output.jsonable(result),
        "error": output.jsonable(error),
        "created_at": output.jsonable(_utc(run.created_at)),
        "updated_at": output.jsonable(_utc(run.updated_at)),
        "started_at": output.jsonable(_utc(run.started_at)),
        "finished_at": output.jsonable(_utc(run.finished_at)),
        "attempt": run.attempt,
        "recoveries": run.recoveries,
        "max_recoveries": run.max_recoveries,
        "owner": run.owner,
        "wake_at": output.jsonable(_utc(run.wake_at)),
        "waiting_for": run.waiting_for,
        "parent_id": run.parent_id,
        "queue": run.queue,
        "priority": run.priority,
        "dedup_key": run.dedup_key,
        "partition": run.partition_key,
        "columns": json.loads(run.columns) if run.columns else {},
        "progress": json.loads(run.progress) if run.progress else None,
        "scheduled_at": output.jsonable(_utc(run.scheduled_at)),
        "continued_from": run.continued_from,
        "continued_to": run.continued_to,
    }


def _utc(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC)
