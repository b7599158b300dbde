"""Workflow versions stored with runs, and what a run summary says about a run."""

from __future__ import annotations

import asyncio

import cairn

from .kit import WAIT, Kit


async def test_version__stored_with_the_run_and_filterable(kit: Kit) -> None:
    @kit.workflow("ver.order", version="2024-06")
    async def order(n: int) -> int:
        return n

    @kit.workflow("ver.other")
    async def other(n: int) -> int:
        return n

    async with kit.engine() as engine:
        first = await engine.start(order, 1)
        await first.result(timeout=WAIT)
        plain = await engine.start(other, 2)
        await plain.result(timeout=WAIT)
        described = await first.describe()
        versioned = await engine.list_runs(version="2024-06")
        unversioned = await plain.describe()

    assert described.version == "2024-06"
    assert [run.run_id for run in versioned] == [first.run_id]
    assert unversioned.version is None


async def test_version__a_run_queued_by_name_takes_the_version_of_the_code_that_runs_it(
    kit: Kit,
) -> None:
    @kit.workflow("ver.queued", version="v2")
    async def queued() -> str:
        return "done"

    async with kit.fresh().engine(workers=0) as starter:  # knows no workflow: queues by name
        handle = await starter.start("ver.queued", allow_unknown=True)
        assert (await handle.describe()).version is None
    async with kit.engine() as engine:
        result = await (await engine.get(handle.run_id)).result(timeout=WAIT)
        summary = await (await engine.get(handle.run_id)).describe()

    assert result == "done"
    assert summary.version == "v2"


async def test_version__a_continued_run_takes_the_version_of_the_code_of_now(kit: Kit) -> None:
    old = kit.fresh()

    @old.workflow("ver.chain", version="v1")
    async def chain_v1(n: int) -> int:
        await cairn.sleep("2s")
        cairn.continue_as_new(n + 1)

    @kit.workflow("ver.chain", version="v2")
    async def chain_v2(n: int) -> dict[str, object]:
        if n == 1:  # the same path as v1 up to continue_as_new, so v1's run replays
            await cairn.sleep("2s")
            cairn.continue_as_new(n + 1)
        info = cairn.current_run()
        return {"n": n, "version": info.version, "from": info.continued_from}

    async with old.engine() as engine:
        first = await engine.start(chain_v1, 1, run_id="chain-v")
        for _ in range(100):
            if await first.status() == cairn.RunStatus.SLEEPING:
                break
            await asyncio.sleep(0.02)
    async with kit.engine() as engine:
        again = await engine.get(first.run_id)
        result = await again.result(timeout=WAIT)
        head = await again.describe()
        assert head.continued_to is not None
        tail = await (await engine.get(head.continued_to)).describe()

    assert head.version == "v1"
    assert head.status == cairn.RunStatus.CONTINUED
    assert tail.version == "v2"
    assert tail.continued_from == "chain-v"
    assert result == {"n": 2, "version": "v2", "from": "chain-v"}


async def test_summary__says_what_a_parked_run_waits_for(kit: Kit) -> None:
    @kit.workflow("ver.waits")
    async def waits() -> object:
        return await cairn.wait_for_event("approve", timeout="1h")

    async with kit.engine() as engine:
        handle = await engine.start(waits)
        for _ in range(200):
            if await handle.status() == cairn.RunStatus.WAITING:
                break
            await asyncio.sleep(0.02)
        summary = await handle.describe()
        await handle.send_event("approve", {"ok": True})
        assert await handle.result(timeout=WAIT) == {"ok": True}
        done = await handle.describe()

    assert summary.waiting_for is not None
    assert summary.waiting_for.startswith("event 'approve' until ")
    assert done.waiting_for is None
