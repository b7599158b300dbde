"""`GET /workflows`: the workflows this dashboard's process registers and live workers execute.

The same facts as `cairn workflows list --json` (see runtime/catalog.py).
"""

from __future__ import annotations

from typing import Any

from cairn.dashboard.api.inputs import Call
from cairn.dashboard.api.operations import Operation
from cairn.dashboard.api.replies import Reply
from cairn.dashboard.target import Target
from cairn.representation.workflows import workflow_dict
from cairn.runtime import catalog
from cairn.runtime.control import RunControl


async def list_workflows(target: Target, call: Call) -> Reply:
    """`GET /workflows`, by name."""
    call.query(())

    async def read(control: RunControl) -> list[dict[str, Any]]:
        return [workflow_dict(info) for info in await catalog.workflows(control)]

    return Reply({"workflows": await target(read)})


OPERATIONS = (
    Operation(
        "GET",
        "/workflows",
        list_workflows,
        "List workflows: those registered here and those live workers execute",
    ),
)
