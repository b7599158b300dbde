"""Project commands: `cairn run MODULE:WORKFLOW` (start a run here and follow it, or enqueue it)."""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
from typing import Any

from rich.console import Console

from cairn.authoring.registry import default_registry
from cairn.authoring.workflow import WorkflowDef
from cairn.cli import describe, follow, options, output, runs
from cairn.errors import ConfigError, RunNotFound, TransientWorkflow
from cairn.models import RunStatus
from cairn.runtime import blocking, transient
from cairn.runtime.control import RunControl
from cairn.runtime.engine import Engine
from cairn.store.records import RunRecord

# Keyword names engine.start() keeps for itself (run_id, queue, delay, ...); a workflow
# parameter by one of these names cannot be passed through --input.
START_OPTIONS = frozenset(
    name
    for name, param in inspect.signature(RunControl.start).parameters.items()
    if param.kind is inspect.Parameter.KEYWORD_ONLY
)

# Runs `cairn run` may execute at once: the run itself plus its child runs.
RUN_SLOTS = 8


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register `cairn run`."""
    parser = commands.add_parser(
        "run",
        parents=[common],
        help="start a workflow run and follow it step by step",
        description="Start a run of WORKFLOW (an attribute of MODULE decorated with "
        "@cairn.workflow) and execute it in this process, printing each step as it "
        "completes, until it finishes or goes to sleep or waits. The result is printed "
        "as JSON on stdout; progress goes to stderr. A transient workflow "
        "(durable=False) runs in memory, without a database, until it finishes.",
    )
    parser.add_argument(
        "target",
        metavar="MODULE:WORKFLOW",
        help="e.g. shop.orders:process_order (the current directory is on the import path)",
    )
    parser.add_argument(
        "args",
        metavar="ARG",
        nargs="*",
        help="positional arguments: JSON when the text parses as JSON, else a string "
        "(put -- before an ARG that starts with '-')",
    )
    parser.add_argument("--input", metavar="JSON", help="JSON object of keyword arguments")
    parser.add_argument(
        "--run-id", metavar="ID", help="id for the run; an existing run with it is shown instead"
    )
    parser.add_argument(
        "--enqueue",
        action="store_true",
        help="only store the run as PENDING for `cairn worker` and print its id",
    )
    parser.set_defaults(handler=handle, takes_extra_args=True)


def resolve(target: str) -> WorkflowDef[Any, Any]:
    """The workflow named by `MODULE:WORKFLOW`; ConfigError names what is wrong."""
    module_name, sep, attr = target.partition(":")
    module_name, attr = module_name.strip(), attr.strip()
    if not sep or not module_name or not attr:
        raise options.UsageError(
            f"{target!r} is not MODULE:WORKFLOW (e.g. shop.orders:process_order)"
        )
    module = options.import_module(module_name)
    found: Any = module
    for part in attr.split("."):
        found = getattr(found, part, None)
        if found is None:
            break
    if found is None:
        found = default_registry.workflows.get(attr)
    if found is None:
        there = sorted(n for n, v in vars(module).items() if isinstance(v, WorkflowDef))
        raise ConfigError(
            f"module {module_name!r} has no workflow {attr!r} "
            f"(workflows there: {', '.join(there) or 'none'})"
        )
    if not isinstance(found, WorkflowDef):
        raise ConfigError(
            f"{target!r} is a {type(found).__name__}, not a @cairn.workflow "
            "(decorate it with @cairn.workflow)"
        )
    return found


def check_arguments(
    workflow: WorkflowDef[Any, Any], args: list[Any], kwargs: dict[str, Any]
) -> None:
    """ValueError, before anything is stored, when the arguments do not fit the workflow."""
    clash = sorted(START_OPTIONS & kwargs.keys())
    if clash:
        raise ValueError(
            f"--input key {clash[0]!r} is reserved by engine.start; rename that parameter of "
            f"workflow {workflow.name!r}"
        )
    try:
        signature = inspect.signature(workflow.fn)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise ValueError(
            f"arguments do not fit workflow {workflow.name!r} {signature}: {exc}"
        ) from None


def handle(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn run`."""
    workflow = resolve(ns.target)
    args = [options.parse_argument(a, what="argument") for a in ns.args]
    kwargs = options.parse_input(ns.input)
    check_arguments(workflow, args, kwargs)
    if ns.run_id is not None and not ns.run_id:
        raise ValueError("--run-id must not be empty")
    if not workflow.durable:
        if ns.enqueue:
            raise TransientWorkflow(
                workflow.name, "--enqueue cannot queue it for workers; run it without --enqueue"
            )
        return asyncio.run(_execute_transient(workflow, args, kwargs, ns.run_id))
    if ns.enqueue:
        return asyncio.run(_enqueue(glob, workflow, args, kwargs, ns.run_id))
    return asyncio.run(_execute(glob, workflow, args, kwargs, ns.run_id))


