"""continue_as_new: CONTINUED runs linked both ways, fresh histories, results that follow."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

import cairn

from .kit import WAIT, Kit


def _declare(kit: Kit, calls: Counter[str]) -> Any:
    @kit.step("visit")
    def visit(n: int) -> int:
        calls[f"visit {n}"] += 1
        return n

    @kit.workflow("can.counter")
    async def counter(n: int, *, until: int = 3) -> dict[str, Any]:
        await visit(n)
        if n < until:
            cairn.continue_as_new(n + 1, until=until)
        return {"n": n, "run": cairn.current_run().run_id}

    return counter


async def test_continue_as_new__chain_is_linked_both_ways(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    counter = _declare(kit, calls)

    async with kit.engine() as engine:
        first = await engine.start(counter, 1, run_id="chain-1")
        result = await first.result(timeout=WAIT)
        chain = [await engine.control.record("chain-1")]
        while chain[-1].continued_to is not None:
            chain.append(await engine.control.record(chain[-1].continued_to))
        histories = [await engine.history(run.run_id) for run in chain]
        statuses = [await (await engine.get(run.run_id)).status() for run in chain]
    assert [run.status for run in chain] == ["CONTINUED", "CONTINUED", "COMPLETED"]
    assert statuses == [
        cairn.RunStatus.CONTINUED,
        cairn.RunStatus.CONTINUED,
        cairn.RunStatus.COMPLETED,
    ]
    assert [run.continued_from for run in chain] == [None, chain[0].run_id, chain[1].run_id]
    assert result == {"n": 3, "run": chain[2].run_id}
    assert all(run.workflow == "can.counter" for run in chain)
    # Each run has a history of its own: one visit, keyed afresh.
    assert [[(h.key, h.result) for h in history] for history in histories] == [
        [("visit#1", 1)],
        [("visit#1", 2)],
        [("visit#1", 3)],
    ]
    assert calls == {"visit 1": 1, "visit 2": 1, "visit 3": 1}


async def test_continue_as_new__result_of_any_run_in_the_chain_is_the_final_one(
    kit: Kit,
) -> None:
    counter = _declare(kit, Counter())

    async with kit.engine() as engine:
        first = await engine.start(counter, 1, until=4, run_id="c1")
        final = await first.result(timeout=WAIT)
        middle = (await engine.control.record("c1")).continued_to
        assert middle is not None
        assert await (await engine.get(middle)).result(timeout=WAIT) == final
        [summary] = await engine.list_runs(status="COMPLETED")
    assert final == {"n": 4, "run": summary.run_id}


async def test_continue_as_new__sync_workflow(kit: Kit) -> None:
    @kit.workflow("can.sync")
    def sync_loop(items: list[int], total: int = 0) -> int:
        if not items:
            return total
        cairn.continue_as_new(items[1:], total + items[0])
        raise AssertionError("continue_as_new returned")

    async with kit.engine() as engine:
        run = await engine.start(sync_loop, [1, 2, 3, 4])
        assert await run.result(timeout=WAIT) == 10
        assert len(await engine.list_runs(status="CONTINUED")) == 4


async def test_continue_as_new__child_chain_is_followed_by_its_parent(kit: Kit) -> None:
    counter = _declare(kit, Counter())

    @kit.workflow("can.parent")
    async def parent() -> Any:
        return await counter(1)

    async with kit.engine() as engine:
        run = await engine.start(parent, run_id="par")
        result = await run.result(timeout=WAIT)
        history = await engine.history("par")
        children = [r for r in await engine.list_runs() if r.parent_id == "par"]
    assert result["n"] == 3
    assert len(children) == 3  # each run of the child's chain belongs to the parent
    assert {c.status for c in children} == {
        cairn.RunStatus.CONTINUED,
        cairn.RunStatus.COMPLETED,
    }
    assert [h.kind for h in history] == ["child", "child", "child"]


async def test_continue_as_new__bad_arguments_fail_the_run(kit: Kit) -> None:
    @kit.workflow("can.bad")
    async def bad() -> None:
        cairn.continue_as_new(object())

    async with kit.engine() as engine:
        run = await engine.start(bad)
        with pytest.raises(cairn.RunFailed) as info:
            await run.result(timeout=WAIT)
        assert await engine.list_runs(status="PENDING") == cairn.RunPage([])
    assert info.value.error_type == "cairn.errors.SerializationError"
    assert "object" in str(info.value)


async def test_continue_as_new__outside_a_run_raises_not_in_run() -> None:
    with pytest.raises(cairn.NotInRun, match="continue_as_new"):
        cairn.continue_as_new(1)


async def test_continue_as_new__an_event_to_an_old_run_goes_to_the_newest(kit: Kit) -> None:
    @kit.workflow("can.inbox")
    async def inbox(n: int) -> Any:
        message = await cairn.wait_for_event("msg")
        if n < 2:
            cairn.continue_as_new(n + 1)
        return [n, message]

    async with kit.engine() as engine:
        first = await engine.start(inbox, 0, run_id="inbox-0")
        await engine.send_event("inbox-0", "msg", "a")  # run 0 takes it and continues
        async with asyncio.timeout(WAIT):
            while (await engine.control.record("inbox-0")).status != "CONTINUED":
                await asyncio.sleep(0.005)
        # Sent to the first run of the chain: delivered to its newest run, twice over.
        await engine.send_event("inbox-0", "msg", "b")
        async with asyncio.timeout(WAIT):
            while True:
                second = await engine.control.record("inbox-0")
                newest = await engine.control.record(second.continued_to or "inbox-0")
                if newest.status == "CONTINUED":
                    break
                await asyncio.sleep(0.005)
        await engine.send_event("inbox-0", "msg", "c")
        assert await first.result(timeout=WAIT) == [2, "c"]
        # The chain has ended: a further event says so, naming its newest run.
        with pytest.raises(cairn.RunFinished) as finished:
            await engine.send_event("inbox-0", "msg", "d")
        assert finished.value.run_id == newest.continued_to


async def test_continue_as_new__a_repeated_key_is_not_passed_on_to_the_newest_run(
    kit: Kit,
) -> None:
    # The first send woke run 0, which continued; a retry of that send (its answer lost)
    # is the same delivery, not a new event for run 1.
    @kit.workflow("can.keyed_inbox")
    async def inbox(n: int) -> Any:
        message = await cairn.wait_for_event("msg")
        if n < 1:
            cairn.continue_as_new(n + 1)
        return [n, message]

    async with kit.engine() as engine:
        first = await engine.start(inbox, 0, run_id="keyed-0")
        await engine.send_event("keyed-0", "msg", "a", idempotency_key="k1")
        async with asyncio.timeout(WAIT):
            while (await engine.control.record("keyed-0")).status != "CONTINUED":
                await asyncio.sleep(0.005)
        again = await engine.send_event("keyed-0", "msg", "a", idempotency_key="k1")
        assert (again.run_id, again.repeated) == ("keyed-0", True)
        await engine.send_event("keyed-0", "msg", "b", idempotency_key="k2")
        assert await first.result(timeout=WAIT) == [1, "b"]
