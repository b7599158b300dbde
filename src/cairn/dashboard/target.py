"""What the dashboard drives: the RunControl of an Engine, a Client or a RunControl itself.

A Client's RunControl lives on the Client's own event-loop thread, so its calls are sent
there; an Engine's or a bare RunControl's run on the loop that serves the app.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from cairn.client import Client
from cairn.runtime.control import RunControl
from cairn.runtime.engine import Engine

T = TypeVar("T")


class Target:
    """Runs RunControl calls on the loop the control belongs to."""

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

    async def __call__(self, work: Callable[[RunControl], Awaitable[T]]) -> T:
        """The result of `work(control)`, awaited where the control lives."""
        if self._client is None:
            return await work(self.control)

        async def run() -> T:
            return await work(self.control)

        return await asyncio.wrap_future(self._client.submit(run()))
