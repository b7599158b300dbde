"""A transient workflow called outside any run (`await quick(...)`): a run on an engine of its own.

`WorkflowDef` (authoring/definitions.py) cannot import the runtime, so it holds a runner
that the runtime installs: `install()`, called once where the runtime package is imported
(cairn/runtime/__init__.py). The run executes on a new engine on SQLite `:memory:`
(`memory_engine`, also what `cairn run` runs a transient workflow on) and the call
returns its result.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cairn.authoring.definitions import WorkflowDef, install_transient_runner
from cairn.authoring.registry import Registry, default_registry
from cairn.errors import InvalidArguments
from cairn.runtime.control import RunControl
from cairn.runtime.engine import MEMORY_URL, Engine


def memory_engine(registry: Registry, *, workers: int = 100) -> Engine:
    """A new (not yet opened) engine for transient runs, on SQLite `:memory:`.

    It reads its resources (cairn.steps' databases and tags) from pyproject.toml, as any
    engine does; an engine's own transient runs use its `memory_twin` instead.
    """
    return Engine(MEMORY_URL, workers=workers, registry=registry, ephemeral=True)


@functools.cache
def start_options() -> frozenset[str]:
    """The keywords engine.start() keeps for itself (run_id, queue, delay, ...)."""
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


def install() -> None:
    """Make a transient workflow called outside a run execute here, by `call`."""
    install_transient_runner(call)
