"""Safe deploys: `cairn.patched`, `cairn.deprecate_patch` and `engine.check()`.

Two kits on one database model two deployments: runs parked under the first code are
checked, then continued, under the second.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

import cairn

from .kit import WAIT, Kit


async def waiting(engine: cairn.Engine, run_id: str) -> None:
    async with asyncio.timeout(WAIT):
        while (await engine.control.record(run_id)).status != "WAITING":
            await asyncio.sleep(0.005)


def v1(kit: Kit, calls: Counter[str]) -> Any:
    """The code in production: reserve, charge, wait for shipping, ship."""

    @kit.step("reserve")
    async def reserve() -> str:
        calls["reserve"] += 1
        return "reserved"

    @kit.step("charge")
    async def charge() -> str:
        calls["charge"] += 1
        return "charged"

    @kit.step("ship")
    async def ship() -> str:
        calls["ship"] += 1
        return "shipped"

    @kit.workflow("deploy.order")
    async def order() -> list[str]:
        done = [await reserve(), await charge()]
        await cairn.wait_for_event("go")
        return [*done, await ship()]

    return order, reserve, charge, ship


async def park(kit: Kit, n: int, calls: Counter[str]) -> list[str]:
    order, *_ = v1(kit, calls)
    async with kit.engine() as engine:
        runs = [await engine.start(order) for _ in range(n)]
        for run in runs:
            await waiting(engine, run.run_id)
    return [run.run_id for run in runs]


async def test_check__reports_exactly_the_changes_that_break_replay(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    await park(kit, 2, calls)

    def changed(body: str) -> Kit:
        new = kit.fresh()
        steps = {}
        for name in ("reserve", "charge", "ship", "audit", "bill"):
            steps[name] = new.step(name)(_returns(name))

        async def order() -> list[str]:
            out = []
            for call in body.split():
                if call == "wait":
                    await cairn.wait_for_event("go")
                elif call == "sleep":
                    await cairn.sleep("1h")
                else:
                    out.append(await steps[call]())
            return out

        new.workflow("deploy.order")(order)
        return new

    cases = {
        "reserve charge wait ship": None,  # unchanged
        "reserve charge wait ship audit": None,  # a step added at the end
        "reserve charge wait audit": None,  # changed after where the runs are parked
        # Reordered: replay matches recorded outcomes by step key, not by position, so
        # the runs continue correctly and the check agrees with what the engine does.
        "charge reserve wait ship": None,
        "reserve bill wait ship": ("step 'bill#1'", 2),  # renamed
        "reserve sleep charge wait ship": ("sleep", 2),  # a sleep added in the middle
    }
    for body, expected in cases.items():
        async with changed(body).engine(workers=0) as engine:
            report = await engine.check()
        assert report.runs == 2, body
        if expected is None:
            assert report.ok and report.workflows[0].clean == 2, (body, report.divergences)
            continue
        met, seq = expected
        assert not report.ok and len(report.divergences) == 2, body
        first = report.divergences[0]
        assert met in first.code, (body, first)
        assert first.seq == seq, (body, first)
        assert f"at seq {seq}: code " in first.describe()
    assert calls == {"reserve": 2, "charge": 2}  # the check ran no step


def _returns(name: str) -> Any:
    async def body() -> str:
        return name

    body.__name__ = body.__qualname__ = f"step_{name}"
    return body


def v2_with_patch(kit: Kit, calls: Counter[str]) -> Any:
    """The next version: charging goes through `bill` for runs that reach it under v2."""

    @kit.step("reserve")
    async def reserve() -> str:
        calls["reserve"] += 1
        return "reserved"

    @kit.step("charge")
    async def charge() -> str:
        calls["charge"] += 1
        return "charged"

    @kit.step("bill")
    async def bill() -> str:
        calls["bill"] += 1
        return "billed"

    @kit.step("ship")
    async def ship() -> str:
        calls["ship"] += 1
        return "shipped"

    @kit.workflow("deploy.order")
    async def order() -> list[str]:
        first = await reserve()
        second = await bill() if cairn.patched("bill-instead-of-charge") else await charge()
        await cairn.wait_for_event("go")
        return [first, second, await ship()]

    return order


async def test_patched__old_runs_keep_the_old_path_and_new_runs_take_the_new_one(
    kit: Kit,
) -> None:
    calls: Counter[str] = Counter()
    old = await park(kit, 2, calls)
    new_kit = kit.fresh()
    order = v2_with_patch(new_kit, calls)
    async with new_kit.engine() as engine:
        report = await engine.check()
        assert report.ok and report.runs == 2
        assert [(p.change_id, p.predating) for p in report.patches] == [
            ("bill-instead-of-charge", 2)
        ]
        fresh = await engine.start(order)
        await waiting(engine, fresh.run_id)
        report = await engine.check()
        assert report.ok and report.runs == 3
        assert report.patches[0].predating == 2 and not report.patches[0].safe_to_remove
        for run_id in [*old, fresh.run_id]:
            await engine.send_event(run_id, "go", None)
        results = [await (await engine.get(r)).result(timeout=WAIT) for r in old]
        assert results == [["reserved", "charged", "shipped"]] * 2
        assert await fresh.result(timeout=WAIT) == ["reserved", "billed", "shipped"]
        history = await engine.history(fresh.run_id)
        report = await engine.check()
    assert report.ok and report.runs == 0 and report.patches == []
    kinds = [(h.kind, h.key) for h in history]
    assert kinds[:3] == [
        ("step", "reserve#1"),
        ("patch", "~patch:bill-instead-of-charge#1"),
        ("step", "bill#1"),
    ]
    assert calls == {"reserve": 3, "charge": 2, "bill": 1, "ship": 3}


async def test_patched__a_new_run_replays_its_recorded_decision(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    order = v2_with_patch(kit, calls)
    async with kit.engine() as engine:
        run = await engine.start(order)
        await waiting(engine, run.run_id)
    # Restarted on the same code: the marker says the run took the new path.
    async with kit.engine() as engine:
        report = await engine.check()
        assert report.ok and report.patches[0].safe_to_remove
        await engine.send_event(run.run_id, "go", None)
        assert await (await engine.get(run.run_id)).result(timeout=WAIT) == [
            "reserved",
            "billed",
            "shipped",
        ]
    assert calls["bill"] == 1 and calls["charge"] == 0


async def test_deprecate_patch__fails_a_run_that_predates_it_and_check_says_so(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    old = await park(kit, 1, calls)
    v3 = kit.fresh()

    @v3.step("reserve")
    async def reserve() -> str:
        return "reserved"

    @v3.step("bill")
    async def bill() -> str:
        return "billed"

    @v3.step("ship")
    async def ship() -> str:
        return "shipped"

    @v3.workflow("deploy.order")
    async def order() -> list[str]:
        first = await reserve()
        cairn.deprecate_patch("bill-instead-of-charge")
        second = await bill()
        await cairn.wait_for_event("go")
        return [first, second, await ship()]

    async with v3.engine() as engine:
        report = await engine.check()
        assert not report.ok
        assert "deprecated patch 'bill-instead-of-charge'" in report.divergences[0].code
        fresh = await engine.start(order)
        await waiting(engine, fresh.run_id)
        await engine.send_event(old[0], "go", None)
        await engine.send_event(fresh.run_id, "go", None)
        with pytest.raises(cairn.RunFailed, match="predates patch 'bill-instead-of-charge'"):
            await (await engine.get(old[0])).result(timeout=WAIT)
        assert await fresh.result(timeout=WAIT) == ["reserved", "billed", "shipped"]


async def test_check__a_workflow_missing_from_the_code_and_bad_sample(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    await park(kit, 3, calls)
    async with kit.fresh().engine(workers=0) as engine:
        report = await engine.check()
        assert not report.ok and report.runs == 3
        assert "has no workflow of this name" in report.divergences[0].code
        assert (await engine.check(sample=1)).runs == 1
        assert (await engine.check(workflow="nope")).runs == 0
        with pytest.raises(ValueError, match="sample must be at least 1"):
            await engine.check(sample=0)
