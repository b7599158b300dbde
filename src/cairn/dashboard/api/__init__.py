"""The JSON API under /api/v1: every operation, and the app that serves them.

One module per resource declares its operations; this one gathers them, adds
`GET /openapi.json`, and answers unknown paths and methods in the API's error shape.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from cairn.dashboard.api import (
    bulk,
    health,
    openapi,
    queues,
    runs,
    schedules,
    streams,
    tasks,
    values,
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
        *values.OPERATIONS,  # before runs' too
        *streams.OPERATIONS,  # before runs': a run id's path parameter takes nearly anything
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


async def http_error(request: Request, exc: Exception) -> Response:
    """A 404, 405, ... of routing, in the API's error shape."""
    assert isinstance(exc, HTTPException)
    name = _HTTP_ERRORS.get(exc.status_code, "BadRequest")
    message = f"{request.method} {request.url.path}: {exc.detail}"
    return error_response(exc.status_code, name, message, headers=exc.headers)


def allowed(served: tuple[Operation, ...], path: str) -> str | None:
    """The Allow header of a 405 for `path`: the methods the OpenAPI document gives it.

    Starlette's would name only the first route the path matches; a run id's `path`
    parameter matches nearly anything (`GET /runs/{run_id}` takes `/runs/x/cancel`).
    None when no operation's path, each parameter one segment, is `path`.
    """
    matching = [op for op in served if op.serves(path)]
    # As OpenAPI matches paths: one without parameters before the templates it fits.
    concrete = [op for op in matching if "{" not in op.template]
    methods = {op.method for op in concrete or matching}
    if "GET" in methods:
        methods.add("HEAD")  # Starlette answers HEAD wherever it answers GET
    return ", ".join(sorted(methods)) or None


def create(target: Target, *, guarded: bool) -> Starlette:
    """The API app, to mount at /api/v1 behind `paths.RawPaths` (routing on the raw path)."""
    served = operations(guarded=guarded)

    async def routing_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 405:
            path, root = request.scope["path"], request.scope.get("root_path", "")
            methods = allowed(served, path[len(root) :] if path.startswith(root) else path)
            if methods is not None:
                exc = HTTPException(405, exc.detail, headers={"Allow": methods})
        return await http_error(request, exc)

    return Starlette(
        routes=[op.route(target) for op in served],
        exception_handlers={HTTPException: routing_error},
    )
