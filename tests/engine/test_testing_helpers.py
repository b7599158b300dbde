"""cairn.testing: TestEngine (virtual clock, crash injection, recovery) and replay()."""

from __future__ import annotations

import pytest

import cairn
from cairn.testing import TestEngine, replay

calls: dict[str, int] = {"fetch": 0, "ship": 0}


@cairn.step(name="testing.fetch")
async def fetch(order: str) -> str:
    calls["fetch"] += 1
    return f"{order}-fetched"


@cairn.step(name="testing.ship")
async def ship(order: str) -> str:
    calls["ship"] += 1
    return f"{order}-shipped"


@cairn.workflow(name="testing.order")
async def order_flow(order: str) -> list[str]:
    fetched = await fetch(order)
    await cairn.sleep("1h")
    return [fetched, await ship(order)]


@cairn.workflow(name="testing.order_changed")
async def order_changed(order: str) -> list[str]:
    return [await ship(order)]


@pytest.fixture(autouse=True)
def reset_calls() -> None:
    calls.update(fetch=0, ship=0)


async def test_advance__completes_a_sleep_of_an_hour_at_once() -> None:
    async with TestEngine() as env:
        run = await env.start(order_flow, "o-1")
        await env.settle()
        assert await run.status() == cairn.RunStatus.SLEEPING
        await env.advance("59m")
        assert await run.status() == cairn.RunStatus.SLEEPING
        await env.advance("1m")
        assert await run.result(timeout=5) == ["o-1-fetched", "o-1-shipped"]


async def test_crash_after_step__recover_does_not_repeat_the_step() -> None:
    async with TestEngine() as env:
        env.crash_after_step("testing.fetch")
        run = await env.start(order_flow, "o-2")
        await env.settle()
        assert await run.status() == cairn.RunStatus.RUNNING  # left by the "dead" engine
        await env.recover()
        await env.advance("1h")
        assert await run.result(timeout=5) == ["o-2-fetched", "o-2-shipped"]
    assert calls == {"fetch": 1, "ship": 1}


async def test_replay__matching_code_passes_and_changed_code_fails() -> None:
    async with TestEngine() as env:
        run = await env.start(order_flow, "o-3")
        await env.advance("1h")
        await run.result(timeout=5)
        history = await env.history(run.run_id)
    before = dict(calls)
    replay(history, order_flow)
    assert calls == before  # replay never calls step code
    with pytest.raises(cairn.NonDeterminismError, match=r"testing\.fetch#1"):
        replay(history, order_changed)


async def test_replay__stops_quietly_where_a_history_in_flight_ends() -> None:
    async with TestEngine() as env:
        run = await env.start(order_flow, "o-4")
        await env.settle()
        history = await env.history(run.run_id)
    replay(history, order_flow)
