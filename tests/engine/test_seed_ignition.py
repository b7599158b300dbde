"""Coming from Ignition's exchange.workflows (seed 002): its workflows with the imports changed.

A plain `def` workflow calls `getWorkflows()` for its runtime, checks for a cancellation
and reports progress every loop, sleeps with `sleep_chunked`, and takes operator commands
with `recvCommand`; on both stores, through cairn's own primitives.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

import cairn
from cairn.compat.ignition import STATE_COLUMN, getWorkflows, step, workflow
from cairn.steps.sleep import sleep_chunked

from .kit import WAIT, Kit
from .seeds import until


async def test_ignition__the_minimal_workflow_as_written(kit: Kit) -> None:
    @workflow(name="demo.small")
    def demo_small(duration_s: float = 10) -> dict[str, bool]:
        rt = getWorkflows()
        loops = int(duration_s * 2)
        for i in range(loops):
            rt.checkCancelled()
            rt.progress(f"loop {i + 1}/{loops}")
            sleep_chunked(total_ms=50, chunk_ms=25)
        return {"ok": True}

    kit.registry.add_workflow(demo_small)

    async with kit.engine() as engine:
        run = await engine.start(demo_small, 1.5)
        assert await run.result(timeout=WAIT) == {"ok": True}
        summary = await run.describe()
        keys = [h.key for h in await engine.history(run.run_id)]
    assert summary.progress is not None and summary.progress["message"] == "loop 3/3"
    assert keys == ["sleep_chunked#1", "sleep_chunked#2", "sleep_chunked#3"]


async def test_ignition__check_cancelled_raises_in_a_cancelled_run(kit: Kit) -> None:
    cancelled = threading.Event()
    raised: list[str] = []

    @workflow(name="demo.cancellable")
    def cancellable() -> str:
        rt = getWorkflows()
        rt.progress("waiting for the operator")
        cancelled.wait(WAIT)
        try:
            rt.checkCancelled()
        except cairn.Cancelled:
            raised.append("Cancelled")
            raise
        return "not cancelled"

    kit.registry.add_workflow(cancellable)

    async with kit.engine() as engine:
        run = await engine.start(cancellable)
        await until(engine, run.run_id, "RUNNING")
        await engine.cancel(run.run_id)
        cancelled.set()
        record = await until(engine, run.run_id, "CANCELLED")
    assert (record.status, raised) == ("CANCELLED", ["Cancelled"])


async def test_ignition__mailbox_pattern_takes_commands_in_order(kit: Kit) -> None:
    sent = threading.Event()

    @step(name="demo.act", options={"retries_allowed": True, "max_attempts": 3})
    def act(command: str) -> str:
        return command.lower()

    @workflow(name="demo.mailbox")
    def operated() -> list[Any]:
        rt = getWorkflows()
        sent.wait(WAIT)  # all three commands are queued before the first receive
        state, seen = "RUNNING", list[Any]()
        for _ in range(200):
            rt.checkCancelled()
            cmd = rt.recvCommand(currentState=state, topic="cmd", timeoutSeconds=0.2, maxMessages=8)
            if cmd and cmd.get("cmd") == "HOLD":
                state = "HELD"
            if cmd and cmd.get("cmd") == "STOP":
                return seen
            if cmd:
                seen.append(act(cmd["cmd"]))
        return ["never stopped", *seen]

    kit.registry.add_workflow(operated)

    async with kit.engine() as engine:
        run = await engine.start(operated, run_id="mailbox-1")
        for command in ("HOLD", "RESUME", "STOP"):
            await engine.send_event("mailbox-1", "cmd", {"cmd": command})
        sent.set()
        assert await run.result(timeout=WAIT) == ["hold", "resume"]
        summary = await run.describe()
        history = await engine.history("mailbox-1")
    # One receive took all three (maxMessages=8); the next calls returned the kept ones.
    # The run's state column says what it last reported.
    assert [[m["cmd"] for m in h.result] for h in history if h.kind == "receive"] == [
        ["HOLD", "RESUME", "STOP"]
    ]
    assert summary.columns[STATE_COLUMN] == "HELD"


async def test_ignition__recv_command_returns_none_when_nothing_came(kit: Kit) -> None:
    @workflow(name="demo.idle")
    def idle() -> list[Any]:
        rt = getWorkflows()
        return [rt.recvCommand(currentState="IDLE", topic="cmd", timeoutSeconds=0)]

    kit.registry.add_workflow(idle)

    async with kit.engine() as engine:
        run = await engine.start(idle)
        assert await run.result(timeout=WAIT) == [None]
        assert (await run.describe()).columns == {STATE_COLUMN: "IDLE"}


def test_ignition__get_workflows_outside_a_run_is_refused() -> None:
    with pytest.raises(cairn.NotInRun, match=r"getWorkflows\(\) only works inside a running"):
        getWorkflows()


async def test_ignition__the_minimal_workflow_with_its_own_sleeps(kit: Kit) -> None:
    # The page's shape as it stands: a default duration, %-formatted progress, and half a
    # second of chunked sleep per loop (two loops here: about a second of real time).
    @workflow(name="demo.small_default")
    def small(duration_s: float = 10) -> dict[str, bool]:
        rt = getWorkflows()
        loops = int(duration_s * 2)
        for i in range(loops):
            rt.checkCancelled()
            rt.progress("loop %s/%s" % (i + 1, loops))  # noqa: UP031 - the page's spelling
            sleep_chunked(total_ms=500, chunk_ms=250)
        return {"ok": True}

    kit.registry.add_workflow(small)

    async with kit.engine() as engine:
        run = await engine.start(small, duration_s=1)
        assert await run.result(timeout=WAIT) == {"ok": True}
        summary = await run.describe()
        history = await engine.history(run.run_id)
    assert summary.progress is not None and summary.progress["message"] == "loop 2/2"
    assert [h.input for h in history] == [{"args": [500, 250], "kwargs": {}}] * 2
