"""The base of SqlStore's parts: how a program is run, and small read programs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from cairn.store._health import StoreHealth
from cairn.store.programs.base import Program, Sql
from cairn.store.protocol import SideChannel

T = TypeVar("T")


def rows_of(text: str, params: Sequence[Any] = ()) -> Program[list[Any]]:
    """A program reading every row of one statement."""
    rows: list[Any] = yield Sql(text, params, "all")
    return rows


def count_of(text: str, params: Sequence[Any] = ()) -> Program[int]:
    """A program running one statement for its row count."""
    count: int = yield Sql(text, params)
    return count


class SqlBase:
    """What every part of SqlStore stands on: the backend's `write` and `read`."""

    dialect = "sql"
    wakes_for_timers = False  # see Store.wakes_for_timers
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

    async def read_one_plan(self, make: Callable[[], Program[T]]) -> T:
        """`read`, for a program whose statements' best plan does not depend on their values.

        A backend that caches query plans may plan such statements once (PostgreSQL);
        by default this is `read`.
        """
        return await self.read(make)

    def side_channel(self) -> SideChannel | None:
        """A connection of its own for a heartbeat thread (see Store.side_channel)."""
        return None
