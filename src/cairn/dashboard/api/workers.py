"""`GET /workers`: the worker processes registered in the database, live or not.

`alive` is judged as the claim judges it, by heartbeat age against the worker's own
lease, but with this dashboard's clock, so it can be off by the clocks' skew.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from cairn.dashboard.api.inputs import Call
from cairn.dashboard.api.operations import Operation
from cairn.dashboard.api.replies import Reply
from cairn.dashboard.target import Target
from cairn.runtime.control import RunControl
from cairn.store.programs import workers as worker_ops
from cairn.store.records import WorkerRecord


def _list(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def last_heartbeat(worker: WorkerRecord) -> float | None:
    """When the worker last wrote its heartbeat (kept when it was declared dead), or None."""
    if worker.heartbeat_at > 0:
        return worker.heartbeat_at
    return worker.last_heartbeat_at  # None for a worker declared dead before schema 16


def worker_dict(worker: WorkerRecord, *, now: float) -> dict[str, Any]:
    """The JSON form of a worker row.

    `state` is live (heartbeat within its lease), silent (an older heartbeat: its runs
    are taken over once a worker has seen the database answer for a lease) or dead (a
    worker on its machine saw its process end).
    """
    beat = last_heartbeat(worker)
    alive = worker.heartbeat_at > 0 and now - worker.heartbeat_at <= worker.lease
    return {
        "worker_id": worker.worker_id,
        "host": worker.host,
        "pid": worker.pid,
        "started_at": datetime.fromtimestamp(worker.started_at, UTC),
        "heartbeat_at": None if beat is None else datetime.fromtimestamp(beat, UTC),
        "alive": alive,
        "state": "live" if alive else "silent" if worker.heartbeat_at > 0 else "dead",
        "concurrency": worker.concurrency,
        "lease": worker.lease,
        "queues": _list(worker.queues),
        "workflows": _list(worker.workflows),
    }


async def list_workers(target: Target, call: Call) -> Reply:
    """`GET /workers`, oldest first."""
    call.query(())

    async def read(control: RunControl) -> list[dict[str, Any]]:
        now = control.clock.now()
        return [
            worker_dict(w, now=now) for w in await control.store.read(worker_ops.list_workers())
        ]

    return Reply({"workers": await target(read)})


OPERATIONS = (Operation("GET", "/workers", list_workers, "List worker processes"),)
