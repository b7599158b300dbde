"""Engine-test helpers: a private registry per test, engines on the test's store, gates.

Also what the blob store tests share: a run seen waiting for the blob store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import cairn
from cairn.authoring.definitions import StepDef, WorkflowDef
from cairn.authoring.step import make_step
from cairn.authoring.workflow import make_workflow
from cairn.blobs import reference

WAIT = 10.0  # generous deadline for anything a test awaits; runs finish in milliseconds


class Kit:
    """Workflows and steps declared in a registry of their own, and engines that use it.

    Two kits on one URL (`kit.fresh()`) model two deployments of different code against
    one database: the way to make a replay meet changed code.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.registry = cairn.Registry()

    def fresh(self) -> Kit:
        """A kit with an empty registry on the same database."""
        return Kit(self.url)

    def workflow(
        self, name: str | None = None, **options: Any
    ) -> Callable[[Callable[..., Any]], WorkflowDef[..., Any]]:
        """Like `@cairn.workflow`, registering in this kit's registry."""

        def decorate(fn: Callable[..., Any]) -> WorkflowDef[..., Any]:
            return make_workflow(fn, name=name, reg=self.registry, **options)

        return decorate

    def step(
        self,
        name: str | None = None,
        *,
        retries: Any = None,
        timeout: Any = None,
        keep_input: bool = True,
        queue: str | None = None,
    ) -> Callable[[Callable[..., Any]], StepDef[..., Any]]:
        """Like `@cairn.step`, registering in this kit's registry."""

        def decorate(fn: Callable[..., Any]) -> StepDef[..., Any]:
            return make_step(
                fn, name, retries, timeout, self.registry, keep_input=keep_input, queue=queue
            )

        return decorate

    def engine(self, **options: Any) -> cairn.Engine:
        """An engine (not yet opened) on this kit's database and registry."""
        options.setdefault("poll_interval", 0.05)
        return cairn.Engine(self.url, registry=self.registry, **options)


class Gate:
    """The body of a step that holds the first engine inside it until that engine closes.

    Closing an engine hands its in-flight runs back to the database; the next engine
    replays them. Once `opened`, the gate lets calls through, so the replay can finish.
    """

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.opened = False
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if not self.opened:
            self.entered.set()
            await asyncio.Event().wait()  # cancelled by the closing engine
        return "through"

    async def hold(self, engine: cairn.Engine) -> None:
        """Wait until a run is inside the gate, close `engine`, then open the gate."""
        async with asyncio.timeout(WAIT):
            await self.entered.wait()
        await engine.close()
        self.opened = True


async def waits_for_the_blob_store(eng: cairn.Engine, run_id: str) -> str:
    """What the run says it waits for, once it waits for the blob store to give back a value.

    It has not failed meanwhile, and after a few more tries it still waits (RUNNING).
    """
    async with asyncio.timeout(WAIT):
        while True:
            record = await eng.control.record(run_id)
            assert record.status in ("WAITING", "PENDING", "RUNNING"), record.error
            if (record.waiting_for or "").startswith(reference.WAITING + reference.READING):
                break
            await asyncio.sleep(0.02)
    await asyncio.sleep(0.3)  # a few more tries: still waiting, not failed
    record = await eng.control.record(run_id)
    assert record.status == "RUNNING", record.error
    return str(record.waiting_for)
