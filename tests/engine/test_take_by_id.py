"""`Worker.take(run_id)`, what a transport's message leads to (cairn.celery), on both stores.

Takes that arrive together are claimed in one statement (with the rules of any claim);
each answers for its own run: taken, or not (held, finished, asked twice, no slot).
"""

from __future__ import annotations

import asyncio

import cairn
from cairn.runtime import claiming
from cairn.store.programs import claims as claim_ops

from .kit import WAIT, Kit


def _counting_claims(monkeypatch: object) -> list[list[str] | None]:
    """Patch the claim program the Claimer uses; return the `only` of every claim."""
    seen: list[list[str] | None] = []
    real = claim_ops.claim

    def claim(*args: object, **kwargs: object) -> object:
        seen.append(kwargs.get("only"))  # type: ignore[arg-type]
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(claiming.claim_ops, "claim", claim)  # type: ignore[attr-defined]
    return seen


async def test_take__runs_taken_together_share_one_claim(kit: Kit, monkeypatch: object) -> None:
    @kit.workflow("take.double")
    async def double(n: int) -> int:
        return n * 2

    async with kit.engine(workers=0) as starter:
        ids = [(await starter.start(double, n)).run_id for n in range(6)]
    seen = _counting_claims(monkeypatch)
    async with kit.engine(workers=8, polls=False) as engine:
        assert engine.worker is not None
        taken = await asyncio.wait_for(
            asyncio.gather(*(engine.worker.take(run_id) for run_id in ids)), WAIT
        )
        assert taken == [True] * 6
        results = [await (await engine.get(run_id)).result(timeout=WAIT) for run_id in ids]
    assert results == [0, 2, 4, 6, 8, 10]
    by_id = [only for only in seen if only is not None]
    assert sum(len(only) for only in by_id) == 6
    assert len(by_id) < 6, f"six takes made {len(by_id)} claims"


async def test_take__a_run_asked_twice_at_once_is_taken_once(kit: Kit) -> None:
    gate = asyncio.Event()

    @kit.workflow("take.held")
    async def held() -> str:
        await gate.wait()
        return "done"

    async with kit.engine(workers=0) as starter:
        run_id = (await starter.start(held)).run_id
    async with kit.engine(workers=4, polls=False) as engine:
        assert engine.worker is not None
        first = asyncio.ensure_future(engine.worker.take(run_id))
        second = asyncio.ensure_future(engine.worker.take(run_id))
        done, _ = await asyncio.wait({first, second}, timeout=WAIT, return_when="FIRST_COMPLETED")
        assert [task.result() for task in done] == [False]  # the duplicate, at once
        gate.set()
        assert sorted([await first, await second]) == [False, True]
        assert await (await engine.get(run_id)).result(timeout=WAIT) == "done"
        assert await engine.worker.take(run_id) is False  # finished: nothing to take


async def test_take__takes_beyond_the_free_slots_are_refused(kit: Kit) -> None:
    gate = asyncio.Event()

    @kit.workflow("take.waits")
    async def waits(n: int) -> int:
        await gate.wait()
        return n

    async with kit.engine(workers=0) as starter:
        ids = [(await starter.start(waits, n)).run_id for n in range(3)]
    async with kit.engine(workers=2, polls=False) as engine:
        assert engine.worker is not None
        takes = [asyncio.ensure_future(engine.worker.take(run_id)) for run_id in ids]
        done, _ = await asyncio.wait(takes, timeout=WAIT, return_when="FIRST_COMPLETED")
        assert [task.result() for task in done] == [False]  # two slots, three asked
        gate.set()
        assert sorted(await asyncio.gather(*takes)) == [False, True, True]
        refused = ids[[task.result() for task in takes].index(False)]
        handle = await engine.get(refused)
        assert (await handle.status()) == cairn.RunStatus.PENDING


async def test_take__with_wait_takes_beyond_the_free_slots_wait_for_one(kit: Kit) -> None:
    # The ids of one batch message (cairn.celery's "cairn.runs"): those that find no free
    # slot wait for one instead of being refused, and never run more at once than slots.
    gates = [asyncio.Event() for _ in range(5)]
    running: list[int] = []
    started: list[int] = []
    most = [0]

    @kit.workflow("take.in_line")
    async def in_line(n: int) -> int:
        started.append(n)
        running.append(n)
        most[0] = max(most[0], len(running))
        await gates[n].wait()
        running.remove(n)
        return n

    async with kit.engine(workers=0) as starter:
        ids = [(await starter.start(in_line, n)).run_id for n in range(5)]
    async with kit.engine(workers=2, polls=False) as engine:
        assert engine.worker is not None
        takes = [asyncio.ensure_future(engine.worker.take(i, wait=True)) for i in ids]
        deadline = asyncio.get_running_loop().time() + WAIT
        while len(running) < 2:
            assert asyncio.get_running_loop().time() < deadline, "two slots never filled"
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        assert not any(take.done() for take in takes)  # three wait, none refused
        for gate in gates:
            gate.set()
            await asyncio.sleep(0.02)
        assert await asyncio.wait_for(asyncio.gather(*takes), WAIT) == [True] * 5
        results = [await (await engine.get(run_id)).result(timeout=WAIT) for run_id in ids]
    assert results == [0, 1, 2, 3, 4]
    assert most[0] == 2
    assert started[2:] == [2, 3, 4]  # first come, first served


async def test_take__in_line_for_a_slot_answers_false_as_its_worker_stops(kit: Kit) -> None:
    # A take waiting for a slot holds no timer to look again (hundreds may wait behind a
    # batch message): the worker's stopping is what ends its wait, not the poll interval.
    gate = asyncio.Event()

    @kit.workflow("take.held")
    async def held(n: int) -> int:
        await gate.wait()
        return n

    async with kit.engine(workers=0) as starter:
        ids = [(await starter.start(held, n)).run_id for n in range(3)]
    async with kit.engine(workers=1, polls=False, poll_interval=600) as engine:
        assert engine.worker is not None
        first = asyncio.ensure_future(engine.worker.take(ids[0], wait=True))
        deadline = asyncio.get_running_loop().time() + WAIT
        while engine.worker.executions.free > 0:
            assert asyncio.get_running_loop().time() < deadline, "the slot never filled"
            await asyncio.sleep(0.01)
        in_line = [asyncio.ensure_future(engine.worker.take(i, wait=True)) for i in ids[1:]]
        await asyncio.sleep(0.1)
        assert not any(take.done() for take in in_line)
        stopping = asyncio.ensure_future(engine.worker.stop(grace=0))
        assert await asyncio.wait_for(asyncio.gather(*in_line), WAIT) == [False, False]
        gate.set()
        await asyncio.wait_for(stopping, WAIT)
        await asyncio.wait_for(first, WAIT)
    async with kit.engine(workers=0) as reader:
        for run_id in ids[1:]:
            assert (await (await reader.get(run_id)).status()) == cairn.RunStatus.PENDING
