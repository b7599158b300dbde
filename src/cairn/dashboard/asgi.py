"""The dashboard's ASGI app: the JSON API under /api/v1 and the web pages, behind the token guard.

It reads and steers runs through RunControl and never executes a run itself. Every
response carries the security headers (Content-Security-Policy, ...); every request first
passes `guard.Guard` (the host names it serves, no change from another site).
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from cairn.client import Client
from cairn.dashboard import api, ui
from cairn.dashboard.api import paths
from cairn.dashboard.auth import BearerAuth
from cairn.dashboard.guard import AllowedHosts, Guard
from cairn.dashboard.target import Target
from cairn.dashboard.ui.headers import SecurityHeaders
from cairn.dashboard.ui.live import Streams
from cairn.runtime.control import RunControl
from cairn.runtime.engine import Engine


def create_app(
    source: Engine | Client | RunControl,
    *,
    token: str | None = None,
    allowed_hosts: Iterable[str] = (),
) -> Starlette:
    """The dashboard as an ASGI app.

    Args:
        source: What it reads and steers: an open Engine (on the loop that serves the
            app; give it `workers=0` to keep it from executing runs), a Client, or a
            RunControl.
        token: When set, every request but `POST /api/v1/hooks/{token}` and
            `GET /api/v1/health` needs `Authorization: Bearer <token>`; the web pages
            also take the session cookie their login page sets.
        allowed_hosts: Host names it answers to besides localhost and IP addresses (any
            port): the names browsers (or a proxy's X-Forwarded-Host) use for it, like
            `["dash.example.com"]`; `"*.example.com"` names every subdomain, and `"*"`
            any name at all (unsafe unless a proxy in front checks the name). A request
            for another name gets 421.

    Returns:
        A Starlette app serving the pages at `/` and the API at `/api/v1/...`, and
        `/metrics` when `source` is an Engine made with `metrics=True`.
        `app.state.streams.close()` ends its open event streams (call it on shutdown).

    Raises:
        ValueError: An empty token, or an `allowed_hosts` entry that is not a host name.
    """
    if token is not None and not token:
        raise ValueError("the dashboard token must not be empty (pass None for no token)")
    allowed = AllowedHosts(allowed_hosts)
    target = Target(source)
    guarded = token is not None
    middleware = [
        Middleware(SecurityHeaders),
        Middleware(Guard, allowed=allowed, api_prefix=api.PREFIX),
    ]
    if token:
        open_routes = [
            (op.method, api.PREFIX + op.path) for op in api.operations(guarded=guarded) if op.public
        ]
        middleware.append(
            Middleware(BearerAuth, token=token, open_routes=open_routes, api_prefix=api.PREFIX)
        )
    # Innermost: the guard and the token see the path as sent; routing sees it raw.
    middleware.append(Middleware(paths.RawPaths, prefix=api.PREFIX))
    streams = Streams()
    routes = [
        Mount(api.PREFIX, app=api.create(target, guarded=guarded)),
        *ui.routes(target, token=token, streams=streams),
    ]
    metrics = source.metrics if isinstance(source, Engine) else None
    if metrics is not None:  # Prometheus scrapes it (with the token, when there is one)
        from cairn.observability.metrics_app import metrics_app

        routes.insert(0, Route("/metrics", _Asgi(metrics_app(metrics)), methods=["GET"]))
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={HTTPException: _not_served},
    )
    app.state.guarded = guarded
    app.state.streams = streams
    return app


async def _not_served(request: Request, exc: Exception) -> Response:
    """A path no route takes: in the API's error shape under /api/v1, else as text.

    The API's own app answers what reaches it; this is for what the mount cannot take
    (a path with a line break: its pattern's `.` stops there).
    """
    assert isinstance(exc, HTTPException)
    path = request.url.path
    if path == api.PREFIX or path.startswith(api.PREFIX + "/"):
        return await api.http_error(request, exc)
    if exc.status_code in (204, 304):
        return Response(status_code=exc.status_code, headers=exc.headers)
    return PlainTextResponse(exc.detail, status_code=exc.status_code, headers=exc.headers)


class _Asgi:
    """An ASGI app as a Route endpoint (Starlette calls a plain function per request)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def app(
    engine_or_client: Engine | Client | RunControl,
    token: str | None = None,
    *,
    allowed_hosts: Iterable[str] = (),
) -> Starlette:
    """`cairn.dashboard.app(engine)`: the dashboard to mount in an ASGI server (see create_app)."""
    return create_app(engine_or_client, token=token, allowed_hosts=allowed_hosts)
