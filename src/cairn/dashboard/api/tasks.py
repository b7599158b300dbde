"""The human-task inbox: `GET /tasks`, `GET /tasks/{id}`, `POST /tasks/{id}/submit`.

Tasks are shown in the shape of `cairn tasks show --json`. Values that do not fit the
form are a 422 whose `fields` name every bad field; the run goes on when a worker takes it.
"""

from __future__ import annotations

from cairn.dashboard.api import inputs
from cairn.dashboard.api.inputs import Call
from cairn.dashboard.api.operations import Operation, Param
from cairn.dashboard.api.replies import BadRequest, Reply
from cairn.dashboard.target import Target
from cairn.representation import tasks as task_forms

STATUSES = (*task_forms.STATUSES, "all")


async def list_tasks(target: Target, call: Call) -> Reply:
    """`GET /tasks`: open tasks unless `status` says otherwise, oldest first."""
    found = call.query(("status", "assignee", "run_id", "descendants"))
    status: str | None = found.get("status", "open").strip().lower()
    if status not in STATUSES:
        raise BadRequest(f"unknown task status {found['status']!r} (one of {', '.join(STATUSES)})")
    if status == "all":
        status = None
    descendants = inputs.value(found.get("descendants", "true"))
    if not isinstance(descendants, bool):
        raise BadRequest(f"descendants must be true or false, got {found['descendants']!r}")
    tasks = await target(
        lambda control: control.tasks.list(
            status=status,
            assignee=found.get("assignee"),
            run_id=found.get("run_id"),
            descendants=descendants,
        )
    )
    return Reply({"tasks": [task_forms.task_dict(task) for task in tasks]})


async def get_task(target: Target, call: Call) -> Reply:
    """`GET /tasks/{task_id}`."""
    task_id = call.path("task_id")
    task = await target(lambda control: control.tasks.get(task_id))
    return Reply(task_forms.task_dict(task))


async def submit(target: Target, call: Call) -> Reply:
    """`POST /tasks/{task_id}/submit`: `{"values": {...}, "by": NAME}`."""
    task_id = call.path("task_id")
    body = await call.fields(("values", "by"), required=("values",))
    by = inputs.typed(body.get("by"), str, "by", null=True)
    if by is not None and not by.strip():
        raise BadRequest("by must not be empty")
    values = body["values"]
    task = await target(lambda control: control.tasks.submit(task_id, values, by=by))
    return Reply(task_forms.task_dict(task))


OPERATIONS = (
    Operation(
        "GET",
        "/tasks",
        list_tasks,
        "List human tasks, oldest first",
        query=(
            Param("status", f"open (default), {', '.join(STATUSES[1:])}", {"enum": list(STATUSES)}),
            Param("assignee", "only tasks assigned to this person"),
            Param("run_id", "only tasks of this run and its descendant runs"),
            Param(
                "descendants",
                "with run_id: true (default) includes the tasks of its child runs (theirs "
                "too, 16 generations down at most); false keeps that run's own tasks only",
                {"type": "boolean"},
            ),
        ),
        errors=(422,),
    ),
    Operation("GET", "/tasks/{task_id}", get_task, "One human task", errors=(404,)),
    Operation(
        "POST",
        "/tasks/{task_id}/submit",
        submit,
        "Submit an open task's form; the waiting run goes on",
        body={
            "type": "object",
            "required": ["values"],
            "properties": {
                "values": {"type": "object"},
                "by": {"type": ["string", "null"], "pattern": "\\S", "description": "who submits"},
            },
            "additionalProperties": False,
        },
        errors=(404, 422),
    ),
)
