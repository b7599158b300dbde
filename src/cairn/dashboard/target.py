"""What the dashboard drives: the RunControl of an Engine, a Client or a RunControl itself.

A Client's RunControl lives on the Client's own event-loop thread, so its calls are sent
there; an Engine's or a bare RunControl's run on the loop that serves the app. Every call
has a deadline: a database that does not answer (a write lock held by another process,
a frozen connection) costs a request DEADLINE seconds and a 503, never a request that
hangs for as long as the database does; the 503 says whether the change asked for was
withdrawn (nothing was changed) or may still be made (`within`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from cairn.client import Client
from cairn.dashboard.api.replies import UnansweredError
from cairn.runtime.control import RunControl
from cairn.runtime.engine import Engine
from cairn.store import write_tally

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
        tally = write_tally.Tally()
        run = counted(lambda: work(self.control), tally)
        if self._client is None:
            return await within(run, deadline, tally)
        return await within(asyncio.wrap_future(self._client.submit(run)), deadline, tally)


async def counted(work: Callable[[], Awaitable[T]], tally: write_tally.Tally) -> T:
    """`work()`, its writes counted in `tally` (set in the task that runs it: its own context)."""
    with write_tally.kept(tally):
        return await work()  # called here: on the loop of the task that awaits it


async def within(
    work: Awaitable[T], deadline: float | None = None, tally: write_tally.Tally | None = None
) -> T:
    """`work`'s result, or UnansweredError once `deadline` (default DEADLINE) seconds pass.

    Work cut off is cancelled. A write of it still waiting for SQLite's lock is withdrawn
    then (store/write_tally.py): once the work has ended within GRACE seconds with every
    write it asked for withdrawn (or none asked for), the error says nothing was changed.
    A PostgreSQL transaction cut off before its COMMIT was sent is withdrawn too, and so
    is a write of PostgreSQL's group commit not sent yet (store/postgres/group_commit).
    Otherwise (a COMMIT, or a lone statement, sent on a PostgreSQL connection that hangs:
    made or not once it answers) it says the change may still be made. The work is left
    to end in the background: cancelling a query on a frozen connection waits until the
    store drops it.
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
        raise UnansweredError(limit, unchanged=await _unchanged(tally))
    return future.result()


GRACE = 1.0
"""Seconds work cut off has to end (and say what its writes became) before the 503."""


async def _unchanged(tally: write_tally.Tally | None) -> bool:
    """True if the work cut off made no write and will make none; False if not known.

    Cancelled, the work asks for no write more: one it asked for was withdrawn (SQLite,
    at the work's next step) or was sent and may be made. Work still stuck after GRACE
    (a read or a write on a frozen connection) is judged by what it asked for until then.
    """
    if tally is None:
        return False
    loop = asyncio.get_running_loop()
    until = loop.time() + GRACE
    while not tally.ended and loop.time() < until:
        await asyncio.sleep(0.01)  # a cancelled task ends at its next step: a moment
    return tally.unchanged


def _ended(future: asyncio.Future[Any]) -> None:
    _CUT_OFF.discard(future)
    if not future.cancelled():
        future.exception()  # seen: the request has been answered already