async def _enqueue(
    glob: options.Globals,
    workflow: WorkflowDef[Any, Any],
    args: list[Any],
    kwargs: dict[str, Any],
    run_id: str | None,
) -> int:
    async with Engine(glob.url, workers=0, modules=glob.modules) as engine:
        existing = await _existing(engine, run_id)
        handle = await engine.start(workflow, *args, run_id=run_id, **kwargs)
    if existing is not None:
        output.stderr().print(f"run {handle.run_id} already exists ({existing.status})")
    print(handle.run_id, flush=True)
    return 0


async def _existing(engine: Engine, run_id: str | None) -> RunRecord | None:
    if run_id is None:
        return None
    try:
        return await engine.control.record(run_id)
    except RunNotFound:
        return None


async def _execute(
    glob: options.Globals,
    workflow: WorkflowDef[Any, Any],
    args: list[Any],
    kwargs: dict[str, Any],
    run_id: str | None,
) -> int:
    err = output.stderr()
    run_id_started: str | None = None
    try:
        # claim=False: this process executes the run it starts (and its children), nothing else.
        async with Engine(glob.url, workers=RUN_SLOTS, modules=glob.modules, claim=False) as engine:
            existing = await _existing(engine, run_id)
            handle = await engine.start(workflow, *args, run_id=run_id, **kwargs)
            run_id_started = handle.run_id
            if existing is None:
                err.print(f"run {handle.run_id} of {workflow.name} started", style="bold")
            else:
                err.print(
                    f"run {handle.run_id} already exists ({existing.status}); showing it",
                    style="bold",
                )
            run = await follow.Follower(engine.control, handle.run_id, err).follow()
            task_id = None
            if run.status == RunStatus.WAITING:
                task_id = await runs.open_task(engine.control, run)
            found = blocking.waiting(run, now=engine.clock.now(), task_id=task_id)
            return report(engine, run, err, found)
    except asyncio.CancelledError:
        if run_id_started is not None:
            err.print(
                f"interrupted: run {run_id_started} is handed back for `cairn worker` to "
                f"finish; check it with `cairn runs show {run_id_started}`",
                markup=False,
            )
        raise


