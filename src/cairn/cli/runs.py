"""`cairn runs list` and `cairn runs show`: read-only views of stored runs.

They open the database with an engine that has no workers, so looking never executes.
The verbs that steer a run (`cancel`, `pause`, ...) are registered here from `control`.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from cairn.cli import control, describe, options, output
from cairn.models import HistoryEntry, RunStatus
from cairn.runtime import blocking, leases
from cairn.runtime.control import RunControl
from cairn.store.records import RunRecord


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register `cairn runs list|show|cancel|pause|resume|retry|restart|fork`."""
    runs = commands.add_parser(
        "runs",
        parents=[common],
        help="list, inspect and steer runs",
        description="Inspect runs, and cancel, pause, resume, retry, restart or fork them.",
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
        "--version", metavar="V", help="only runs started under this workflow version"
    )
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

    control.add_run_actions(actions, common)


def list_runs(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn runs list`."""
    status = None if ns.status is None else RunStatus.parse(ns.status)
    where = options.parse_where([item for group in ns.where or () for item in group])
    if ns.limit < 1:
        raise ValueError(f"--limit must be a positive integer, got {ns.limit}")
    page = options.with_engine(
        glob,
        lambda engine: engine.list_runs(
            status=status,
            workflow=ns.workflow,
            columns=where or None,
            limit=ns.limit,
            cursor=ns.cursor,
            version=ns.version,
        ),
    )
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
    for run in page:
        if run.spinning:  # seen whatever the table's width cuts off
            output.stderr().print(
                f"run {run.run_id} {run.waiting_for}; see `cairn runs show {run.run_id}`",
                markup=False,
                style="red",
            )
    if page.next_cursor is not None:
        output.stderr().print(
            f"more runs: add --cursor '{page.next_cursor}'", markup=False, style="dim"
        )
    return 0


@dataclass(frozen=True, slots=True)
class Shown:
    """Everything `cairn runs show` prints about one run."""

    run: RunRecord
    args: Any
    result: Any
    error: dict[str, Any] | None
    history: list[HistoryEntry]
    attempts: list[dict[str, Any]]
    waiting: dict[str, Any] | None
    now: float


async def fetch(control: RunControl, run_id: str) -> Shown:
    """Read one run, its history, failed attempts and what it waits for.

    The dashboard's `GET /api/v1/runs/{id}` shows the same facts.
    """
    run = await control.record(run_id)
    history = await control.history(run_id)
    attempts = await control.attempts(run_id)
    now = control.clock.now()
    task_id = None
    if run.status == RunStatus.WAITING and (run.waiting_for or "").startswith("task:"):
        task_id = await open_task(control, run)
    waiting = blocking.waiting(run, now=now, task_id=task_id)
    if waiting is not None and waiting["kind"] == "worker":
        known = leases.known_workflows(await control.store.list_workers())
        if known is not None and run.workflow not in known:
            waiting["workers_know"] = sorted(known)  # and none of them executes this one
    return Shown(
        run=run,
        args=_decode(control, run.args),
        result=_decode(control, run.result),
        error=None if run.error is None else json.loads(run.error),
        history=list(history),
        attempts=attempts,
        waiting=waiting,
        now=now,
    )


async def open_task(control: RunControl, run: RunRecord) -> str | None:
    """The id of the open human task a WAITING run waits for, if any."""
    name = (run.waiting_for or "").partition(":")[2]
    tasks = await control.tasks.list(status="open", run_id=run.run_id)
    matching = [t for t in tasks if t.name == name] or tasks
    return matching[-1].task_id if matching else None


def show_run(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn runs show`."""
    shown = options.with_engine(glob, lambda engine: fetch(engine.control, ns.run_id))
    if ns.json:
        output.print_json(
            {
                "run": run_dict(shown),
                "history": [output.entry_dict(e) for e in shown.history],
                "attempts": output.jsonable(shown.attempts),
            }
        )
        return 0
    history, attempts, error = shown.history, shown.attempts, shown.error
    parts: list[Any] = [facts_table(shown)]
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


def facts_table(shown: Shown) -> Table:
    """The facts of one run as a two-column grid."""
    run, error = shown.run, shown.error
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    started = run.started_at
    duration = None if started is None or not run.finished_at else run.finished_at - started
    rows: list[tuple[str, str | Text]] = [
        ("run id", run.run_id),
        ("workflow", run.workflow),
        ("status", output.status_text(run.status)),
    ]
    if run.version is not None:
        rows.append(("version", run.version))
    if shown.waiting is not None:
        rows.append(
            ("waiting for", describe.waiting_text(shown.waiting, now=shown.now, run_id=run.run_id))
        )
    if run.control and not RunStatus(run.status).finished:
        rows.append(("requested", f"{run.control} (at its next durable point)"))
    rows += [
        ("created", output.when(run.created_at)),
        ("started", output.when(started)),
        ("finished", output.when(run.finished_at)),
        ("duration", output.seconds(duration)),
        ("attempt", str(run.attempt)),
        ("recoveries", f"{run.recoveries} of at most {run.max_recoveries}"),
        ("arguments", output.short(shown.args, 200)),
    ]
    queue = None
    if run.queue:
        queue = f"{run.queue} (priority {run.priority})"
    elif run.priority:
        queue = f"none (priority {run.priority})"
    optional: list[tuple[str, Any]] = [
        ("queue", queue),
        ("partition", run.partition_key),
        ("dedup key", run.dedup_key),
        ("parent", run.parent_id),
        ("scheduled at", output.when(run.scheduled_at) if run.scheduled_at else None),
        ("owner", run.owner),
        ("continued from", run.continued_from),
        ("continued to", run.continued_to),
    ]
    rows += [(k, str(v)) for k, v in optional if v]
    if run.columns:
        rows.append(("columns", output.short(json.loads(run.columns), 200)))
    if run.progress:
        progress = json.loads(run.progress)
        text = output.progress_text(progress, run.status)
        if isinstance(progress, dict) and progress.get("at"):
            text += f" (at {output.when(progress['at'])})"
        rows.append(("progress", text))
    if run.status == RunStatus.COMPLETED:
        rows.append(("result", output.short(shown.result, 200)))
    if error:
        rows.append(("error", Text(output.error_line(error), style="red")))
        if error.get("step"):
            rows.append(("failed step", str(error["step"])))
    for key, value in rows:
        grid.add_row(key, value if isinstance(value, Text) else Text(value))  # never markup
    return grid


def _decode(control: RunControl, text: str | None) -> Any:
    if text is None:
        return None
    try:
        return control.serializer.loads(text)
    except Exception:
        # Written by another serializer or a type no longer importable: show what is stored.
        return text


def run_dict(shown: Shown) -> dict[str, Any]:
    """The JSON form of one run's facts."""
    run, args = shown.run, shown.args
    waiting = None
    if shown.waiting is not None:
        waiting = {**shown.waiting, "until": output.jsonable(_utc(shown.waiting.get("until")))}
    return {
        "run_id": run.run_id,
        "workflow": run.workflow,
        "version": run.version,
        "status": run.status,
        "args": output.jsonable((args or {}).get("args", []) if isinstance(args, dict) else args),
        "kwargs": output.jsonable(args.get("kwargs", {}) if isinstance(args, dict) else {}),
        "result": output.jsonable(shown.result),
        "error": output.jsonable(shown.error),
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
        "waiting": waiting,
        "control": run.control,
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
