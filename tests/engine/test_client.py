"""cairn.Client: the synchronous surface, used from plain threads like a web app would."""

from __future__ import annotations

import asyncio

import pytest

import cairn


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
