"""cairn.Client: the synchronous surface, used from plain threads like a web app would."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from tests.engine.intercept import intercept

import cairn
from cairn.store.programs import workers

from .kit import Kit


@cairn.workflow(name="client.approve")
async def approve(order: str) -> dict[str, object]:
    decision = await cairn.wait_for_event("decision", timeout="30s")
    values = await cairn.human_task("check", title=f"Check {order}", form={"type": "object"})
    return {"decision": decision, "values": values}


@cairn.workflow(name="client.forever")
async def forever() -> None:
    await cairn.wait_for_event("never")


async def _until(predicate: object, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await asyncio.to_thread(predicate):  # type: ignore[arg-type]
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def test_client__starts_signals_submits_and_waits(engine: cairn.Engine) -> None:
    client = await asyncio.to_thread(cairn.Client, engine.url)
    try:
        handle = await asyncio.to_thread(client.start, approve, "o-1")
        await asyncio.to_thread(handle.send_event, "decision", {"ok": True})
        await _until(lambda: bool(client.tasks.list()))
        task = (await asyncio.to_thread(client.tasks.list))[0]
        await asyncio.to_thread(client.tasks.submit, task.task_id, {"n": 1}, by="ann")
        result = await asyncio.to_thread(handle.result, 10)
        assert result == {"decision": {"ok": True}, "values": {"n": 1}}
        assert (await asyncio.to_thread(client.tasks.get, task.task_id)).submitted_by == "ann"
    finally:
        await asyncio.to_thread(client.close)


async def test_client__cancels_a_waiting_run(engine: cairn.Engine) -> None:
    client = await asyncio.to_thread(cairn.Client, engine.url)
    try:
        handle = await asyncio.to_thread(client.start, forever)
        await _until(lambda: handle.status() == cairn.RunStatus.WAITING)
        await asyncio.to_thread(handle.cancel)
        with pytest.raises(cairn.RunCancelled):
            await asyncio.to_thread(handle.result, 10)
    finally:
        await asyncio.to_thread(client.close)


async def test_client__warns_when_no_live_worker_executes_the_workflow_named(
    engine: cairn.Engine, caplog: pytest.LogCaptureFixture
) -> None:
    # A name no live worker knows (here unqualified: the workflow is `client.approve`)
    # is refused; queued anyway, it is reported rather than left PENDING in silence.
    client = await asyncio.to_thread(cairn.Client, engine.url, registry=cairn.Registry())
    try:
        with pytest.raises(cairn.UnknownWorkflow, match=r"did you mean 'client\.approve'"):
            await asyncio.to_thread(client.start, "approve", "o-9")
        with caplog.at_level(logging.WARNING, logger="cairn.control"):
            unknown = await asyncio.to_thread(client.start, "approve", "o-9", allow_unknown=True)
            await asyncio.to_thread(client.start, "client.approve", "o-10")
            await asyncio.to_thread(client.start, approve, "o-11")
    finally:
        await asyncio.to_thread(client.close)

    warnings = [record.getMessage() for record in caplog.records if record.name == "cairn.control"]
    assert len(warnings) == 1
    assert unknown.run_id in warnings[0]
    assert "'approve'" in warnings[0]
    assert "client.approve" in warnings[0]  # what the live workers do know


async def test_start__by_name_with_no_live_worker_says_nothing(
    kit: Kit, caplog: pytest.LogCaptureFixture
) -> None:
    # Queuing runs for workers that start later is normal.
    async with kit.engine(workers=0) as queuer:
        with caplog.at_level(logging.WARNING, logger="cairn.control"):
            run = await queuer.start("later.workflow", allow_unknown=True)
        assert await run.status() == cairn.RunStatus.PENDING
    assert not [record for record in caplog.records if record.name == "cairn.control"]


async def test_start__by_name_looks_at_the_workers_once_for_a_burst_of_starts(
    kit: Kit, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Starting by name is a Client's everyday path: one read of the workers serves a
    # burst of starts (a few seconds), not one read each.
    @kit.workflow("known.flow")
    async def known() -> None:
        return None

    async with kit.engine(), kit.engine(workers=0) as queuer:
        reads = 0

        async def counted() -> list[Any]:
            nonlocal reads
            reads += 1
            return await list_workers()

        list_workers, _ = intercept(queuer.store, workers.list_workers, counted, via="read")
        with caplog.at_level(logging.WARNING, logger="cairn.control"):
            for _ in range(3):
                await queuer.start("unknown.flow", allow_unknown=True)

    warnings = [record for record in caplog.records if record.name == "cairn.control"]
    assert len(warnings) == 3
    assert reads == 1
