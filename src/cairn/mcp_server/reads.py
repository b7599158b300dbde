"""The tools beside the verbs: list and show runs, start one, list and answer human tasks.

Their answers are the forms of representation/ that `cairn ... --json` prints and the HTTP
API answers, so a run's waiting reason reads the same to an agent as to an operator.
"""

from __future__ import annotations

from typing import Any

from cairn import names
from cairn.errors import InvalidArguments
from cairn.mcp_server.tool import MCP, Tool
from cairn.models import RunStatus
from cairn.representation import runs as run_forms
from cairn.representation import tasks as task_forms
from cairn.representation import words
from cairn.runtime.control import START_OPTIONS, RunControl

# The history entries `show_run` gives at most: the newest, as `cairn runs show` reads them.
HISTORY_WINDOW = 200
MAX_RUNS = 1000


def _name(description: str) -> dict[str, Any]:
    return {**names.SCHEMA, "description": description}


def _object(required: tuple[str, ...] = (), **properties: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = list(required)
    return schema


async def list_runs(control: RunControl, args: dict[str, Any]) -> Any:
    """A page of runs, newest first, each with what it waits for."""
    status = args.get("status")
    page = await control.list_runs(
        status=None if status is None else RunStatus.parse(status),
        workflow=args.get("workflow"),
        limit=args.get("limit", 50),
        cursor=args.get("cursor"),
        tree=args.get("tree"),
    )
    return {
        "runs": [run_forms.summary_dict(run) for run in page],
        "next_cursor": page.next_cursor,
    }


async def show_run(control: RunControl, args: dict[str, Any]) -> Any:
    """One run's facts, its newest history entries and, in words, what it waits for."""
    shown = await run_forms.fetch(control, args["run_id"], window=HISTORY_WINDOW)
    facts = run_forms.run_dict(shown)
    facts["waiting_text"] = (
        None
        if shown.waiting is None
        else words.waiting_text(shown.waiting, now=shown.now, run_id=shown.run.run_id)
    )
    facts["history"] = [run_forms.entry_dict(entry) for entry in shown.history]
    facts["history_skipped"] = shown.skipped
    return facts


async def start_run(control: RunControl, args: dict[str, Any]) -> Any:
    """Queue a run of a workflow by name; a worker executes it."""
    kwargs = args.get("kwargs", {})
    clash = sorted(set(kwargs) & START_OPTIONS)
    if clash:
        raise InvalidArguments(
            f"start_run: kwargs key {clash[0]!r} is also a start option; give it as an argument"
        )
    options = {k: args[k] for k in ("run_id", "queue", "delay", "allow_unknown") if k in args}
    handle = await control.start(args["workflow"], *args.get("args", []), **options, **kwargs)
    return run_forms.summary_dict(await control.describe(handle.run_id))


async def list_tasks(control: RunControl, args: dict[str, Any]) -> Any:
    """Human tasks, oldest first: the open ones unless `status` says otherwise."""
    status = args.get("status", "open")
    tasks = await control.tasks.list(
        status=None if status == "all" else status,
        assignee=args.get("assignee"),
        run_id=args.get("run_id"),
        descendants=args.get("run_id") is not None,
    )
    return {"tasks": [task_forms.task_dict(task) for task in tasks]}


async def submit_task(control: RunControl, args: dict[str, Any]) -> Any:
    """Answer an open human task with its form's values; the waiting run goes on."""
    task = await control.tasks.submit(args["task_id"], args["values"], by=args.get("by", MCP))
    return task_forms.task_dict(task)


READS = (
    Tool(
        "list_runs",
        "List runs, newest first, each with its status and `waiting_for` (what holds it, "
        "in words). Answers {runs, next_cursor}; pass next_cursor as cursor for more.",
        _object(
            status={
                "enum": [status.value for status in RunStatus],
                "description": "only runs in this status",
            },
            workflow=_name("only runs of this workflow name"),
            tree=_name("only this run and its descendant (child) runs"),
            limit={"type": "integer", "minimum": 1, "maximum": MAX_RUNS, "default": 50},
            cursor={"type": "string", "description": "next_cursor of the previous page"},
        ),
        list_runs,
    ),
    Tool(
        "show_run",
        "One run's facts: status, input, result or error, `waiting` and `waiting_text` "
        f"(what it waits for, in words), and its newest {HISTORY_WINDOW} history entries.",
        _object(("run_id",), run_id=_name("the run's id")),
        show_run,
    ),
    Tool(
        "start_run",
        "Start (queue) a run of a workflow by name with its arguments; a worker executes "
        "it. An existing run_id answers that run instead. Answers the run's summary.",
        _object(
            ("workflow",),
            workflow=_name("the workflow's name"),
            args={"type": "array", "description": "positional arguments (JSON values)"},
            kwargs={"type": "object", "description": "keyword arguments (JSON values)"},
            run_id=_name("the new run's id (default: a new one)"),
            queue=_name("the queue to run it on (default: the workflow's)"),
            delay={
                "type": ["string", "number"],
                "description": 'hold the run back this long: seconds, or a duration ("90s")',
            },
            allow_unknown={
                "type": "boolean",
                "description": "queue it even if no process seen lately knows the workflow",
            },
        ),
        start_run,
    ),
    Tool(
        "list_tasks",
        "List human tasks, oldest first (open ones unless status says otherwise), each "
        "with its form (a JSON Schema) and data. Answer one with submit_task.",
        _object(
            status={"enum": [*task_forms.STATUSES, "all"], "default": "open"},
            run_id=_name("only tasks of this run and its child runs"),
            assignee=_name("only tasks assigned to this person"),
        ),
        list_tasks,
    ),
    Tool(
        "submit_task",
        "Answer an open human task with values that fit its form; the waiting run goes on. "
        "Answers the task as submitted.",
        _object(
            ("task_id", "values"),
            task_id=_name("the task's id"),
            values={"type": "object", "description": "the form's values"},
            by=_name("who answers, recorded with the task (default: mcp)"),
        ),
        submit_task,
    ),
)
"""The tools that read runs and tasks, start runs and answer tasks, in `tools/list` order."""
