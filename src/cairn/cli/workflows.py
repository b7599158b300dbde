"""`cairn workflows list`: the workflows this process imports and those live workers execute.

Workers store only the names of what they execute, so a workflow known only to them
shows no queue, version or `on`.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table
from rich.text import Text

from cairn.cli import options, output
from cairn.representation import workflows as workflow_forms
from cairn.runtime import catalog
from cairn.runtime.catalog import WorkflowInfo


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register `cairn workflows list`."""
    workflows = commands.add_parser(
        "workflows",
        parents=[common],
        help="list the workflows registered here and by live workers",
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


def _durable(info: WorkflowInfo) -> Text:
    if info.durable is None:
        return Text("?", style="dim")
    return Text("yes") if info.durable else Text("no", style="yellow")


def _known_by(info: WorkflowInfo) -> str:
    return "\n".join((["local"] if info.local else []) + list(info.workers)) or "-"


def workflows_table(infos: list[WorkflowInfo]) -> Table:
    """A table of workflows, one line per process that knows each; long values fold."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("NAME", overflow="fold")
    table.add_column("QUEUE", overflow="fold")
    table.add_column("VERSION", overflow="fold")
    table.add_column("ON", overflow="fold")
    table.add_column("DURABLE", no_wrap=True)  # no: transient (durable=False)
    table.add_column("KNOWN BY", overflow="fold")
    for info in infos:
        table.add_row(
            info.name,
            info.queue or "",
            info.version or "",
            info.on or "",
            _durable(info),
            _known_by(info),
        )
    return table


def list_workflows(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn workflows list`."""
    infos = options.with_engine(glob, lambda engine: catalog.workflows(engine.control))
    if ns.json:
        output.print_json({"workflows": [workflow_forms.workflow_dict(info) for info in infos]})
        return 0
    if not infos:
        output.stdout().print(
            "no workflows: none registered here (-m MODULE imports one) and no live worker "
            "says it executes any",
            markup=False,
        )
        return 0
    output.stdout().print(workflows_table(infos))
    return 0
