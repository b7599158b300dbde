"""A parent's cancellation reaching its children in every state a child can be in."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

import cairn
from cairn.store.programs import runs as run_ops
from cairn.store.records import RunRecord

from .kit import WAIT, Kit


async def until(engine: cairn.Engine, run_id: str, *statuses: str) -> RunRecord:
    """The stored run once its status is one of `statuses` (polled; fails after WAIT)."""
    async with asyncio.timeout(WAIT):
        while True:
            run = await engine.store.read(run_ops.get_run(run_id))
            if run is not None and run.status in statuses:
                return run
            await asyncio.sleep(0.005)


async def test_cancel_parent__a_child_no_worker_has_started_ends_cancelled_at_once(
    kit: Kit,
) -> None:
    # The child waits on a queue no worker serves (or one at its limit): it has run no
    # code, so, like a queued run cancelled directly, it ends at once, not when a worker
    # of its queue comes to take it.
    calls: Counter[str] = Counter()

    @kit.workflow("cascade.later", queue="later")
    async def later() -> str:
        calls["later"] += 1
        return "ran"

    @kit.workflow("cascade.parent", queue="main")
    async def parent() -> Any:
        return await later()

    async with kit.engine(queues=["main"]) as engine:
        run = await engine.start(parent, run_id="p")
        await until(engine, "p", "WAITING")
        await until(engine, "p/cascade.later#1", "PENDING")
        await run.cancel()
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)
        child = await until(engine, "p/cascade.later#1", "CANCELLED", "PENDING")
        assert child.status == "CANCELLED"
        assert child.finished_at is not None
        with pytest.raises(cairn.RunCancelled):
            await (await engine.get("p/cascade.later#1")).result(timeout=WAIT)
    assert calls == {}
