"""The workers page (`/workers`): the worker processes in the database, live ones first.

Each row is the API's worker shape (`GET /api/v1/workers`): live by heartbeat age against
the worker's own lease, the workflows it imports and the queues it serves.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from cairn.dashboard.api.workers import last_heartbeat, worker_dict
from cairn.dashboard.target import Target
from cairn.dashboard.ui import render
from cairn.representation import words
from cairn.runtime.control import RunControl
from cairn.store.programs import workers as worker_ops


def routes(target: Target) -> list[BaseRoute]:
    """The workers page."""

    @render.handled
    async def listing(request: Request) -> Response:
        async def read(control: RunControl) -> list[dict[str, Any]]:
            now = control.clock.now()
            found = []
            for worker in await control.store.read(worker_ops.list_workers()):
                shown = worker_dict(worker, now=now)
                beat = last_heartbeat(worker)
                shown["beat_age"] = "" if beat is None else words.seconds(now - beat) + " ago"
                found.append(shown)
            return found

        workers = await target(read)
        workers.sort(key=lambda w: (not w["alive"], w["worker_id"]))
        context = {
            "title": "Workers",
            "nav": "workers",
            "workers": workers,
            "alive": sum(1 for w in workers if w["alive"]),
        }
        return render.page(request, "workers.html", context)

    return [Route("/workers", listing, methods=["GET"], name="ui:workers")]
