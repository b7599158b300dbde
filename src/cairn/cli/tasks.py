"""`cairn tasks list|show|submit`: the human-task inbox.

A submission is stored with who sent it and when; the waiting run is continued by a
worker. The engine opened here has no workers, so nothing executes in this process.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from cairn.cli import facts, options, output
from cairn.representation import tasks as task_forms
from cairn.representation import words
from cairn.runtime.tasks import TaskInfo


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register `cairn tasks list|show|submit`."""
    tasks = commands.add_parser(
        "tasks",
        parents=[common],
        help="list, show and submit human tasks",
        description="The human-task inbox: tasks created by cairn.human_task() in runs.",
    )
    actions = tasks.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser(
        "list",
        parents=[common],
        help="list tasks, oldest first (open ones unless told otherwise)",
        description="List human tasks, oldest first; only open ones unless --status or --all.",
    )
    which = listing.add_mutually_exclusive_group()
    which.add_argument("--status", metavar="S", help=f"only tasks in this status: {_one_of()}")
    which.add_argument("--all", action="store_true", help="tasks in every status")
    listing.add_argument("--assignee", metavar="A", help="only tasks assigned to A")
    listing.add_argument(
        "--run", metavar="RUN_ID", help="only tasks of this run and of its descendant runs"
    )
    listing.add_argument(
        "--tree",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --run, include the tasks of its child runs (theirs too, 16 generations "
        "down at most): the default; --no-tree keeps that run's own tasks only",
    )
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.set_defaults(handler=list_tasks)

    show = actions.add_parser(
        "show",
        parents=[common],
        help="show one task: title, data, form, assignee, due time, who submitted",
        description="Show one human task: its title, data, form fields, assignee, due "
        "time and status, and who submitted it and when.",
    )
    show.add_argument("task_id", metavar="TASK_ID")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    show.set_defaults(handler=show_task)

    submit = actions.add_parser(
        "submit",
        parents=[common],
        help="submit a task's form; the waiting run goes on",
        description="Submit the values of an open task's form. Values that do not fit "
        "the form are refused, naming every bad field. A worker continues the run.",
    )
    submit.add_argument("task_id", metavar="TASK_ID")
    submit.add_argument("values", metavar="JSON", help="a JSON object, e.g. '{\"approved\": true}'")
    submit.add_argument("--by", metavar="NAME", help="who submits (recorded with the values)")
    submit.add_argument("--json", action="store_true", help="machine-readable output")
    submit.set_defaults(handler=submit_task)


def _one_of() -> str:
    return ", ".join(task_forms.STATUSES)


# heading -> (least width, rank, ample), see output.FittedTable: a task's id, name and
# status always show, whole; the title is cut; the rest join while there is room.
TASK_COLUMNS: output.Columns = {
    "TASK ID": (None, 0, None),
    "RUN ID": (None, 4, None),
    "NAME": (12, 0, None),
    "TITLE": (10, 1, 40),
    "ASSIGNEE": (8, 2, 16),
    "STATUS": (None, 0, None),
    "CREATED": (None, 5, None),
    "DUE": (None, 3, None),
}


def tasks_table(tasks: list[TaskInfo]) -> output.FittedTable:
    """A table of tasks, one line each, that fits the console it is printed on."""
    rows: list[dict[str, str | Text]] = [
        {
            "TASK ID": task.task_id,
            "RUN ID": task.run_id,
            "NAME": task.name,
            "TITLE": task.title,
            "ASSIGNEE": task.assignee or "",
            "STATUS": _status(task.status),
            "CREATED": words.when(task.created_at),
            "DUE": words.when(task.due_at),
        }
        for task in tasks
    ]
    return output.FittedTable(TASK_COLUMNS, rows, optional=("ASSIGNEE", "DUE"), middle=("RUN ID",))


def _status(status: str) -> Text:
    style = {"open": "yellow", "submitted": "green"}.get(status, "red")
    return Text(status, style=style)


def list_tasks(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn tasks list`."""
    status: str | None = "open"
    if ns.all:
        status = None
    elif ns.status is not None:
        status = ns.status.strip().lower()
        if status not in task_forms.STATUSES:
            raise ValueError(f"unknown task status {ns.status!r} (one of {_one_of()})")
    tasks = options.with_engine(
        glob,
        lambda engine: engine.tasks.list(
            status=status, assignee=ns.assignee, run_id=ns.run, descendants=ns.tree
        ),
    )
    if ns.json:
        output.print_json({"tasks": [task_forms.task_dict(task) for task in tasks]})
        return 0
    if not tasks:
        output.say(f"no {status} tasks" if status else "no tasks")
        return 0
    output.stdout().print(tasks_table(tasks))
    return 0


def show_task(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn tasks show`."""
    task = options.with_engine(glob, lambda engine: engine.tasks.get(ns.task_id))
    if ns.json:
        output.print_json(task_forms.task_dict(task))
        return 0
    rows: list[tuple[str, str | Text]] = [
        ("task id", task.task_id),
        ("title", task.title),
        ("name", task.name),
        ("run", task.run_id),
        ("status", _status(task.status)),
        ("assignee", task.assignee or "anyone"),
        ("created", words.when(task.created_at)),
        ("due", words.when(task.due_at) or "no due time"),
        ("data", words.short(task.data, 400)),
    ]
    if task.submitted_at is not None:
        rows += [
            ("submitted by", task.submitted_by or "(no name given)"),
            ("submitted at", words.when(task.submitted_at)),
            ("values", words.short(task.values, 400)),
        ]
    parts: list[Any] = [facts.Facts(rows), Text("")]
    if task.form:
        parts += [Text("form", style="bold underline"), form_table(task.form)]
    else:
        parts.append(Text("form: any JSON object"))
    if task.status == "open":
        parts += [Text(""), Text(f"submit: cairn tasks submit {task.task_id} JSON --by NAME")]
    output.stdout().print(Group(*parts), crop=False)  # an id longer than a line stays whole
    return 0


def form_table(schema: dict[str, Any]) -> Table:
    """The fields of a JSON Schema object form: name, type, required, description."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("FIELD", "TYPE", "REQUIRED", "DESCRIPTION"):
        table.add_column(name, overflow="fold")
    required = set(schema.get("required") or ())
    properties = schema.get("properties") or {}
    for name, spec in properties.items():
        spec = spec if isinstance(spec, dict) else {}
        table.add_row(
            name,
            _field_type(spec),
            "yes" if name in required else "",
            str(spec.get("description") or spec.get("title") or ""),
        )
    if not properties:
        table.add_row("(form)", words.short(schema, 80), "", "")
    return table


def _field_type(spec: dict[str, Any]) -> str:
    if "enum" in spec:
        return "one of " + ", ".join(words.short(v, 20) for v in spec["enum"])
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = " or ".join(str(k) for k in kind)
    if kind is None and "anyOf" in spec:
        kind = " or ".join(str(s.get("type", "?")) for s in spec["anyOf"] if isinstance(s, dict))
    text = str(kind or "any")
    if spec.get("format"):
        text += f" ({spec['format']})"
    return text


def submit_task(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn tasks submit`."""
    values = options.parse_object(ns.values, what="submitted JSON", of="form values")
    if ns.by is not None and not ns.by.strip():
        raise ValueError("--by must not be empty")
    task = options.with_engine(
        glob, lambda engine: engine.tasks.submit(ns.task_id, values, by=ns.by)
    )
    if ns.json:
        output.print_json(task_forms.task_dict(task))
        return 0
    by = f" by {task.submitted_by}" if task.submitted_by else ""
    output.say(
        f"task {task.task_id} submitted{by}; run {task.run_id} goes on when a worker takes it"
    )
    return 0
