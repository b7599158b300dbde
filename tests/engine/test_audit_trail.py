"""What an operator saw stays: every execution's entries and attempts, where copies came
from, the step executing now, and attempts a dead worker left interrupted."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest

import cairn
from cairn.store.programs import workers
from cairn.testing import replay

from .kit import WAIT, Gate, Kit


async def _until(check: Any, what: str) -> Any:
    """Poll `check` (async) until it returns something truthy; database state, not time."""
    deadline = time.monotonic() + WAIT
    while not (found := await check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)
    return found


def _order(kit: Kit, calls: Counter[str], broken: dict[str, bool]) -> Any:
    @kit.step("reserve")
    def reserve(item: str) -> str:
        calls["reserve"] += 1
        return f"reserved {item}"

    @kit.step("charge", retries=cairn.Retry(max_attempts=2, delay=0))
    def charge(amount: int) -> str:
        calls["charge"] += 1
        if broken["charge"]:
            raise ConnectionError(f"payment gateway down (call {calls['charge']})")
        return f"charged {amount}"

    @kit.workflow("audit.order")
    async def order(item: str, amount: int) -> list[str]:
        return [await reserve(item), await charge(amount)]

    return order


async def test_retry__keeps_every_execution_in_the_history_and_attempts(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    broken = {"charge": True}
    order = _order(kit, calls, broken)

    async with kit.engine() as engine:
        run = await engine.start(order, "sku", 5, run_id="o-1")
        with pytest.raises(cairn.RunFailed):
            await run.result(timeout=WAIT)
        await engine.retry("o-1", by="ada")  # fails again: two more failed attempts
        with pytest.raises(cairn.RunFailed):
            await run.result(timeout=WAIT)
        broken["charge"] = False
        await engine.retry("o-1")
        assert await run.result(timeout=WAIT) == ["reserved sku", "charged 5"]
        history = await engine.history("o-1")
        attempts = await engine.control.attempts("o-1")
        summary = await run.describe()

    assert calls == {"reserve": 1, "charge": 5}
    assert [(h.execution, h.key, h.status, h.superseded, h.attempts) for h in history] == [
        (1, "reserve#1", "completed", False, 1),
        (1, "charge#1", "failed", True, 2),
        (2, "charge#1", "failed", True, 2),
        (3, "charge#1", "completed", False, 1),
    ]
    failures = [h.error for h in history if h.status == "failed"]
    assert all(e is not None and "payment gateway down" in e["traceback"] for e in failures)
    # Each execution numbers its attempts afresh; none is forgotten.
    assert [(a["execution"], a["attempt"], a["outcome"]) for a in attempts] == [
        (1, 1, "failed"),
        (1, 2, "failed"),
        (2, 1, "failed"),
        (2, 2, "failed"),
    ]
    assert [a["message"] for a in attempts] == [
        f"payment gateway down (call {n})" for n in (1, 2, 3, 4)
    ]
    assert all("ConnectionError" in a["traceback"] for a in attempts)
    assert [(e.number, e.cause, e.by, e.from_seq) for e in history.executions] == [
        (1, "start", None, 1),
        (2, "retry", "ada", 2),
        (3, "retry", None, 2),
    ]
    assert history.executions[1].started_at <= history.executions[2].started_at
    assert summary.execution == 3
    replay(history, order)  # what retries took out of the journal is not replayed


async def test_retry__a_failure_outside_a_step_starts_the_next_execution_after_it(
    kit: Kit,
) -> None:
    flaky = {"fail": True}

    @kit.step("load")
    def load() -> int:
        return 41

    @kit.step("save")
    def save(value: int) -> int:
        return value

    @kit.workflow("audit.outside")
    async def outside() -> int:
        value = await load()
        if flaky["fail"]:
            raise RuntimeError("bug in workflow code")
        return int(await save(value + 1))

    async with kit.engine() as engine:
        run = await engine.start(outside)
        with pytest.raises(cairn.RunFailed):
            await run.result(timeout=WAIT)
        flaky["fail"] = False
        await engine.retry(run.run_id, by="ops")
        assert await run.result(timeout=WAIT) == 42
        history = await engine.history(run.run_id)

    assert [(h.execution, h.key, h.superseded) for h in history] == [
        (1, "load#1", False),
        (2, "save#1", False),
    ]
    assert [(e.number, e.from_seq) for e in history.executions] == [(1, 1), (2, 2)]


async def test_retry__by_must_be_a_storable_name(kit: Kit) -> None:
    order = _order(kit, Counter(), {"charge": True})

    async with kit.engine() as engine:
        run = await engine.start(order, "sku", 1)
        with pytest.raises(cairn.RunFailed):
            await run.result(timeout=WAIT)
        with pytest.raises(cairn.InvalidName, match="by must be a non-empty string"):
            await engine.retry(run.run_id, by="")
        with pytest.raises(cairn.InvalidName, match="by"):
            await engine.restart(run.run_id, by="x\x00y")
        with pytest.raises(cairn.InvalidName, match="by"):
            await engine.fork(run.run_id, 1, by=7)  # type: ignore[arg-type]
        assert await run.status() == cairn.RunStatus.FAILED
        assert len(await engine.list_runs()) == 1


async def test_restart_and_fork__record_where_they_came_from_and_who_asked(kit: Kit) -> None:
    order = _order(kit, Counter(), {"charge": False})

    async with kit.engine() as engine:
        source = await engine.start(order, "sku", 3, run_id="src")
        await source.result(timeout=WAIT)
        restarted = await engine.restart("src", by="ada")
        forked = await engine.fork("src", 2, by="bob")
        await restarted.result(timeout=WAIT)
        await forked.result(timeout=WAIT)
        restarted_summary = await restarted.describe()
        forked_summary = await forked.describe()
        source_summary = await source.describe()
        restarted_history = await engine.history(restarted.run_id)
        forked_history = await engine.history(forked.run_id)
        copies = await engine.control.copies("src")

    assert (restarted_summary.restarted_from, restarted_summary.forked_from) == ("src", None)
    assert (forked_summary.forked_from, forked_summary.forked_from_seq) == ("src", 2)
    assert (source_summary.restarted_from, source_summary.forked_from) == (None, None)
    [first] = restarted_history.executions
    assert (first.number, first.cause, first.by) == (1, "restart", "ada")
    [first] = forked_history.executions
    assert (first.cause, first.by, first.from_seq) == ("fork", "bob", 2)
    assert [(c["run_id"], c["how"], c["from_seq"]) for c in copies] == [
        (restarted.run_id, "restart", None),
        (forked.run_id, "fork", 2),
    ]


async def test_executing__a_step_that_blocks_shows_with_its_attempt_and_worker(
    kit: Kit,
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    @kit.step("quick")
    async def quick() -> int:
        return 1

    @kit.step("slow", retries=cairn.Retry(max_attempts=3, delay=0))
    async def slow() -> str:
        if not entered.is_set():
            entered.set()
            raise ValueError("first attempt fails")
        await release.wait()
        return "done"

    @kit.workflow("audit.slow")
    async def flow() -> str:
        await quick()
        return str(await slow())

    async with kit.engine() as engine:
        run = await engine.start(flow)
        [step] = await _until(
            lambda: engine.control.executing(run.run_id), "the executing step to show"
        )
        record = await engine.control.record(run.run_id)
        release.set()
        assert await run.result(timeout=WAIT) == "done"
        after = await engine.control.executing(run.run_id)

    assert (step["key"], step["name"], step["attempt"], step["execution"]) == (
        "slow#1",
        "slow",
        2,
        1,
    )
    assert step["worker"] == record.owner and step["worker"]
    assert step["started_at"] is not None and step["heartbeat_at"] is not None
    assert after == []


async def test_takeover__a_step_in_flight_at_a_workers_death_is_an_interrupted_attempt(
    kit: Kit,
) -> None:
    calls: Counter[str] = Counter()
    release = asyncio.Event()

    @kit.step("long")
    async def long() -> str:
        calls["long"] += 1
        if calls["long"] == 1:
            await asyncio.Event().wait()  # the worker dies in here
        await release.wait()
        return "done"

    @kit.workflow("audit.long")
    async def flow() -> str:
        return str(await long())

    first = kit.engine()
    await first.open()
    try:
        run = await first.start(flow)
        [step] = await _until(lambda: first.control.executing(run.run_id), "the step in flight")
        dead = step["worker"]
    finally:
        await first._die()
    await first.store.write(workers.expire_workers([dead]))
    await first.store.close()

    async with kit.engine() as engine:
        release.set()
        assert await (await engine.get(run.run_id)).result(timeout=WAIT) == "done"
        attempts = await engine.control.attempts(run.run_id)
        history = await engine.history(run.run_id)

    assert calls == {"long": 2}
    [interrupted] = attempts
    assert (interrupted["key"], interrupted["attempt"], interrupted["outcome"]) == (
        "long#1",
        1,
        "interrupted",
    )
    assert interrupted["worker"] == dead
    assert interrupted["started_at"] == step["started_at"]
    [entry] = history
    assert (entry.key, entry.status, entry.attempts) == ("long#1", "completed", 2)


async def test_stop__a_step_a_clean_stop_cuts_short_is_an_interrupted_attempt(
    kit: Kit, gate: Gate
) -> None:
    @kit.step("gated")
    async def gated() -> str:
        return await gate()

    @kit.workflow("audit.gated")
    async def flow() -> str:
        return str(await gated())

    first = kit.engine()
    await first.open()
    run = await first.start(flow)
    assert first.worker is not None
    stopped = first.worker.env.owner
    await gate.hold(first)  # closes the engine mid-step: it hands the run back

    async with kit.engine() as engine:
        assert await (await engine.get(run.run_id)).result(timeout=WAIT) == "through"
        attempts = await engine.control.attempts(run.run_id)
        [entry] = await engine.history(run.run_id)

    [cut] = attempts
    assert (cut["key"], cut["attempt"], cut["outcome"], cut["worker"]) == (
        "gated#1",
        1,
        "interrupted",
        stopped,
    )
    assert "its engine was stopped" in cut["message"]
    assert (entry.status, entry.attempts, gate.calls) == ("completed", 2, 2)