async def _execute_transient(
    workflow: WorkflowDef[Any, Any], args: list[Any], kwargs: dict[str, Any], run_id: str | None
) -> int:
    """Run a transient workflow in memory, showing its steps, until it finishes.

    Its sleeps are slept here and its waits waited (for their timeouts: nothing outside
    this process can reach the run). Interrupted, it is gone.
    """
    err = output.stderr()
    registry = transient.registry_for(workflow)
    async with transient.memory_engine(registry, workers=RUN_SLOTS) as engine:
        handle = await engine.start(workflow, *args, run_id=run_id, **kwargs)
        err.print(
            f"run {handle.run_id} of {workflow.name} started (transient: in memory only)",
            style="bold",
            markup=False,
        )
        follower = follow.Follower(engine.control, handle.run_id, err)
        run = await follower.follow()
        told = False
        while not RunStatus(run.status).finished:
            if run.status == RunStatus.WAITING.value and not told:
                told = True
                err.print(
                    f"run {run.run_id} is WAITING ({run.waiting_for or 'for an event'}); "
                    "nothing outside this process can reach a transient run: it goes on "
                    "when its wait times out (Ctrl-C ends it)",
                    markup=False,
                )
            try:
                await engine.control.wait(run.run_id, timeout=0.5)
            except TimeoutError:
                pass
            run = await follower.follow()
        if run.status == RunStatus.FAILED.value:
            # Nothing to look at later: the traceback is shown now, or never.
            error = _error(run) or {}
            if error.get("traceback"):
                err.print(str(error["traceback"]).rstrip(), style="dim", markup=False)
            output.error(f"run {run.run_id!r} failed: {output.error_line(error)}")
            return 1
        return report(engine, run, err)


def report(
    engine: Engine, run: RunRecord, err: Console, found: dict[str, Any] | None = None
) -> int:
    """Print how a followed run ended, or what it waits for; returns the exit code.

    `found` is what holds a parked run (`blocking.waiting`).
    """
    status = RunStatus(run.status)
    now = engine.clock.now()
    show = f"cairn runs show {run.run_id}"
    took = ""
    if run.started_at is not None and run.finished_at:
        took = f" in {output.seconds(run.finished_at - run.started_at)}"
    if status is RunStatus.COMPLETED:
        err.print(f"run {run.run_id} COMPLETED{took}", style="green")
        output.print_json(engine.control.outcome(run))
        return 0
    if status is RunStatus.FAILED:
        error = output.error_line(_error(run))
        err.print(f"run {run.run_id} FAILED{took}; traceback: {show}", style="red")
        output.error(f"run {run.run_id!r} failed: {error}")
        return 1
    if status is RunStatus.CANCELLED:
        output.error(f"run {run.run_id!r} was cancelled")
        return 1
    if status is RunStatus.CONTINUED:
        err.print(f"run {run.run_id} continued as new run {run.continued_to}; follow: {show}")
        return 0
    if status is RunStatus.SLEEPING:
        err.print(
            f"run {run.run_id} is SLEEPING until {output.when(run.wake_at)}; "
            f"`cairn worker` resumes it then; check it with `{show}`",
            markup=False,
        )
        return 0
    if status is RunStatus.WAITING:
        waits = describe.waiting_text(found, now=now, run_id=run.run_id) if found else "an event"
        hint = describe.follow_up(run, found)
        hint = f"{hint}, and `cairn worker` continues it" if hint else "`cairn worker` continues it"
        err.print(
            f"run {run.run_id} is WAITING for {waits}; {hint}; check it with `{show}`",
            markup=False,
        )
        return 0
    if status is RunStatus.PAUSED:
        err.print(
            f"run {run.run_id} is PAUSED; resume it with `cairn runs resume {run.run_id}`, "
            f"then `cairn worker` continues it; check it with `{show}`",
            markup=False,
        )
        return 0
    handed_back = status is RunStatus.PENDING and run.attempt > 0
    if handed_back or (status is RunStatus.RUNNING and run.owner is None):
        output.error(
            f"run {run.run_id!r} was handed back mid-run (its attempt ended, e.g. the database "
            f"was unreachable): `cairn worker` finishes it from its last step; check it with "
            f"`{show}`"
        )
        return 1
    where = f" on queue {run.queue!r}" if run.queue else ""
    held = f" ({run.waiting_for})" if run.waiting_for else ""
    err.print(
        f"run {run.run_id} is {status.value}{where}{held}, queued for workers: start one with "
        f"`cairn worker`; check it with `{show}`",
        markup=False,
    )
    return 0


def _error(run: RunRecord) -> dict[str, Any] | None:
    return None if run.error is None else dict(json.loads(run.error))
