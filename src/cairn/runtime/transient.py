"""Transient runs (`@cairn.workflow(durable=False)`): the one engine, on a store kept in memory.

A transient run executes in the process that starts it, on a private engine whose store
is SQLite `:memory:` (what cairn.testing uses): the same replay, retries, sleeps and
timeouts as any run, with nothing written anywhere that outlives the process. What hands
a run to the database for later (queues, schedules, workers, a durable parent) refuses
one with TransientWorkflow. The engine builds its private engine (`Engine.memory_twin`,
runtime/engine.py); a transient workflow called outside any run executes as
runtime/direct_calls.py says.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from cairn.errors import TransientWorkflow
from cairn.runtime.transient_rules import NOT_FOR_WORKERS, refuse_queue

if TYPE_CHECKING:
    from cairn.authoring.definitions import WorkflowDef
    from cairn.runtime.handle import RunHandle


class MemoryEngine(Protocol):
    """What a private engine is asked (an `Engine` on SQLite `:memory:`)."""

    async def open(self) -> None:
        """Open its store (in memory) and start executing."""

    async def close(self) -> None:
        """Stop executing; its runs end with it."""

    async def start(self, workflow: Any, *args: Any, **options: Any) -> RunHandle:
        """Start a run of `workflow`; its handle."""


E = TypeVar("E", bound=MemoryEngine)


class PrivateEngine(Generic[E]):
    """Where one engine's transient runs execute: an engine of its own on SQLite `:memory:`.

    Opened at the first transient start and closed with its owner; it executes those runs
    and their children on its owner's clock, and declares no queues, schedules or
    event subscriptions of its own. `build` makes that engine (`Engine.memory_twin`);
    `workers` is the owner's count (0: the owner only stores runs, and refuses them).
    """

    def __init__(self, build: Callable[[], E], workers: int) -> None:
        self._build = build
        self._workers = workers
        self._engine: E | None = None
        self._lock = asyncio.Lock()

    @property
    def engine(self) -> E | None:
        """The private engine, or None before the first transient start."""
        return self._engine

    async def open(self) -> E:
        """The private engine, opened now if it is not yet."""
        async with self._lock:
            if self._engine is None:
                engine = self._build()
                await engine.open()
                self._engine = engine
            return self._engine

    async def start(self, defn: WorkflowDef[Any, Any], args: Any, options: Any) -> RunHandle:
        """Start a run of transient `defn` on the private engine; its handle."""
        if self._workers == 0:
            raise TransientWorkflow(defn.name, NOT_FOR_WORKERS)
        if options.get("queue") is not None:
            refuse_queue(defn, options["queue"])
        engine = await self.open()
        return await engine.start(defn, *args, **options)

    async def close(self) -> None:
        """Close the private engine; its runs end with it, unfinished ones included."""
        async with self._lock:
            engine, self._engine = self._engine, None
        if engine is not None:
            await engine.close()
