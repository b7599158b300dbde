"""`GET /runs/{id}/values/{name}`: one stored value of a run, whole (a download).

`name` is `args`, `result` or a history entry's key (`produce#1`). The answer is the
value's stored text (the serializer's JSON), an offloaded value fetched from its blob
and checked against its hash (see runtime/stored_values.py); the run page shows only a
preview of such a value and links here.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from cairn.dashboard.api.inputs import Call
from cairn.dashboard.api.operations import Operation
from cairn.dashboard.api.replies import Reply
from cairn.dashboard.target import Target
from cairn.runtime import stored_values

VALUE: dict[str, Any] = {"application/json": {"schema": {}}}


async def download(target: Target, call: Call) -> Reply:
    """`GET /runs/{run_id}/values/{name}`."""
    run_id, name = call.path("run_id"), call.path("name")
    text = await target(lambda control: stored_values.stored_text(control, run_id, name))
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{run_id}-{name}")
    headers = {"content-disposition": f'attachment; filename="{safe}.json"'}
    return Reply(Response(text, media_type="application/json", headers=headers))


OPERATIONS = (
    Operation(
        "GET",
        "/runs/{run_id:path}/values/{name}",
        download,
        "One stored value of a run, whole: `args`, `result` or a history entry's key; an "
        "offloaded value is fetched from its blob and checked against its hash",
        errors=(404, 422),
        content=VALUE,
    ),
)
