"""The JSON API under /api/v1: every operation, and the app that serves them.

One module per resource declares its operations; this one gathers them, adds
`GET /openapi.json`, and answers unknown paths and methods in the API's error shape.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response

from cairn.dashboard.api import (
    bulk,
    health,
    openapi,
    paths,
    queues,
    runs,
    schedules,
    tasks,
    verb_routes,
    workers,
    workflows,
)
from cairn.dashboard.api.inputs import Call
from cairn.dashboard.api.operations import Operation
from cairn.dashboard.api.replies import Reply, error_response
from cairn.dashboard.target import Target

PREFIX = "/api/v1"

_HTTP_ERRORS = {404: "NotFound", 405: "MethodNotAllowed"}


def operations(*, guarded: bool) -> tuple[Operation, ...]:
    """Every operation of the API, `GET /openapi.json` included."""
    served: tuple[Operation, ...] = (
        *runs.OPERATIONS,
        *verb_routes.OPERATIONS,
        *bulk.OPERATIONS,
        *tasks.OPERATIONS,
        *schedules.OPERATIONS,
        *queues.OPERATIONS,
        *workers.OPERATIONS,
        *workflows.OPERATIONS,
        *health.OPERATIONS,
    )

    async def describe(target: Target, call: Call) -> Reply:
        return Reply(openapi.document(everything, guarded=guarded))

    spec = Operation("GET", "/openapi.json", describe, "This OpenAPI document")
    everything = (*served, spec)
    return everything


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    name = _HTTP_ERRORS.get(exc.status_code, "BadRequest")
    message = f"{request.method} {request.url.path}: {exc.detail}"
    return error_response(exc.status_code, name, message, headers=exc.headers)


def create(target: Target, *, guarded: bool) -> Starlette:
    """The API app, to mount at /api/v1; it routes on the raw path (see `paths`)."""
    routes = [op.route(target) for op in operations(guarded=guarded)]
    return Starlette(
        routes=routes,
        exception_handlers={HTTPException: _http_error},
        middleware=[Middleware(paths.RawPaths)],
    )
