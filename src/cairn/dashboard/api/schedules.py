"""Schedules: `GET /schedules`, `GET /schedules/{id}`, `POST /schedules/{id}/pause|resume|trigger`.

Schedules are shown in the shape of `cairn schedules list --json`. Creating and deleting
stay with code (`cairn.schedule`) and the CLI; ticks are fired by engines with workers.
"""

from __future__ import annotations

from typing import Any

from cairn.dashboard.api.inputs import Call
from cairn.dashboard.api.operations import Handler, Operation
from cairn.dashboard.api.replies import Reply
from cairn.dashboard.target import Target
from cairn.representation import schedules as schedule_forms
from cairn.runtime.control import RunControl


async def list_schedules(target: Target, call: Call) -> Reply:
    """`GET /schedules`: every schedule, by id."""
    call.query(())
    infos = await target(lambda control: control.schedules.list())
    return Reply({"schedules": [schedule_forms.schedule_dict(info) for info in infos]})


async def get_schedule(target: Target, call: Call) -> Reply:
    """`GET /schedules/{schedule_id}`."""
    schedule_id = call.path("schedule_id")
    info = await target(lambda control: control.schedules.get(schedule_id))
    return Reply(schedule_forms.schedule_dict(info))


def _switch(paused: bool) -> Handler:
    async def handle(target: Target, call: Call) -> Reply:
        schedule_id = call.path("schedule_id")
        await call.fields(())

        async def go(control: RunControl) -> Any:
            if paused:
                return await control.schedules.pause(schedule_id)
            return await control.schedules.resume(schedule_id)

        return Reply(schedule_forms.schedule_dict(await target(go)))

    return handle


async def trigger(target: Target, call: Call) -> Reply:
    """`POST /schedules/{schedule_id}/trigger`: start one run now, whatever the overlap (201)."""
    schedule_id = call.path("schedule_id")
    await call.fields(())

    async def go(control: RunControl) -> dict[str, Any]:
        handle = await control.schedules.trigger(schedule_id)
        run = await control.record(handle.run_id)
        return {"run_id": run.run_id, "status": run.status, "schedule_id": schedule_id}

    return Reply(await target(go), 201)


_ONE = "/schedules/{schedule_id}"
_EMPTY = {"type": "object", "additionalProperties": False}

OPERATIONS = (
    Operation("GET", "/schedules", list_schedules, "List schedules"),
    Operation("GET", _ONE, get_schedule, "One schedule", errors=(404,)),
    Operation(
        "POST",
        f"{_ONE}/pause",
        _switch(True),
        "Stop firing ticks (runs already started go on)",
        body=_EMPTY,
        errors=(404,),
    ),
    Operation(
        "POST",
        f"{_ONE}/resume",
        _switch(False),
        "Fire ticks again, from the next one",
        body=_EMPTY,
        errors=(404,),
    ),
    Operation(
        "POST",
        f"{_ONE}/trigger",
        trigger,
        "Start one run of the schedule now",
        ok=201,
        body=_EMPTY,
        errors=(404,),
    ),
)
