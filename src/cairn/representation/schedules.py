"""The JSON form of a schedule.

`cairn schedules list|create --json` print it; the HTTP API (`/api/v1/schedules`) answers it.
"""

from __future__ import annotations

from typing import Any

from cairn.representation.json_form import jsonable
from cairn.runtime.schedules import ScheduleInfo


def schedule_dict(info: ScheduleInfo) -> dict[str, Any]:
    """The JSON form of a schedule."""
    return {
        "id": info.id,
        "workflow": info.workflow,
        "cron": info.cron,
        "every": None if info.every is None else info.every.total_seconds(),
        "tz": info.tz,
        "overlap": info.overlap,
        "catchup": info.catchup.total_seconds(),
        "args": jsonable(list(info.args)),
        "kwargs": jsonable(info.kwargs),
        "paused": info.paused,
        "next_tick": jsonable(info.next_tick),
        "buffered_tick": jsonable(info.buffered_tick),
        "last_run_id": info.last_run_id,
        "source": info.source,
        "created_at": jsonable(info.created_at),
        "updated_at": jsonable(info.updated_at),
    }
