"""`cairn mcp`'s process: an engine that reads and steers runs, and the MCP transport.

Over stdio the client (Claude Desktop, an IDE) starts this process and talks on its stdin
and stdout; over HTTP it listens on a socket bound up front, as `cairn dashboard` does.
The engine executes no run: `cairn worker` processes do.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import uvicorn

from cairn.dashboard.guard import check_allowed_host
from cairn.dashboard.serve import AnnouncingServer
from cairn.mcp_server import server
from cairn.runtime.opening import engine_on

# For `cairn mcp --allowed-host`, which checks its names as `cairn dashboard` does (the
# CLI imports the dashboard only to start it, so it takes the check from here).
__all__ = ["check_allowed_host", "serve"]
PATH = server.PATH


async def serve(
    url: str,
    modules: tuple[str, ...],
    *,
    sock: socket.socket | None = None,
    token: str | None = None,
    allowed_hosts: tuple[str, ...] = (),
    announce: Callable[[], None] = lambda: None,
) -> None:
    """Serve the tools over stdio (no `sock`), or over HTTP on the bound `sock`.

    Over HTTP it stops on SIGINT or SIGTERM; over stdio when the client closes stdin.
    """
    # It reads and steers runs: a mistyped URL must not become a new database.
    async with engine_on(url, migrate=False, workers=0, modules=modules) as engine:
        if sock is None:
            announce()
            await server.serve_stdio(engine.control)
            return
        app = server.http_app(engine.control, token=token, allowed_hosts=allowed_hosts)
        config = uvicorn.Config(
            app,
            lifespan="on",
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=5,
        )
        await AnnouncingServer(config, announce, lambda: None).serve(sockets=[sock])
