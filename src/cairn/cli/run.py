"""`cairn run MODULE:WORKFLOW`: start a run here and follow it, or enqueue it.

Its ARGs and --input are read, checked and converted by call_args (shared with
`cairn workflows run`) before anything is stored; `launch` starts the run, also for
`workflows run`.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from rich.console import Console

from cairn.authoring.definitions import WorkflowDef, definition_of
from cairn.authoring.registry import default_registry
from cairn.cli import call_args, describe, follow, options, output, waiting
from cairn.codecs import coded
from cairn.errors import ConfigError, RunNotFound, TransientWorkflow, UnknownWorkflow
from cairn.models import RunStatus
from cairn.representation import runs as run_forms
from cairn.representation import words
from cairn.runtime import direct_calls, workflow_names
from cairn.runtime.engine import Engine
from cairn.store import locations
from cairn.store.records import RunRecord

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
        "completes, until it finishes or goes to sleep or waits (with --wait: through "
        "its sleeps, until it finishes or waits). The result is printed as JSON on "
        "stdout; progress goes to stderr. A transient workflow (durable=False) runs in "
        "memory, without a database, until it finishes.",
    )
    parser.add_argument(
        "target",
        metavar="MODULE:WORKFLOW",
        help="e.g. shop.orders:process_order (the current directory is on the import path), "
        "or a workflow's name: one the -m modules register, or with --enqueue one workers know",
    )
    parser.add_argument(
        "args",
        metavar="ARG",
        nargs="*",
        help="positional arguments, read as the parameter's type wants (a Decimal, date, "
        "UUID or enum from its text; a str as typed), else JSON when the text parses as "
        "JSON, else a string (put -- before an ARG that starts with '-')",
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
    parser.add_argument(
        "--allow-unknown",
        action="store_true",
        help="with --enqueue and a workflow's name: queue it even if no worker seen lately "
        "knows the name (for workers about to be deployed)",
    )
    parser.add_argument(
        "--wait",
        action="store_true",
        help="wait here through the run's sleeps and child runs, executing them when due, "
        "until it finishes or waits for an event, hook, task or resume",
    )
    parser.set_defaults(handler=handle, takes_extra_args=True)


def resolve(
    target: str, *, enqueue: bool = False, enqueue_flag: str = "--enqueue"
) -> WorkflowDef[Any, Any] | str:
    """The workflow named by `MODULE:WORKFLOW`, or by its registered name; ConfigError if none.

    With `enqueue`, a name no module here registers comes back as the name itself, to be
    queued for workers that know it.
    """
    module_name, sep, attr = target.partition(":")
    module_name, attr = module_name.strip(), attr.strip()
    if not sep and target.strip():
        return _by_name(target.strip(), enqueue=enqueue, flag=enqueue_flag)
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
        there = sorted(n for n, v in vars(module).items() if definition_of(v) is not None)
        near = workflow_names.closest(attr, there)
        hint = f"did you mean {' or '.join(map(repr, near))}? " if near else ""
        raise ConfigError(
            f"module {module_name!r} has no workflow {attr!r} "
            f"({hint}workflows there: {', '.join(there) or 'none'})"
        )
    definition = definition_of(found)
    if definition is None:
        raise ConfigError(
            f"{target!r} is a {type(found).__name__}, not a @cairn.workflow "
            "(decorate it with @cairn.workflow)"
        )
    return definition


def _by_name(name: str, *, enqueue: bool, flag: str) -> WorkflowDef[Any, Any] | str:
    found = default_registry.workflows.get(name)
    if found is not None:
        return found
    if enqueue:
        return name
    near = workflow_names.closest(name, sorted(default_registry.workflows))
    hint = f"did you mean {' or '.join(map(repr, near))}? " if near else ""
    raise options.UsageError(
        f"{name!r} is not MODULE:WORKFLOW nor the name of a workflow the -m modules register "
        f"({hint}add {flag} to queue it for workers that import it)"
    )


def handle(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn run`."""
    if ":" not in ns.target:
        options.import_modules(glob.modules)  # a name may be one these modules register
    workflow = resolve(ns.target, enqueue=ns.enqueue)
    args, kwargs = call_args.parse_call(workflow, ns.args, ns.input)
    if ns.wait and ns.enqueue:
        raise options.UsageError("--wait and --enqueue exclude each other")
    return launch(
        glob,
        workflow,
        args,
        kwargs,
        ns.run_id,
        enqueue=ns.enqueue,
        allow_unknown=ns.allow_unknown,
        wait=ns.wait,
        module=ns.target.partition(":")[0].strip() if ":" in ns.target else None,
    )


