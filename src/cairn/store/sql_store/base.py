"""SqlBase: what a SQL backend provides, with the defaults they share."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from cairn.store._health import StoreHealth
from cairn.store.programs.base import Program
from cairn.store.protocol import SideChannel
from cairn.store.stream_bells import StreamBells

T = TypeVar("T")


class SqlBase:
    """The backend's `write` and `read`, which each backend implements."""

    dialect = "sql"
    wakes_for_timers = False  # see Store.wakes_for_timers
    writes_on_loop = False  # see Store.writes_on_loop
    health: StoreHealth

    async def write(self, make: Callable[[], Program[T]]) -> T:
        """Run the program `make()` builds in a write transaction; return once committed.

        `make` is an operation (see programs/base.py), or (inside the store) any maker of
        a program. A backend may call `make` again to run the transaction afresh
        (PostgreSQL does when the connection is lost before COMMIT, which the server
        rolls back).
        """
        raise NotImplementedError

    async def read(self, make: Callable[[], Program[T]]) -> T:
        """Run the read-only program `make()` builds (again, if the backend must retry)."""
        raise NotImplementedError

    async def read_aside(self, make: Callable[[], Program[T]]) -> T:
        """`read`, for a long scan that must not hold up the event loop (by default `read`)."""
        return await self.read(make)

    async def read_one_plan(self, make: Callable[[], Program[T]]) -> T:
        """`read`, for a program whose statements' best plan does not depend on their values.

        A backend that caches query plans may plan such statements once (PostgreSQL);
        by default this is `read`.
        """
        return await self.read(make)

    _stream_bells: StreamBells | None = None

    def stream_bells(self) -> StreamBells:
        """Where this process's stream readers wait (see Backend.stream_bells).

        By default only this process's appends ring them; its readers poll for others'.
        """
        if self._stream_bells is None:
            self._stream_bells = StreamBells()
        return self._stream_bells

    def side_channel(self) -> SideChannel | None:
        """A connection of its own for a heartbeat thread (see Store.side_channel)."""
        return None
