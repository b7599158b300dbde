"""Queue limits: `GET /queues` and `POST /queues/{name}` to change them while workers run.

A limit left out stays as it is; null removes it. Workers apply a change at their next
claim. Queues are shown in the shape of `cairn queues list --json`.
"""

from __future__ import annotations

from typing import Any

from cairn.authoring.queues import LARGEST_LIMIT
from cairn.dashboard.api import inputs
from cairn.dashboard.api.inputs import Call
from cairn.dashboard.api.operations import Operation
from cairn.dashboard.api.replies import BadRequest, Reply
from cairn.dashboard.target import Target
from cairn.names import check_queue_name
from cairn.representation import queues as queue_forms

LIMITS = tuple(queue_forms.LIMITS)


async def list_queues(target: Target, call: Call) -> Reply:
    """`GET /queues`: every queue with stored limits."""
    call.query(())
    infos = await target(lambda control: control.queues.list())
    return Reply({"queues": [queue_forms.queue_dict(info) for info in infos]})


async def update(target: Target, call: Call) -> Reply:
    """`POST /queues/{name}`: change the given limits (creating the queue if it has none)."""
    name = check_queue_name(call.path("name"), "queue name")
    body = await call.fields(LIMITS)
    if not body:
        raise BadRequest(f"request body names no limit to change (give {', '.join(LIMITS)})")
    limits: dict[str, Any] = {}
    for key, value in body.items():
        kind = str if key == "rate" else int
        limits[key] = inputs.typed(value, kind, key, null=True)
    info = await target(lambda control: control.queues.update(name, **limits))
    return Reply(queue_forms.queue_dict(info))


_LIMIT = {"type": ["integer", "null"], "minimum": 1, "maximum": LARGEST_LIMIT}

OPERATIONS = (
    Operation("GET", "/queues", list_queues, "List queues and their limits"),
    Operation(
        "POST",
        "/queues/{name}",
        update,
        "Change a queue's limits live (omitted: unchanged, null: no limit)",
        body={
            "type": "object",
            "properties": {
                "concurrency": _LIMIT,
                "per_worker": _LIMIT,
                "rate": {
                    "type": ["string", "null"],
                    "description": f"COUNT/DURATION, e.g. 100/1m (COUNT: 1 to {LARGEST_LIMIT})",
                },
                "partition_concurrency": _LIMIT,
            },
            "additionalProperties": False,
            "minProperties": 1,
        },
        errors=(422,),
    ),
)
