"""`cairn workflows list|run`: the workflows known here and to live workers; starting one by name.

Workers store only the names of what they execute, so a workflow known only to them
shows no queue, version or `on`. `workflows run` is `cairn run` spelled with keyword
arguments (`--arg NAME=VALUE`, `--args-json`) and `--no-wait`; it reads them on the same
path (call_args) and starts the run the same way (`run.launch`).
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.text import Text

from cairn.cli import call_args, options, output
from cairn.cli import run as run_command
from cairn.representation import workflows as workflow_forms
from cairn.runtime import catalog
from cairn.runtime.catalog import WorkflowInfo


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register `cairn workflows list`."""
    workflows = commands.add_parser(
        "workflows",
        parents=[common],
        help="list the workflows known here and to live workers, or run one by name",
        description="The workflows the modules imported here register (-m/--module), "
        "and those live workers say they execute.",
    )
    actions = workflows.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list",
        parents=[common],
        help="list workflows: queue, version, on=, durable, known by",
        description="List every workflow the imported modules register or a live worker "
        "executes, by name: its queue, version, the event that starts it (on=), whether "
        "it is durable, and who knows it (local: this command's modules; else worker "
        "ids). A workflow only workers know shows no queue, version or on=.",
    )
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.set_defaults(handler=list_workflows)
    _add_run(actions, common)


def _add_run(actions: Any, common: argparse.ArgumentParser) -> None:
    run = actions.add_parser(
        "run",
        parents=[common],
        help="start a run by name: wait for its result, or --no-wait",
        description="Start a run of WORKFLOW with keyword arguments. Without --no-wait it "
        "runs here like `cairn run --wait`: each step is shown on stderr, its sleeps are "
        "waited out here, and the result printed as JSON on stdout (a wait for an event, "
        "hook, task or resume stops it, saying what moves the run on). With --no-wait "
        "the run is stored for `cairn worker` and its id printed at once.",
    )
    run.add_argument(
        "target",
        metavar="WORKFLOW",
        help="a workflow's name (one the -m modules register, or with --no-wait one "
        "workers know) or MODULE:WORKFLOW",
    )
    run.add_argument(
        "--arg",
        dest="named",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="a keyword argument (repeatable): VALUE is read as the parameter's type "
        "wants, else as JSON when it parses, else as a string",
    )
    run.add_argument(
        "--args-json",
        metavar="JSON",
        help="a JSON object of keyword arguments (a name also given by --arg is an error)",
    )
    run.add_argument(
        "--no-wait",
        action="store_true",
        help="only store the run as PENDING for `cairn worker` and print its id",
    )
    run.add_argument(
        "--run-id", metavar="ID", help="id for the run; an existing run with it is shown instead"
    )
    run.add_argument(
        "--allow-unknown",
        action="store_true",
        help="with --no-wait: queue a name no worker seen lately knows",
    )
    run.set_defaults(handler=run_workflow)


def run_workflow(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn workflows run`."""
    if ":" not in ns.target:
        options.import_modules(glob.modules)  # the name may be one these modules register
    workflow = run_command.resolve(ns.target, enqueue=ns.no_wait, enqueue_flag="--no-wait")
    args, kwargs = call_args.parse_call(
        workflow, (), ns.args_json, named=ns.named, input_flag="--args-json"
    )
    return run_command.launch(
        glob,
        workflow,
        args,
        kwargs,
        ns.run_id,
        enqueue=ns.no_wait,
        allow_unknown=ns.allow_unknown,
        enqueue_flag="--no-wait",
        wait=not ns.no_wait,  # through its sleeps, as pyworkflow's `workflows run` waits
        module=ns.target.partition(":")[0].strip() if ":" in ns.target else None,
    )


def _durable(info: WorkflowInfo) -> Text:
    if info.durable is None:
        return Text("?", style="dim")
    return Text("yes") if info.durable else Text("no", style="yellow")


def _known_by(info: WorkflowInfo) -> str:
    return ", ".join((["local"] if info.local else []) + list(info.workers)) or "-"


# heading -> (least width, rank, ample), see output.FittedTable: the name always (cut in
# the middle, keeping its end); who executes it, durable, queue, version and on= join
# while there is room, the last three only when a workflow has one.
WORKFLOW_COLUMNS: output.Columns = {
    "NAME": (20, 0, 36),
    "QUEUE": (8, 3, 20),
    "VERSION": (8, 4, 16),
    "ON": (8, 5, 24),
    "DURABLE": (None, 2, None),  # no: transient (durable=False)
    "KNOWN BY": (10, 1, 24),
}


def workflows_table(infos: list[WorkflowInfo]) -> output.FittedTable:
    """A table of workflows, one line each (KNOWN BY: local, then worker ids)."""
    rows: list[dict[str, str | Text]] = [
        {
            "NAME": info.name,
            "QUEUE": info.queue or "",
            "VERSION": info.version or "",
            "ON": info.on or "",
            "DURABLE": _durable(info),
            "KNOWN BY": _known_by(info),
        }
        for info in infos
    ]
    return output.FittedTable(
        WORKFLOW_COLUMNS, rows, optional=("QUEUE", "VERSION", "ON"), middle=("NAME",)
    )


def list_workflows(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn workflows list`."""
    infos = options.with_engine(glob, lambda engine: catalog.workflows(engine.control))
    if ns.json:
        output.print_json({"workflows": [workflow_forms.workflow_dict(info) for info in infos]})
        return 0
    if not infos:
        output.say(
            "no workflows: none registered here (-m MODULE imports one) and no live worker "
            "says it executes any"
        )
        return 0
    output.stdout().print(workflows_table(infos))
    return 0