def launch(
    glob: options.Globals,
    workflow: WorkflowDef[Any, Any] | str,
    args: list[Any],
    kwargs: dict[str, Any],
    run_id: str | None,
    *,
    enqueue: bool,
    allow_unknown: bool,
    enqueue_flag: str = "--enqueue",
    wait: bool = False,
    module: str | None = None,
) -> int:
    """Start a run of arguments already read (call_args): follow it here, or only store it.

    With `enqueue` (the option `enqueue_flag`), print its id at once for `cairn worker`.
    With `wait`, follow it through its sleeps (a memory:// run always: no worker can
    reach it). `module` defines the workflow, for the `cairn worker` command suggested.
    """
    if run_id is not None and not run_id:
        raise ValueError("--run-id must not be empty")
    if allow_unknown and not enqueue:
        raise options.UsageError(f"--allow-unknown applies only with {enqueue_flag}")
    if isinstance(workflow, WorkflowDef) and not workflow.durable:
        if enqueue:
            raise TransientWorkflow(
                workflow.name,
                f"{enqueue_flag} cannot queue it for workers; run it without {enqueue_flag}",
            )
        return asyncio.run(_execute_transient(workflow, args, kwargs, run_id))
    if enqueue:
        locations.refuse_memory(glob.url, f"cairn run {enqueue_flag} (the run waits for workers)")
        return asyncio.run(_enqueue(glob, workflow, args, kwargs, run_id, allow_unknown))
    assert isinstance(workflow, WorkflowDef)  # a bare name comes back only with enqueue
    wait = wait or locations.scheme(glob.url) == "memory"
    worker = describe.worker_command(glob.url, [*glob.modules, *([module] if module else [])])
    return asyncio.run(_execute(glob, workflow, args, kwargs, run_id, wait=wait, worker=worker))


