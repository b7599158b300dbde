"""`cairn dashboard`'s server: uvicorn on a socket bound up front, beside an engine.

The engine reads and steers runs; `cairn worker` processes execute them, unless the
dashboard was asked to as well (`workers`). SIGINT and SIGTERM stop the server
gracefully, then the engine (whose runs are handed back) and the database.
"""

from __future__ import annotations

import contextlib
import signal
import socket
from collections.abc import Callable, Generator
from types import FrameType

import uvicorn

from cairn.dashboard.asgi import create_app
from cairn.runtime.opening import engine_on


class AnnouncingServer(uvicorn.Server):
    """uvicorn's server, announcing where it listens and leaving signals handled.

    `cairn mcp --http` serves with it too.
    """

    def __init__(
        self,
        config: uvicorn.Config,
        announce: Callable[[], None],
        closing: Callable[[], None],
    ) -> None:
        super().__init__(config)
        self._announce = announce
        self._closing = closing

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Start serving, then announce where."""
        await super().startup(sockets)
        if self.started:
            self._announce()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Call `closing`, then stop as uvicorn does."""
        # Open event streams never end by themselves soon enough: end them first, so
        # their connections close and the shutdown does not wait on them.
        self._closing()
        await super().shutdown(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        """While serving, SIGINT and SIGTERM only ask the server to stop."""

        # uvicorn raises a caught signal again after shutting down; the engine must
        # close first, so a signal here only asks the server to stop.
        def stop(sig: int, frame: FrameType | None) -> None:
            self.should_exit = True

        previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


async def serve(
    url: str,
    modules: tuple[str, ...],
    sock: socket.socket,
    *,
    token: str | None,
    announce: Callable[[], None],
    workers: int = 0,
    allowed_hosts: tuple[str, ...] = (),
) -> None:
    """Serve the dashboard on the bound `sock` until SIGINT or SIGTERM.

    With `workers`, the engine also executes up to that many runs at once, and like a
    worker creates or migrates cairn's schema; without, it only reads and steers, so it
    opens only a database with cairn's current schema (SchemaMissing otherwise: a
    mistyped URL does not become a new database). It answers to localhost, IP addresses
    and `allowed_hosts` (see `create_app`).
    """
    metrics = _metrics_installed()
    settings = {"workers": workers, "modules": modules, "metrics": metrics}
    async with engine_on(url, migrate=workers > 0, **settings) as engine:
        app = create_app(engine, token=token, allowed_hosts=allowed_hosts)
        config = uvicorn.Config(
            app,
            lifespan="off",
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=5,
        )
        await AnnouncingServer(config, announce, app.state.streams.close).serve(sockets=[sock])


def _metrics_installed() -> bool:
    """True if prometheus_client is there: `/metrics` is served then (cairn-workflows[metrics])."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return False
    return True
