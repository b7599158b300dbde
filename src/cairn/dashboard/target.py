"""What the dashboard drives: the RunControl of an Engine, a Client or a RunControl itself.

A Client's RunControl lives on the Client's own event-loop thread, so its calls are sent
there; an Engine's or a bare RunControl's run on the loop that serves the app. Every call
has a deadline: a database that does not answer (a write lock held by another process,
a frozen connection) costs a request DEADLINE seconds and a 503, never a request that
hangs for as long as the database does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from cairn.client import Client
from cairn.dashboard.api.replies import UnansweredError
from cairn.runtime.control import RunControl
from cairn.runtime.engine import Engine

T = TypeVar("T")

DEADLINE = 30.0
"""Seconds the database has to answer a request's work (as long as a PostgreSQL store
waits for a connection before it gives up)."""

# Work cut off at its deadline, still ending (held so that it is not collected).
_CUT_OFF: set[asyncio.Future[Any]] = set()


class Target:
    """Runs RunControl calls on the loop the control belongs to, within a deadline."""

    __slots__ = ("_client", "control")

    def __init__(self, source: Engine | Client | RunControl) -> None:
        self._client: Client | None = None
        if isinstance(source, Engine):
            self.control = source.control
        elif isinstance(source, Client):
            self.control = source.control
            self._client = source
        elif isinstance(source, RunControl):
            self.control = source
        else:
            raise TypeError(
                f"cairn.dashboard.app() takes a cairn.Engine, cairn.Client or RunControl, "
                f"got {source!r}"
            )

    async def __call__(
        self, work: Callable[[RunControl], Awaitable[T]], *, deadline: float | None = None
    ) -> T:
        """The result of `work(control)`, awaited where the control lives.

        Raises:
            UnansweredError: It did not end within `deadline` seconds (default DEADLINE).
        """

        async def run() -> T:
            return await work(self.control)

        if self._client is None:
            return await within(run(), deadline)
        return await within(asyncio.wrap_future(self._client.submit(run())), deadline)


async def within(work: Awaitable[T], deadline: float | None = None) -> T:
    """`work`'s result, or UnansweredError once `deadline` (default DEADLINE) seconds pass.

    Work cut off is cancelled and left to end in the background: cancelling a query on a
    frozen connection waits until the store drops that connection, and a write waiting
    for SQLite's lock may still be made once the lock is free.
    """
    limit = DEADLINE if deadline is None else deadline
    future = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({future}, timeout=limit)
    finally:
        if not future.done():  # the deadline passed, or the caller went away
            future.cancel()
            _CUT_OFF.add(future)
            future.add_done_callback(_ended)
    if not done:
        raise UnansweredError(limit)
    return future.result()


def _ended(future: asyncio.Future[Any]) -> None:
    _CUT_OFF.discard(future)
    if not future.cancelled():
        future.exception()  # seen: the request has been answered already
