"""The JSON form of a human task, and the statuses a task can be in.

`cairn tasks list|show --json` print it; the HTTP API (`/api/v1/tasks`) answers it.
"""

from __future__ import annotations

from typing import Any

from cairn.representation.json_form import jsonable
from cairn.runtime.tasks import STATUSES as STATUSES  # the statuses a task can be in
from cairn.runtime.tasks import TaskInfo


def task_dict(task: TaskInfo) -> dict[str, Any]:
    """The JSON form of a task."""
    return {
        "task_id": task.task_id,
        "run_id": task.run_id,
        "name": task.name,
        "title": task.title,
        "status": task.status,
        "data": jsonable(task.data),
        "form": task.form,
        "assignee": task.assignee,
        "created_at": jsonable(task.created_at),
        "due_at": jsonable(task.due_at),
        "submitted_at": jsonable(task.submitted_at),
        "submitted_by": task.submitted_by,
        "values": jsonable(task.values),
    }
