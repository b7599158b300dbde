"""The human-task inbox (`/tasks`) and each task's page, with a form built from its schema.

Submitting goes through `engine.tasks.submit` like the CLI and the API: values that do not
fit are refused with `InvalidSubmission`, whose field errors are shown beside the fields.
Each answer records who (`by`) and when; answered tasks stay listed below the open ones.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from cairn.authoring import forms
from cairn.dashboard.target import Target
from cairn.dashboard.ui import csrf, render, schema_form
from cairn.errors import InvalidSubmission, TaskNotFound
from cairn.runtime.control import RunControl
from cairn.runtime.tasks import TaskInfo

BY_COOKIE = "cairn_by"
ANSWERED = 50  # answered tasks shown below the open ones, newest first
_EPOCH = datetime.fromtimestamp(0, UTC)


def _newest(task: TaskInfo) -> datetime:
    return task.submitted_at or task.created_at or _EPOCH


def routes(target: Target) -> list[BaseRoute]:
    """The inbox, a task's page and its submission."""

    @render.handled
    async def inbox(request: Request) -> Response:
        assignee = request.query_params.get("assignee", "").strip() or None

        async def read(control: RunControl) -> tuple[list[TaskInfo], list[TaskInfo]]:
            every = await control.tasks.list(status=None, assignee=assignee)
            return [t for t in every if t.status == "open"], [
                t for t in every if t.status != "open"
            ]

        open_tasks, closed = await target(read)
        closed.sort(key=_newest, reverse=True)
        context = {
            "title": "Inbox",
            "nav": "tasks",
            "tasks": open_tasks,
            "answered": closed[:ANSWERED],
            "assignee": assignee or "",
            "assignees": sorted({t.assignee for t in open_tasks if t.assignee}),
        }
        return render.page(request, "tasks.html", context)

    def task_page(
        request: Request,
        task: TaskInfo,
        *,
        raw: dict[str, str] | None = None,
        errors: dict[str, str] | None = None,
        status: int = 200,
    ) -> Response:
        raw = raw or {}
        # "by" is the page's own field, reported beside it (not as a form problem too).
        form_errors = {k: v for k, v in (errors or {}).items() if k != "by"}
        fields, leftover = schema_form.build(task.form, raw or None, form_errors or None)
        by = raw.get("by", request.cookies.get(BY_COOKIE, ""))
        context = {
            "title": task.title or task.name,
            "nav": "tasks",
            "task": task,
            "fields": fields,
            "form_errors": leftover,
            "field_errors": schema_form.problems(fields),
            "by": by,
            "by_error": (errors or {}).get("by", ""),
            "described_fields": [*schema_form.described(fields), ("by", "Answered by", "text")],
        }
        return render.page(request, "task.html", context, status)

    @render.handled
    async def show(request: Request) -> Response:
        task_id = request.path_params["task_id"]
        task = await target(lambda control: control.tasks.get(task_id))
        return task_page(request, task)

    @render.handled
    async def submit(request: Request) -> Response:
        task_id = request.path_params["task_id"]
        form = await csrf.read_form(request)
        raw = {name: value for name, value in form if name != csrf.FIELD}
        task = await target(lambda control: control.tasks.get(task_id))
        here = f"/tasks/{render.segment(task_id)}"
        if task.status != "open":
            notice = f"task {task_id} is {task.status}; it takes no more answers"
            return render.redirect(request, here, notice=notice, error=True)
        values, problems = schema_form.parse(task.form, raw)
        by = raw.get("by", "").strip()
        if not by:
            problems["by"] = "required: say who answers"
        if problems:
            try:  # report the other fields' problems at the same time
                if task.form:
                    forms.validate(values, json.dumps(task.form), None)
            except InvalidSubmission as exc:
                problems = {**exc.fields, **problems}
            return task_page(request, task, raw=raw, errors=problems, status=422)
        try:
            done = await target(lambda control: control.tasks.submit(task_id, values, by=by))
        except InvalidSubmission as exc:
            return task_page(request, task, raw=raw, errors=exc.fields, status=422)
        except TaskNotFound as exc:
            return render.redirect(request, here, notice=exc.message, error=True)
        notice = (
            f"task {done.task_id} answered by {done.submitted_by}; run {done.run_id} goes on "
            "when a worker takes it"
        )
        response = render.redirect(request, "/tasks", notice=notice)
        render.set_cookie(request, response, BY_COOKIE, by[:200])
        return response

    return [
        Route("/tasks", inbox, methods=["GET"], name="ui:tasks"),
        Route("/tasks/{task_id}", show, methods=["GET"]),
        Route("/tasks/{task_id}", submit, methods=["POST"]),
    ]
