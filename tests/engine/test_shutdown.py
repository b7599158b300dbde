"""Closing an engine with runs in flight: steps finish within the grace, runs go back at once.

`Engine(grace=...)` lets the steps executing when the engine closes finish and commit;
each run is then handed back (PENDING, no owner) for any engine to take, with no lease
to wait for. A step still executing when the grace ends is cut off: its run is handed
back all the same, and that step runs again where the run goes next.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

import pytest

import cairn

from .kit import WAIT, Kit


class Held:
    """A step body (sync or async) that waits until the test lets it finish."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()
        self.calls = Counter[str]()

    def sync(self, name: str) -> Any:
        def body() -> str:
            self.calls[name] += 1
            self.entered.set()
            self.released.wait(WAIT * 3)
            return f"{name} done"

        return body

    def asynchronous(self, name: str) -> Any:
        async def body() -> str:
            self.calls[name] += 1
            self.entered.set()
            while not self.released.is_set():
                await asyncio.sleep(0.005)
            return f"{name} done"

        return body

    async def wait_entered(self) -> None:
        assert await asyncio.to_thread(self.entered.wait, WAIT)


async def _closing(engine: cairn.Engine) -> asyncio.Task[None]:
    """Start closing `engine`; returns once the worker has been asked to stop."""
    worker = engine.worker
    assert worker is not None
    task = asyncio.create_task(engine.close())
    async with asyncio.timeout(WAIT):
        while not worker.stopping:
            await asyncio.sleep(0.005)
    return task


async def _stored(kit: Kit, run_id: str) -> tuple[str, str | None, list[tuple[str, Any]]]:
    async with kit.engine(workers=0) as control:
        run = await control.control.record(run_id)
        history = await control.history(run_id)
    return run.status, run.owner, [(entry.key, entry.result) for entry in history]


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_close__a_step_in_flight_finishes_within_the_grace_then_the_run_goes_back(
    kit: Kit, kind: str
) -> None:
    held = Held()
    make = held.sync if kind == "sync" else held.asynchronous
    first = kit.step("shut.first")(make("first"))
    after_calls: list[str] = []

    @kit.step("shut.after")
    async def after() -> str:
        after_calls.append("after")
        return "after done"

    @kit.workflow("shut.two")
    async def two() -> list[str]:
        return [await first(), await after()]

    engine = kit.engine(grace=WAIT * 3, lease=60)
    await engine.open()
    run = await engine.start(two)
    await held.wait_entered()
    closing = await _closing(engine)
    held.released.set()  # the step finishes during the grace
    async with asyncio.timeout(WAIT):
        await closing

    status, owner, history = await _stored(kit, run.run_id)
    # Its outcome was committed, the next step never started here, and the run is back
    # in the queue for anyone (a lease of 60 s: nobody had to wait it out).
    assert history == [("shut.first#1", "first done")]
    assert (status, owner) == ("PENDING", None)
    assert after_calls == []

    async with kit.engine() as second:
        assert await (await second.get(run.run_id)).result(timeout=WAIT) == [
            "first done",
            "after done",
        ]
    assert held.calls == Counter({"first": 1})  # never run again
    assert after_calls == ["after"]


async def test_close__a_run_that_ends_within_the_grace_is_not_said_handed_back(
    kit: Kit, caplog: pytest.LogCaptureFixture
) -> None:
    # Its last step finishes during the grace and the workflow returns: the run is
    # COMPLETED here, and the worker's last line must not count it as handed back.
    held = Held()
    last = kit.step("shut.last")(held.asynchronous("last"))

    @kit.workflow("shut.one")
    async def one() -> str:
        return str(await last())

    engine = kit.engine(grace=WAIT * 3, lease=60)
    await engine.open()
    run = await engine.start(one)
    await held.wait_entered()
    caplog.set_level("INFO", logger="cairn")
    closing = await _closing(engine)
    held.released.set()
    async with asyncio.timeout(WAIT):
        await closing

    status, owner, _ = await _stored(kit, run.run_id)
    assert (status, owner) == ("COMPLETED", None)
    stopped = [r.getMessage() for r in caplog.records if r.getMessage().startswith("stopped")]
    assert stopped == ["stopped: the 1 run(s) in flight ended here (COMPLETED 1); none handed back"]


