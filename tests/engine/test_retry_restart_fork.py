"""retry (from the failed step), restart (same input, new run), fork (reuse steps before SEQ)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import cairn

from .kit import WAIT, Kit


def _declare(kit: Kit, calls: Counter[str], broken: dict[str, bool]) -> Any:
    @kit.step("reserve")
    def reserve(item: str) -> str:
        calls["reserve"] += 1
        return f"reserved {item}"

    @kit.step("charge", retries=1)
    def charge(amount: int) -> str:
        calls["charge"] += 1
        if broken["charge"]:
            raise ConnectionError("payment gateway down")
        return f"charged {amount}"

    @kit.step("ship")
    def ship(item: str) -> str:
        calls["ship"] += 1
        return f"shipped {item}"

    @kit.workflow("rrf.order")
    async def order(item: str, amount: int) -> list[str]:
        calls["workflow"] += 1
        return [await reserve(item), await charge(amount), await ship(item)]

    return order


async def test_retry__failed_run_continues_from_the_failed_step(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    broken = {"charge": True}
    order = _declare(kit, calls, broken)

    async with kit.engine() as engine:
        run = await engine.start(order, "sku", 5, run_id="o-1")
        with pytest.raises(cairn.RunFailed, match="payment gateway down"):
            await run.result(timeout=WAIT)
        assert calls == {"workflow": 1, "reserve": 1, "charge": 1}
        broken["charge"] = False  # the outage is over
        again = await engine.retry("o-1")
        assert again == run
        assert await again.result(timeout=WAIT) == ["reserved sku", "charged 5", "shipped sku"]
        history = await engine.history("o-1")
        attempts = await engine.control.attempts("o-1")
        stored = await engine.control.record("o-1")
    assert calls == {"workflow": 2, "reserve": 1, "charge": 2, "ship": 1}
    # The failure the retry ran again stays in the history, as does its attempt.
    assert [(h.key, h.status) for h in history] == [
        ("reserve#1", "completed"),
        ("charge#1", "failed"),
        ("charge#1", "completed"),
        ("ship#1", "completed"),
    ]
    assert "payment gateway down" in history[1].error["message"]
    assert [(a["key"], a["attempt"], a["message"]) for a in attempts] == [
        ("charge#1", 1, "payment gateway down")
    ]
    assert (stored.status, stored.error, stored.attempt) == ("COMPLETED", None, 2)


async def test_retry__failure_outside_a_step_replays_every_step(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    flaky = {"fail": True}

    @kit.step("load")
    def load() -> int:
        calls["load"] += 1
        return 41

    @kit.workflow("rrf.outside")
    async def outside() -> int:
        value = await load()
        if flaky["fail"]:
            raise RuntimeError("bug in workflow code")
        return int(value) + 1

    async with kit.engine() as engine:
        run = await engine.start(outside)
        with pytest.raises(cairn.RunFailed, match="bug in workflow code"):
            await run.result(timeout=WAIT)
        flaky["fail"] = False  # the fix is deployed
        await engine.retry(run.run_id)
        assert await run.result(timeout=WAIT) == 42
    assert calls == {"load": 1}


async def test_retry__only_failed_runs(kit: Kit) -> None:
    order = _declare(kit, Counter(), {"charge": False})

    async with kit.engine() as engine:
        run = await engine.start(order, "sku", 1)
        await run.result(timeout=WAIT)
        with pytest.raises(cairn.RunFinished, match="COMPLETED"):
            await engine.retry(run.run_id)
        with pytest.raises(cairn.RunNotFound):
            await engine.retry("nobody")


async def test_restart__new_run_with_the_same_input(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    broken = {"charge": True}
    order = _declare(kit, calls, broken)

    async with kit.engine() as engine:
        run = await engine.start(order, "sku", 7, run_id="o-2")
        with pytest.raises(cairn.RunFailed):
            await run.result(timeout=WAIT)
        broken["charge"] = False
        fresh = await engine.restart("o-2")
        assert fresh.run_id != "o-2"
        assert await fresh.result(timeout=WAIT) == ["reserved sku", "charged 7", "shipped sku"]
        assert await run.status() == cairn.RunStatus.FAILED  # the original is unchanged
        done = await engine.restart(fresh.run_id)  # a completed run restarts too
        assert await done.result(timeout=WAIT) == ["reserved sku", "charged 7", "shipped sku"]
        with pytest.raises(cairn.RunNotFound):
            await engine.restart("nobody")
    assert calls == {"workflow": 3, "reserve": 3, "charge": 3, "ship": 2}


async def test_fork__reuses_the_steps_before_seq(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    order = _declare(kit, calls, {"charge": False})

    async with kit.engine() as engine:
        run = await engine.start(order, "sku", 3, run_id="o-3")
        await run.result(timeout=WAIT)
        history = await engine.history("o-3")
        ship_seq = next(h.seq for h in history if h.name == "ship")
        forked = await engine.fork("o-3", from_step=ship_seq)
        assert await forked.result(timeout=WAIT) == ["reserved sku", "charged 3", "shipped sku"]
        from_start = await engine.fork("o-3", from_step=1)
        assert await from_start.result(timeout=WAIT) == [
            "reserved sku",
            "charged 3",
            "shipped sku",
        ]
        forked_history = await engine.history(forked.run_id)
        with pytest.raises(ValueError, match="from_step"):
            await engine.fork("o-3", from_step=0)
        with pytest.raises(cairn.RunNotFound):
            await engine.fork("nobody", from_step=1)
    assert forked.run_id not in ("o-3", from_start.run_id)
    # The fork replayed reserve and charge and ran only ship; the fork from 1 ran all.
    assert calls == {"workflow": 3, "reserve": 2, "charge": 2, "ship": 3}
    assert [(h.key, h.result) for h in forked_history] == [(h.key, h.result) for h in history]


async def test_fork__of_a_failed_run_before_its_failure(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    broken = {"charge": True}
    order = _declare(kit, calls, broken)

    async with kit.engine() as engine:
        run = await engine.start(order, "sku", 9)
        with pytest.raises(cairn.RunFailed):
            await run.result(timeout=WAIT)
        [reserve, charge] = await engine.history(run.run_id)
        broken["charge"] = False
        forked = await engine.fork(run.run_id, from_step=charge.seq)
        assert await forked.result(timeout=WAIT) == ["reserved sku", "charged 9", "shipped sku"]
    assert calls == {"workflow": 2, "reserve": 1, "charge": 2, "ship": 1}
    assert reserve.key == "reserve#1"