async def _enqueue(
    glob: options.Globals,
    workflow: WorkflowDef[Any, Any] | str,
    args: list[Any],
    kwargs: dict[str, Any],
    run_id: str | None,
    allow_unknown: bool,
) -> int:
    async with Engine(glob.url, workers=0, modules=glob.modules) as engine:
        existing = await _existing(engine, run_id)
        try:
            handle = await engine.start(
                workflow, *args, run_id=run_id, allow_unknown=allow_unknown, **kwargs
            )
        except UnknownWorkflow as exc:
            raise exc.told("add --allow-unknown") from None
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
    *,
    wait: bool,
    worker: str,
) -> int:
    err = output.stderr()
    run_id_started: str | None = None
    try:
        # claim=False: this process executes the run it starts (and its children), nothing else.
        async with Engine(glob.url, workers=RUN_SLOTS, modules=glob.modules, claim=False) as engine:
            if locations.scheme(glob.url) in ("memory", "file"):  # not where cairn.db would be
                err.print(f"database {output.database(glob.url)}", markup=False)
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
            follower = follow.Follower(engine.control, handle.run_id, err)
            run = await follower.follow()
            if wait:
                run = await waiting.through_chain(engine, follower, run, err, worker)
            found = await run_forms.waiting_of(engine.control, run, now=engine.clock.now())
            return report(engine, run, err, found, worker=worker)
    except asyncio.CancelledError:
        if run_id_started is not None:
            err.print(
                f"interrupted: run {run_id_started} is handed back for `{worker}` to "
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
    registry = direct_calls.registry_for(workflow)
    async with direct_calls.memory_engine(registry, workers=RUN_SLOTS) as engine:
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
            error = _error(engine, run) or {}
            if error.get("traceback"):
                err.print(str(error["traceback"]).rstrip(), style="dim", markup=False)
            output.error(f"run {run.run_id!r} failed: {words.error_line(error)}")
            return 1
        return report(engine, run, err)


def report(
    engine: Engine,
    run: RunRecord,
    err: Console,
    found: dict[str, Any] | None = None,
    *,
    worker: str = "cairn worker",
) -> int:
    """Print how a followed run ended, or what it waits for; returns the exit code.

    `found` is what holds a parked run (`representation.runs.waiting_of`); `worker` the
    command that starts a worker able to go on with it.
    """
    status = RunStatus(run.status)
    now = engine.clock.now()
    show = f"cairn runs show {run.run_id}"
    took = ""
    if run.started_at is not None and run.finished_at:
        took = f" in {words.seconds(run.finished_at - run.started_at)}"
    if status is RunStatus.COMPLETED:
        err.print(f"run {run.run_id} COMPLETED{took}", style="green")
        output.print_json(engine.control.outcome(run))
        return 0
    if status is RunStatus.FAILED:
        error = words.error_line(_error(engine, run))
        err.print(f"run {run.run_id} FAILED{took}; traceback: {show}", style="red")
        output.error(f"run {run.run_id!r} failed: {error}")
        return 1
    if status is RunStatus.CANCELLED:
        output.error(f"run {run.run_id!r} was cancelled")
        return 1
    if status is RunStatus.CONTINUED:
        err.print(
            f"run {run.run_id} continued as new: {run.continued_to}; `{worker}` continues it, "
            f"or next time run it with --wait to follow it here; check it with "
            f"`cairn runs show {run.continued_to}`",
            markup=False,
        )
        return 0
    if status is RunStatus.SLEEPING:
        left = "" if run.wake_at is None else f" (in {words.seconds(max(0.0, run.wake_at - now))})"
        err.print(
            f"run {run.run_id} is SLEEPING until {words.when(run.wake_at)}{left}; nothing "
            f"executes it until a worker does: start `{worker}` (it resumes the run then), "
            f"or next time run it with --wait to wait here; check it with `{show}`",
            markup=False,
        )
        return 0
    if status is RunStatus.WAITING:
        waits = words.waiting_text(found, now=now, run_id=run.run_id) if found else "an event"
        hint = describe.follow_up(run, found, worker)
        hint = f"{hint}, and `{worker}` continues it" if hint else f"`{worker}` continues it"
        err.print(
            f"run {run.run_id} is WAITING for {waits}; {hint}; check it with `{show}`",
            markup=False,
        )
        return 0
    if status is RunStatus.PAUSED:
        err.print(
            f"run {run.run_id} is PAUSED; resume it with `cairn runs resume {run.run_id}`, "
            f"then `{worker}` continues it; check it with `{show}`",
            markup=False,
        )
        return 0
    handed_back = status is RunStatus.PENDING and run.attempt > 0
    if handed_back or (status is RunStatus.RUNNING and run.owner is None):
        output.error(
            f"run {run.run_id!r} was handed back mid-run (its attempt ended, e.g. the database "
            f"was unreachable): `{worker}` finishes it from its last step; check it with "
            f"`{show}`"
        )
        return 1
    where = f" on queue {run.queue!r}" if run.queue else ""
    held = f" ({run.waiting_for})" if run.waiting_for else ""
    err.print(
        f"run {run.run_id} is {status.value}{where}{held}, queued for workers: start one with "
        f"`{worker}`; check it with `{show}`",
        markup=False,
    )
    return 0


def _error(engine: Engine, run: RunRecord) -> dict[str, Any] | None:
    return coded.shown_error(engine.serializer, run.error)  # "encrypted (k1)" without keys
