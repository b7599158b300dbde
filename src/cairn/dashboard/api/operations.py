"""An API operation declared once: its route, its handler and what the OpenAPI document says.

The routes and `/openapi.json` are both built from these declarations, so the document
cannot list a route that does not exist or miss one that does.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cairn import names
from cairn.dashboard.api.inputs import Call
from cairn.dashboard.api.replies import Reply, failure, json_response
from cairn.dashboard.target import Target

Handler = Callable[[Target, Call], Awaitable[Reply]]

_CONVERTOR = re.compile(r"{(\w+):\w+}")

NAME: dict[str, Any] = names.SCHEMA
"""The JSON Schema of a name or id (of a run, workflow, queue, event, ...): `check_name`."""


@dataclass(frozen=True, slots=True)
class Param:
    """A query parameter, for the OpenAPI document."""

    name: str
    """Its name (`col.` stands for any `col.NAME`)."""
    description: str
    """What it does."""
    schema: dict[str, Any] = field(default_factory=lambda: {"type": "string"})
    """Its JSON Schema (a string unless told)."""


@dataclass(frozen=True, slots=True)
class Operation:
    """One method on one path of /api/v1."""

    method: str
    """GET or POST."""
    path: str
    """Relative to /api/v1, with `{name}` path parameters (`{name:path}` may hold `/`)."""
    handler: Handler
    """Reads the call and returns the reply; raises for failures (see `replies.failure`)."""
    summary: str
    """One line for the OpenAPI document."""
    ok: int = 200
    """The status of a success."""
    also: tuple[tuple[int, str], ...] = ()
    """Other successes it can answer, each with what it means (`POST /runs`: 200, a run
    that exists already)."""
    query: tuple[Param, ...] = ()
    """Query parameters."""
    body: dict[str, Any] | None = None
    """JSON Schema of the request body, or None when it takes none."""
    errors: tuple[int, ...] = ()
    """The failure statuses it can answer besides 400, 401 and 500."""
    public: bool = False
    """True for the operations a token does not guard (`POST /hooks/{token}`, `GET /health`)."""
    description: str | None = None
    """More than the summary says, for the OpenAPI document (None: nothing more)."""
    content: dict[str, Any] | None = None
    """The OpenAPI `content` of a success when it is not JSON (server-sent events): its
    handler's Reply then carries the Response itself."""

    @property
    def template(self) -> str:
        """The path as OpenAPI writes it: `{name}` for every parameter."""
        return _CONVERTOR.sub(r"{\1}", self.path)

    def serves(self, path: str) -> bool:
        """True if `path` (under /api/v1) is this operation's, each parameter one segment."""
        segments = re.sub(r"\\{\w+\\}", "[^/]+", re.escape(self.template))
        return re.fullmatch(segments, path, re.DOTALL) is not None

    def route(self, target: Target) -> Route:
        """The Starlette route that serves this operation against `target`."""
        where = f"{self.method} {self.template}"

        async def endpoint(request: Request) -> Response:
            try:
                reply = await self.handler(target, Call(request))
            except Exception as exc:
                return failure(exc, where=where)
            if isinstance(reply.body, Response):  # a stream (see `content`)
                return reply.body
            return json_response(reply.body, reply.status)

        name = f"api:{self.method.lower()}:{self.path}"
        return Route(self.path, endpoint, methods=[self.method], name=name)
