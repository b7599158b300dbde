"""TaskControl: the human-task inbox behind `engine.tasks`, the Client and the CLI."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cairn.authoring import forms
from cairn.codecs import coded
from cairn.errors import InvalidSubmission, InvalidValue, TaskNotFound
from cairn.names import check_name, findable
from cairn.runtime import plain_inputs
from cairn.store.programs import waits
from cairn.store.records import TaskRecord

if TYPE_CHECKING:
    from cairn.runtime.control_view import ControlView


# What `list(status=...)` takes: a task is open until it is submitted, expires or its
# run is cancelled.
STATUSES = ("open", "submitted", "expired", "cancelled")


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """A human task as people and programs see it."""

    task_id: str
    run_id: str
    name: str
    title: str
    status: str
    data: Any
    form: dict[str, Any] | None
    assignee: str | None
    created_at: datetime
    due_at: datetime | None
    submitted_at: datetime | None
    submitted_by: str | None
    values: Any


def _dt(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


class TaskControl:
    """List, read and submit human tasks."""

    def __init__(self, control: ControlView) -> None:
        self._control = control

    def _info(self, task: TaskRecord) -> TaskInfo:
        serializer = self._control.serializer  # "encrypted (k1)" where it has no key
        return TaskInfo(
            task_id=task.task_id,
            run_id=task.run_id,
            name=task.name,
            title=task.title,
            status=task.status,
            data=coded.shown_value(serializer, task.data),
            form=None if task.form is None else json.loads(task.form),
            assignee=task.assignee,
            created_at=_dt(task.created_at) or datetime.now(UTC),
            due_at=_dt(task.due_at),
            submitted_at=_dt(task.submitted_at),
            submitted_by=task.submitted_by,
            values=coded.shown_value(serializer, task.submitted_values, plain_json=True),
        )

    async def list(
        self,
        status: str | None = "open",
        assignee: str | None = None,
        run_id: str | None = None,
        *,
        descendants: bool = False,
    ) -> list[TaskInfo]:
        """Tasks, oldest first; `status=None` lists every status.

        `run_id` keeps that run's tasks; with `descendants`, those of its child runs
        too (and theirs, 16 generations down at most): what a parent waits on.

        Raises:
            InvalidName: an `assignee` or `run_id` no task can have (a NUL, say).
            ValueError: an unknown `status`.
        """
        if status is not None and status not in STATUSES:
            raise InvalidValue(f"unknown task status {status!r} (one of {', '.join(STATUSES)})")
        for value, what in ((assignee, "assignee"), (run_id, "run_id")):
            if value is not None:
                check_name(value, what)
        tasks = await self._control.store.read(
            waits.list_tasks(
                status=status, assignee=assignee, run_id=run_id, descendants=descendants
            )
        )
        return [self._info(task) for task in tasks]

    async def _stored(self, task_id: str) -> TaskRecord | None:
        """The stored task; None for an id no task can have (InvalidName for a non-string)."""
        if not findable(task_id, "task id"):
            return None
        return await self._control.store.read(waits.get_task(task_id))

    async def get(self, task_id: str) -> TaskInfo:
        """One task; TaskNotFound if unknown."""
        task = await self._stored(task_id)
        if task is None:
            raise TaskNotFound(f"human task {task_id!r} not found")
        return self._info(task)

    async def submit(self, task_id: str, values: Any, *, by: str | None = None) -> TaskInfo:
        """Submit the form; the waiting run continues with the values.

        Raises:
            TaskNotFound: unknown task.
            InvalidSubmission: values that do not fit the form (the fields are listed).
            TaskNotFound: ... or the task is no longer open (submitted, expired, cancelled).
        """
        if by is not None:
            check_name(by, "by")
        task = await self._stored(task_id)
        if task is None:
            raise TaskNotFound(f"human task {task_id!r} not found")
        if task.status != "open":
            raise TaskNotFound(f"human task {task_id!r} is not open (it is {task.status})")
        if not isinstance(values, dict):
            raise InvalidSubmission(fields={"(form)": "values must be a JSON object"})
        checked = forms.validate(values, task.form, task.form_model)
        what = f"the answer to human task {task_id!r}"
        await plain_inputs.refuse_plain(self._control, task.run_id, what=what)
        text = coded.seal(self._control.serializer, json.dumps(checked))  # encrypted at rest
        stored = await self._control.store.write(
            waits.submit_task(task_id, text, by=by, now=self._control.clock.now())
        )
        if stored is None:
            raise TaskNotFound(f"human task {task_id!r} is no longer open")
        self._control.wake_local()
        return self._info(stored)
