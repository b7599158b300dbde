"""NonDeterminismError end to end: code changed under a run fails it; retry after the fix.

Two kits on one database stand for two deployments: the run starts under one registry and
replays under another that registers different code under the same workflow name.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

import cairn
from cairn.store.records import RunRecord

from .kit import WAIT, Kit


async def until(engine: cairn.Engine, run_id: str, *statuses: str) -> RunRecord:
    """The stored run once its status is one of `statuses` (polled; fails after WAIT)."""
    async with asyncio.timeout(WAIT):
        while True:
            run = await engine.control.record(run_id)
            if run.status in statuses:
                return run
            await asyncio.sleep(0.005)


def _deploy(kit: Kit, calls: Counter[str], version: str) -> None:
    """Register "nd.order" as it is in `version` of the code."""

    @kit.step("reserve")
    def reserve() -> str:
        calls[f"reserve {version}"] += 1
        return "reserved"

    @kit.step("charge")
    def charge() -> str:
        calls[f"charge {version}"] += 1
        return "charged"

    @kit.step("audit")
    def audit() -> str:
        calls[f"audit {version}"] += 1
        return "audited"

    @kit.workflow("nd.order")
    async def order() -> list[Any]:
        done = [await reserve()]
        if version == "v2":
            done.append(await audit())  # inserted before a step runs already took
        else:
            done.append(await charge())
        done.append(await cairn.wait_for_event("shipped"))
        return done


async def test_nondeterminism__changed_code_fails_the_run_and_retry_resumes_it(
    kit: Kit,
) -> None:
    calls: Counter[str] = Counter()
    v1, v2, fixed = kit, kit.fresh(), kit.fresh()
    _deploy(v1, calls, "v1")
    _deploy(v2, calls, "v2")
    _deploy(fixed, calls, "v1")

    async with v1.engine() as engine:
        run = await engine.start("nd.order", run_id="nd-1")
        await until(engine, run.run_id, "WAITING")
    async with v2.engine() as engine:  # the new deployment replays the run on its event
        await engine.send_event("nd-1", "shipped", "box 7")
        with pytest.raises(cairn.RunFailed) as info:
            await (await engine.get("nd-1")).result(timeout=WAIT)
        [summary] = await engine.list_runs(status="FAILED")
    error = info.value
    assert error.error_type == "cairn.errors.NonDeterminismError"
    assert "'audit#1'" in error.error_message  # what the code met
    assert "'charge#1'" in error.error_message  # what the history expected
    assert "seq 2" in error.error_message
    assert summary.error is not None and "'charge#1'" in summary.error["message"]
    assert calls == {"reserve v1": 1, "charge v1": 1}  # v2 ran nothing new

    async with fixed.engine() as engine:  # the fix is deployed: retry continues the run
        handle = await engine.retry("nd-1")
        assert await handle.result(timeout=WAIT) == ["reserved", "charged", "box 7"]
        history = await engine.history("nd-1")
    assert calls == {"reserve v1": 1, "charge v1": 1}
    assert [(h.key, h.status) for h in history] == [
        ("reserve#1", "completed"),
        ("charge#1", "completed"),
        ("~event:shipped#1", "completed"),
    ]


async def test_nondeterminism__returning_early_with_history_left(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    shortened = kit.fresh()
    _deploy(kit, calls, "v1")

    @shortened.workflow("nd.order")
    async def order() -> str:
        return "nothing to do"

    async with kit.engine() as engine:
        run = await engine.start("nd.order", run_id="nd-2")
        await until(engine, run.run_id, "WAITING")
    async with shortened.engine() as engine:
        await engine.send_event("nd-2", "shipped", "box")
        with pytest.raises(cairn.RunFailed) as info:
            await (await engine.get("nd-2")).result(timeout=WAIT)
    assert info.value.error_type == "cairn.errors.NonDeterminismError"
    assert "returned" in info.value.error_message
    assert "'reserve#1'" in info.value.error_message


async def test_nondeterminism__new_kind_of_operation_at_a_recorded_place(kit: Kit) -> None:
    changed = kit.fresh()

    @kit.workflow("nd.kinds")
    async def first() -> Any:
        await cairn.sleep("1ms")
        return await cairn.wait_for_event("go")

    @changed.workflow("nd.kinds")
    async def second() -> Any:
        await cairn.wait_for_event("something else")
        return await cairn.wait_for_event("go")

    async with kit.engine() as engine:
        run = await engine.start("nd.kinds", run_id="nd-3")
        await until(engine, run.run_id, "WAITING")
    async with changed.engine() as engine:
        await engine.send_event("nd-3", "go", 1)
        with pytest.raises(cairn.RunFailed) as info:
            await (await engine.get("nd-3")).result(timeout=WAIT)
    message = info.value.error_message
    assert info.value.error_type == "cairn.errors.NonDeterminismError"
    assert "something else" in message and "~sleep#1" in message


async def test_nondeterminism__adding_steps_after_the_recorded_ones_is_safe(kit: Kit) -> None:
    extended = kit.fresh()
    calls: Counter[str] = Counter()
    _deploy(kit, calls, "v1")

    @extended.step("reserve")
    def reserve() -> str:
        return "reserved"

    @extended.step("charge")
    def charge() -> str:
        return "charged"

    @extended.step("notify")
    def notify() -> str:
        calls["notify"] += 1
        return "notified"

    @extended.workflow("nd.order")
    async def order() -> list[Any]:
        done = [await reserve(), await charge(), await cairn.wait_for_event("shipped")]
        return [*done, await notify()]

    async with kit.engine() as engine:
        run = await engine.start("nd.order", run_id="nd-4")
        await until(engine, run.run_id, "WAITING")
    async with extended.engine() as engine:
        await engine.send_event("nd-4", "shipped", "box")
        result = await (await engine.get("nd-4")).result(timeout=WAIT)
    assert result == ["reserved", "charged", "box", "notified"]
    assert calls == {"reserve v1": 1, "charge v1": 1, "notify": 1}