async def test_close__the_runs_in_flight_are_asked_to_leave_the_moment_the_worker_stops(
    kit: Kit,
) -> None:
    # Nothing may be awaited between the worker's stop (no more claims) and asking its
    # runs to leave: a step finishing in between would go on to start the next one
    # during the grace (a CI flake of the test above, under load).
    held = Held()
    first = kit.step("shut.asked")(held.asynchronous("asked"))

    @kit.workflow("shut.asked")
    async def asked() -> str:
        return str(await first())

    engine = kit.engine(grace=WAIT * 3, lease=60)
    await engine.open()
    worker = engine.worker
    assert worker is not None
    closing = None
    try:
        await engine.start(asked)
        await held.wait_entered()
        closing = asyncio.create_task(engine.close())
        async with asyncio.timeout(WAIT):
            while not worker.stopping:
                await asyncio.sleep(0)  # one turn of the loop: the first moment it shows
        lives = list(worker.executions.live.values())
        assert lives
        assert all(live.interrupts.handing_back for live in lives)
    finally:
        held.released.set()
        if closing is not None:
            async with asyncio.timeout(WAIT):
                await closing


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_close__a_step_still_running_when_the_grace_ends_is_cut_off_and_handed_back(
    kit: Kit, kind: str
) -> None:
    held = Held()
    make = held.sync if kind == "sync" else held.asynchronous
    stuck = kit.step("shut.stuck")(make("stuck"))

    @kit.workflow("shut.one")
    async def one() -> str:
        return str(await stuck())

    engine = kit.engine(grace=0.2, lease=60)
    await engine.open()
    try:
        run = await engine.start(one)
        await held.wait_entered()
        # Handed back at once when the grace ends, even while a sync step's thread still
        # runs (it cannot be stopped): not after waiting out the 60 s lease.
        async with asyncio.timeout(WAIT):
            await engine.close()
        status, owner, history = await _stored(kit, run.run_id)
    finally:
        held.released.set()
    assert (status, owner, history) == ("PENDING", None, [])

    async with kit.engine() as second:
        assert await (await second.get(run.run_id)).result(timeout=WAIT) == "stuck done"
    assert held.calls == Counter({"stuck": 2})  # the cut-off step ran again


async def test_close__branches_of_a_gather_in_flight_all_commit_before_the_hand_back(
    kit: Kit,
) -> None:
    quick, slow = Held(), Held()
    a = kit.step("shut.a")(quick.asynchronous("a"))
    b = kit.step("shut.b")(slow.asynchronous("b"))
    later: list[str] = []

    @kit.step("shut.later")
    async def then() -> str:
        later.append("later")
        return "later"

    @kit.workflow("shut.gather")
    async def both() -> list[str]:
        async def branch_a() -> str:
            return str(await a()) + "/" + str(await then())

        return list(await asyncio.gather(branch_a(), b()))

    engine = kit.engine(grace=WAIT * 3, lease=60)
    await engine.open()
    run = await engine.start(both)
    await quick.wait_entered()
    await slow.wait_entered()
    closing = await _closing(engine)
    quick.released.set()  # branch a reaches its next durable point and leaves...
    await asyncio.sleep(0.05)
    assert not closing.done()  # ...but the run waits for branch b's step in flight
    slow.released.set()
    async with asyncio.timeout(WAIT):
        await closing

    status, owner, history = await _stored(kit, run.run_id)
    assert sorted(history) == [("shut.a#1", "a done"), ("shut.b#1", "b done")]
    assert (status, owner) == ("PENDING", None)
    assert later == []
    async with kit.engine() as second:
        result = await (await second.get(run.run_id)).result(timeout=WAIT)
    assert result == ["a done/later", "b done"]
    assert (quick.calls, slow.calls) == (Counter({"a": 1}), Counter({"b": 1}))


async def test_close__hurry_ends_the_grace_at_once(kit: Kit) -> None:
    held = Held()
    stuck = kit.step("shut.hurried")(held.asynchronous("hurried"))

    @kit.workflow("shut.hurry")
    async def hurry() -> str:
        return str(await stuck())

    engine = kit.engine(grace=3600, lease=60)
    await engine.open()
    worker = engine.worker
    assert worker is not None
    try:
        run = await engine.start(hurry)
        await held.wait_entered()
        closing = await _closing(engine)
        worker.hurry()  # what a second SIGTERM to `cairn worker` does
        async with asyncio.timeout(WAIT):
            await closing
        status, owner, history = await _stored(kit, run.run_id)
    finally:
        held.released.set()
    assert (status, owner, history) == ("PENDING", None, [])


async def test_close__with_nothing_in_flight_returns_at_once(kit: Kit) -> None:
    engine = kit.engine(grace=3600)
    await engine.open()
    async with asyncio.timeout(WAIT):
        await engine.close()


@pytest.mark.parametrize("grace", ["-1s", "soon", -1])
def test_engine__a_bad_grace_is_refused_naming_it(offline_kit: Kit, grace: Any) -> None:
    with pytest.raises(ValueError, match="grace"):
        cairn.Engine("sqlite:///:memory:", grace=grace)
