"""The common run in one coroutine (core/common_runs.py), and where it falls to the full path.

A spy on the full path's parts (`executor.execute`, `returned`, `ended`) tells which code
ended each attempt: none of them for the common run; `ended` for code that raised, parked
or was cancelled; `returned` for a result that is not the plain case; `execute` for what
the fused path never takes (a sync workflow).
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

import cairn
from cairn.core import executor
from cairn.core.live_run import LiveRun
from cairn.core.live_steps import LiveSteps

from .kit import WAIT, Gate, Kit


@pytest.fixture
def full(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each part of the full path ran."""
    seen: Counter[str] = Counter()
    for name in ("execute", "returned", "ended"):
        real = getattr(executor, name)

        def spy(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            seen[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(executor, name, spy)
    return seen


@pytest.fixture
def cyclic_garbage() -> Iterator[list[object]]:
    """What only the collector would free, of what the test made (collector off meanwhile)."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield gc.garbage
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


async def until(engine: cairn.Engine, run_id: str, *statuses: str) -> None:
    async with asyncio.timeout(WAIT):
        while (await engine.control.record(run_id)).status not in statuses:
            await asyncio.sleep(0.005)


async def test_common_run__ends_in_one_frame_and_leaves_no_cyclic_garbage(
    kit: Kit, full: Counter[str], cyclic_garbage: list[object]
) -> None:
    @kit.step("common.add")
    async def add(value: int) -> int:
        return value + 1

    @kit.workflow("common.steps")
    async def steps(value: int) -> int:
        for _ in range(10):
            value = await add(value)
        return value

    async with kit.engine() as engine:
        runs = [await engine.start(steps, i) for i in range(5)]
        assert [await run.result(timeout=WAIT) for run in runs] == [10, 11, 12, 13, 14]
        gc.collect()
    assert full == {}
    assert not [o for o in cyclic_garbage if isinstance(o, LiveRun | LiveSteps)]


async def test_common_run__a_replay_runs_in_it_after_a_hand_back(
    kit: Kit, gate: Gate, full: Counter[str]
) -> None:
    calls: Counter[str] = Counter()

    @kit.step("common.first")
    async def first() -> str:
        calls["first"] += 1
        return "a"

    @kit.step("common.gated")
    async def gated() -> str:
        return await gate()

    @kit.workflow("common.replayed")
    async def replayed() -> str:
        return await first() + await gated()

    async with kit.engine() as engine:
        run = await engine.start(replayed)
        await gate.hold(engine)
    handed_back = dict(full)
    async with kit.engine() as engine:
        assert await (await engine.get(run.run_id)).result(timeout=WAIT) == "athrough"
    assert calls == {"first": 1}  # replayed, not run again
    assert full == handed_back  # the replay, claimed with its journal, ended in one frame


async def test_common_run__a_cancel_pending_at_its_claim_falls_to_the_full_path(
    kit: Kit, full: Counter[str]
) -> None:
    calls: Counter[str] = Counter()

    @kit.step("common.undo")
    async def undo() -> None:
        calls["undo"] += 1

    @kit.workflow("common.cancelled")
    async def cancelled() -> None:
        try:
            await cairn.sleep("1h")
        finally:
            await undo()

    async with kit.engine() as engine:
        run = await engine.start(cancelled)
        await until(engine, run.run_id, "SLEEPING")
        await engine.cancel(run.run_id)  # woken: claimed again with the cancel pending
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)
        history = await engine.history(run.run_id)
    assert calls == {"undo": 1}
    assert [h.kind for h in history] == ["sleep", "cancel", "step"]
    assert full == {"ended": 2}  # parked, then cancelled


async def test_common_run__a_failure_and_a_sleep_fall_to_the_full_path(
    kit: Kit, full: Counter[str]
) -> None:
    @kit.step("common.one")
    async def one() -> int:
        return 1

    @kit.workflow("common.fails")
    async def fails() -> None:
        await one()
        raise ValueError("no luck")

    @kit.workflow("common.sleeps")
    async def sleeps() -> int:
        await cairn.sleep(0.05)
        return await one() + 1

    async with kit.engine() as engine:
        failing = await engine.start(fails)
        with pytest.raises(cairn.RunFailed):
            await failing.result(timeout=WAIT)
        error = json.loads((await engine.control.record(failing.run_id)).error or "{}")
        assert (error["type"], error["message"]) == ("builtins.ValueError", "no luck")
        assert full == {"ended": 1}
        sleeping = await engine.start(sleeps)
        assert await sleeping.result(timeout=WAIT) == 2
    assert full == {"ended": 2}  # the sleep parked once; its wake-up ended in one frame


async def test_common_run__a_result_not_plain_or_a_sync_workflow_take_the_full_path(
    kit: Kit, full: Counter[str]
) -> None:
    @kit.workflow("common.big")
    async def big() -> str:
        return "x" * 100_000  # over the length surely stored inline: checked by the full path

    @kit.workflow("common.unstorable")
    async def unstorable() -> object:
        return object()

    @kit.workflow("common.sync")
    def sync() -> str:
        return "sync"

    async with kit.engine() as engine:
        assert len(await (await engine.start(big)).result(timeout=WAIT)) == 100_000
        assert full == {"returned": 1}
        with pytest.raises(cairn.RunFailed):
            await (await engine.start(unstorable)).result(timeout=WAIT)
        assert await (await engine.start(sync)).result(timeout=WAIT) == "sync"
    assert full == {"returned": 2, "ended": 1, "execute": 1}  # sync: _attempt's own end
