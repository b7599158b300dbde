"""Transient runs (`@cairn.workflow(durable=False)`): the one engine, on a store kept in memory.

A transient run executes in the process that starts it, on a private engine whose store
is SQLite `:memory:` (what cairn.testing uses): the same replay, retries, sleeps and
timeouts as any run, with nothing written anywhere that outlives the process. What hands
a run to the database for later (queues, schedules, workers, a durable parent) refuses
one with TransientWorkflow.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from cairn.authoring import workflow as authoring_workflow
from cairn.authoring.registry import Registry, default_registry
from cairn.authoring.workflow import WorkflowDef
from cairn.errors import InvalidArguments, TransientWorkflow
from cairn.runtime.transient_rules import NOT_FOR_WORKERS, refuse_queue

if TYPE_CHECKING:
    from cairn.clock import Clock
    from cairn.config import Resources
    from cairn.observability.tracing import Tracing
    from cairn.runtime.engine import Engine
    from cairn.runtime.handle import RunHandle

MEMORY_URL = "sqlite:///:memory:"


def memory_engine(
    registry: Registry,
    *,
    clock: Clock | None = None,
    workers: int = 100,
    serializer: str = "json",
    poll_interval: float = 0.5,
    tracing: Tracing | None = None,
    resources: Resources | None = None,
) -> Engine:
    """A new (not yet opened) engine for transient runs, on SQLite `:memory:`.

    `resources` are the owner engine's databases and tag provider (cairn.steps); without
    them the private engine reads its own from pyproject.toml, as any engine does.
    """
    from cairn.runtime.engine import Engine  # it imports this module

    return Engine(
        MEMORY_URL,
        workers=workers,
        serializer=serializer,
        registry=registry,
        clock=clock,
        poll_interval=poll_interval,
        tracing=tracing or False,
        ephemeral=True,
        databases=None if resources is None else resources.databases,
        tags=None if resources is None else resources.tags,
    )


class PrivateEngine:
    """Where one engine's transient runs execute: an engine of its own on SQLite `:memory:`.

    Opened at the first transient start and closed with its owner; it executes those runs
    and their children on its owner's clock, and declares no queues, schedules or
    event subscriptions of its own.
    """

    def __init__(self, owner: Engine) -> None:
        self._owner = owner
        self._engine: Engine | None = None
        self._lock = asyncio.Lock()

    @property
    def engine(self) -> Engine | None:
        """The private engine, or None before the first transient start."""
        return self._engine

    async def open(self) -> Engine:
        """The private engine, opened now if it is not yet."""
        async with self._lock:
            if self._engine is None:
                owner = self._owner
                engine = memory_engine(
                    owner.registry,
                    clock=owner.clock,
                    workers=owner.workers,
                    serializer=owner.serializer_name,
                    poll_interval=owner.poll_interval,
                    tracing=owner.tracing,
                    resources=owner.resources,
                )
                await engine.open()
                self._engine = engine
            return self._engine

    async def start(self, defn: WorkflowDef[Any, Any], args: Any, options: Any) -> RunHandle:
        """Start a run of transient `defn` on the private engine; its handle."""
        if self._owner.workers == 0:
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


@functools.cache
def start_options() -> frozenset[str]:
    """The keywords engine.start() keeps for itself (run_id, queue, delay, ...)."""
    from cairn.runtime.control import RunControl  # it imports this module

    return frozenset(
        name
        for name, param in inspect.signature(RunControl.start).parameters.items()
        if param.kind is inspect.Parameter.KEYWORD_ONLY
    )


def registry_for(defn: WorkflowDef[Any, Any]) -> Registry:
    """The registry a direct call runs with: the decorators' own, if `defn` is in it."""
    if default_registry.workflows.get(defn.name) is defn:
        return default_registry
    registry = Registry()
    registry.add_workflow(defn)
    return registry


async def run_now(
    defn: WorkflowDef[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """Run transient `defn` now on an engine of its own, in memory; its result.

    Raises:
        RunFailed: the run ended FAILED (its error's type and message attached).
        RunCancelled: the run was cancelled.
        TypeError: a keyword argument engine.start keeps for itself.
    """
    clash = sorted(start_options() & kwargs.keys())
    if clash:
        raise InvalidArguments(
            f"keyword {clash[0]!r} of a direct call of workflow {defn.name!r} is an "
            "engine.start option; start it with engine.start(..., **options) instead"
        )
    async with memory_engine(registry_for(defn)) as engine:
        handle = await engine.start(defn, *args, **kwargs)
        return await handle.result()


def call(defn: WorkflowDef[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A transient workflow called outside a run: an awaitable of its result, or the result.

    An async workflow gives an awaitable, as calling the function would. A sync one
    returns the result: its run executes on an event loop of its own in a thread of its
    own (the calling thread may be running a loop already), and the caller waits.
    """
    if defn.is_async:
        return run_now(defn, args, kwargs)
    with ThreadPoolExecutor(1, "cairn-transient") as pool:
        return pool.submit(asyncio.run, run_now(defn, args, kwargs)).result()


authoring_workflow.install_transient_runner(call)
