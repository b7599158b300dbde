"""The mailbox: `cairn.receive` takes up to N queued events of a topic as one history entry.

It shares its channel with `wait_for_event` (an event is receivable by either), parks the
run WAITING when nothing is queued, and records one entry per call: the messages it took
or its timeout, never one per message or per tick.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

import cairn
from cairn.clock import VirtualClock
from cairn.store.records import RunRecord
from cairn.testing import replay

from .kit import WAIT, Gate, Kit


async def parked(engine: cairn.Engine, run_id: str, *, fence_above: int = -1) -> RunRecord:
    """The stored run once it is WAITING and no worker holds it (after claim `fence_above`)."""
    async with asyncio.timeout(WAIT):
        while True:
            run = await engine.control.record(run_id)
            if run.status == "WAITING" and run.owner is None and run.fence > fence_above:
                return run
            await asyncio.sleep(0.005)


async def test_receive__takes_every_queued_event_in_order_as_one_entry(kit: Kit) -> None:
    @kit.workflow("receive.all")
    async def take_all() -> list[Any]:
        return await cairn.receive("orders", max_messages=8)

    async with kit.engine(workers=0) as queuer:
        run = await queuer.start(take_all)
        for n in (1, 2, 3):
            await queuer.send_event(run.run_id, "orders", {"n": n})
    async with kit.engine() as engine:
        assert await (await engine.get(run.run_id)).result(timeout=WAIT) == [
            {"n": 1},
            {"n": 2},
            {"n": 3},
        ]
        [entry] = await engine.history(run.run_id)
    assert (entry.kind, entry.name, entry.status, entry.key) == (
        "receive",
        "orders",
        "completed",
        "~receive:orders#1",
    )
    assert entry.result == [{"n": 1}, {"n": 2}, {"n": 3}]


async def test_receive__a_huge_max_messages_takes_all(kit: Kit) -> None:
    @kit.workflow("receive.huge")
    async def huge() -> list[Any]:
        return await cairn.receive("orders", max_messages=10**30, timeout=0)

    async with kit.engine(workers=0) as queuer:
        run = await queuer.start(huge)
        await queuer.send_event(run.run_id, "orders", 1)
    async with kit.engine() as engine:
        assert await (await engine.get(run.run_id)).result(timeout=WAIT) == [1]


async def test_receive__max_messages_leaves_the_rest_for_the_next_call(kit: Kit) -> None:
    @kit.workflow("receive.two")
    async def two_at_a_time() -> list[Any]:
        first = await cairn.receive("orders", max_messages=2)
        second = await cairn.receive("orders", max_messages=2)
        return [first, second]

    async with kit.engine(workers=0) as queuer:
        run = await queuer.start(two_at_a_time)
        for n in ("a", "b", "c"):
            await queuer.send_event(run.run_id, "orders", n)
    async with kit.engine() as engine:
        assert await (await engine.get(run.run_id)).result(timeout=WAIT) == [["a", "b"], ["c"]]
        history = await engine.history(run.run_id)
    assert [(e.kind, e.status, e.result) for e in history] == [
        ("receive", "completed", ["a", "b"]),
        ("receive", "completed", ["c"]),
    ]


async def test_receive__nothing_queued_parks_the_run_until_an_event_comes(kit: Kit) -> None:
    @kit.workflow("receive.park")
    async def wait_for_one() -> list[Any]:
        return await cairn.receive("orders", max_messages=8)

    async with kit.engine() as engine:
        assert engine.worker is not None
        run = await engine.start(wait_for_one)
        record = await parked(engine, run.run_id)
        assert record.wake_at is None  # no timeout: no timer
        assert record.waiting_for == "event:orders"
        assert not engine.worker.active  # it holds no worker slot
        [waiting] = await engine.history(run.run_id)
        assert (waiting.kind, waiting.status) == ("receive", "waiting")
        summary = (await engine.list_runs()).runs[0]
        assert summary.waiting_for == "event 'orders'"

        sent = await run.send_event("orders", {"id": 7})
        assert sent.awaited
        assert await run.result(timeout=WAIT) == [{"id": 7}]
        [entry] = await engine.history(run.run_id)
    assert (entry.kind, entry.status, entry.result) == ("receive", "completed", [{"id": 7}])


async def test_receive__timeout_returns_an_empty_list_as_one_entry(kit: Kit) -> None:
    clock = VirtualClock()

    @kit.workflow("receive.timeout")
    async def timed() -> list[Any]:
        return await cairn.receive("orders", max_messages=4, timeout="1h")

    async with kit.engine(clock=clock) as engine:
        started = clock.now()
        run = await engine.start(timed)
        record = await parked(engine, run.run_id)
        assert record.wake_at == pytest.approx(started + 3600)
        clock.advance(3600)
        assert await run.result(timeout=WAIT) == []
        [entry] = await engine.history(run.run_id)
    assert (entry.kind, entry.name, entry.status, entry.result) == (
        "receive",
        "orders",
        "timeout",
        [],
    )


async def test_receive__zero_timeout_polls_without_parking(kit: Kit) -> None:
    @kit.workflow("receive.poll_once")
    async def poll() -> list[Any]:
        return [await cairn.receive("orders", timeout=0) for _ in range(2)]

    async with kit.engine() as engine:
        run = await engine.start(poll)
        assert await run.result(timeout=WAIT) == [[], []]
        record = await engine.control.record(run.run_id)
        history = await engine.history(run.run_id)
    assert record.fence == 1  # claimed once: it never parked
    assert [(e.kind, e.status) for e in history] == [("receive", "timeout")] * 2


async def test_receive__replay_after_recovery_returns_the_recorded_lists(
    kit: Kit, gate: Gate
) -> None:
    @kit.step("gate")
    async def gate_step() -> str:
        return await gate()

    @kit.workflow("receive.replay")
    async def flow() -> list[Any]:
        first = await cairn.receive("orders", max_messages=8)
        passed = await gate_step()
        later = await cairn.receive("orders", max_messages=8, timeout=0)
        return [first, passed, later]

    async with kit.engine(workers=0) as queuer:
        run = await queuer.start(flow)
        await queuer.send_event(run.run_id, "orders", "a")
        await queuer.send_event(run.run_id, "orders", "b")
    first = kit.engine()
    await first.open()
    try:
        async with asyncio.timeout(WAIT):
            await gate.entered.wait()
        # Sent while the run is inside the step: the replay must not take it.
        await first.send_event(run.run_id, "orders", "late")
    finally:
        await gate.hold(first)
    async with kit.engine() as second:
        result = await (await second.get(run.run_id)).result(timeout=WAIT)
        history = await second.history(run.run_id)
    assert result == [["a", "b"], "through", ["late"]]
    receives = [(e.key, e.result) for e in history if e.kind == "receive"]
    assert receives == [("~receive:orders#1", ["a", "b"]), ("~receive:orders#2", ["late"])]


async def test_receive__crash_and_recover_replays_without_consuming_more(
    offline_kit: Kit,
) -> None:
    from cairn.testing import TestEngine

    @offline_kit.step("receive.after")
    async def after(items: list[Any]) -> int:
        return len(items)

    @offline_kit.workflow("receive.crash")
    async def crashing() -> list[Any]:
        await cairn.sleep("1h")  # the events are queued meanwhile
        got = await cairn.receive("orders", max_messages=8)
        count = await after(got)
        return [got, count]

    async with TestEngine(registry=offline_kit.registry) as env:
        env.crash_after_step("receive.after")
        run = await env.start(crashing)
        await env.settle()
        await env.send_event(run.run_id, "orders", 1)
        await env.send_event(run.run_id, "orders", 2)
        await env.advance("1h")
        assert await run.status() == cairn.RunStatus.RUNNING  # left by the "dead" engine
        await env.send_event(run.run_id, "orders", 3)  # after the crash: not taken on replay
        await env.recover()
        assert await run.result(timeout=WAIT) == [[1, 2], 2]
        history = await env.history(run.run_id)
    assert [e.result for e in history if e.kind == "receive"] == [[1, 2]]


async def test_receive__events_not_yet_taken_pass_to_the_continued_run(kit: Kit) -> None:
    @kit.workflow("receive.chain")
    async def inbox(round_no: int) -> Any:
        got = await cairn.receive("orders", max_messages=1)
        if round_no == 0:
            cairn.continue_as_new(1)  # "b" is still queued: the successor must get it
        return got

    async with kit.engine(workers=0) as queuer:
        run = await queuer.start(inbox, 0, run_id="chain-0")
        await queuer.send_event(run.run_id, "orders", "a")
        await queuer.send_event(run.run_id, "orders", "b")
    async with kit.engine() as engine:
        assert await (await engine.get("chain-0")).result(timeout=WAIT) == ["b"]
        first = await engine.history("chain-0")
    assert [e.result for e in first] == [["a"]]


async def test_receive__an_event_of_another_topic_does_not_wake_it(kit: Kit) -> None:
    @kit.workflow("receive.typo")
    async def orders() -> list[Any]:
        return await cairn.receive("orders", max_messages=8)

    async with kit.engine() as engine:
        assert engine.worker is not None
        run = await engine.start(orders)
        before = await parked(engine, run.run_id)

        typo = await run.send_event("order", "typo")

        assert (typo.awaited, typo.waits_for) == (False, ("event 'orders'",))
        still = await engine.control.record(run.run_id)
        assert (still.status, still.wake_at, still.fence) == ("WAITING", None, before.fence)
        assert await engine.worker.claim_once() == 0  # nothing is due
        await run.send_event("orders", "right")
        assert await run.result(timeout=WAIT) == ["right"]


async def test_receive__a_loop_of_short_timeouts_writes_one_entry_per_call(kit: Kit) -> None:
    calls = 20

    @kit.workflow("receive.loop")
    async def poll() -> int:
        got: list[Any] = []
        for _ in range(calls):
            got += await cairn.receive("commands", timeout="200ms", max_messages=8)
        return len(got)

    async with kit.engine() as engine:
        run = await engine.start(poll)
        assert await run.result(timeout=WAIT + calls * 0.2) == 0
        history = await engine.history(run.run_id)
        record = await engine.control.record(run.run_id)
    assert len(history) == calls
    assert {(e.kind, e.status) for e in history} == {("receive", "timeout")}
    assert {tuple(e.result) for e in history} == {()}
    # Each call parks once and wakes once at its deadline: no wake-up without progress.
    assert record.fence <= calls + 1
    assert record.futile_wakes == 0


async def test_receive__shares_its_channel_with_wait_for_event(kit: Kit) -> None:
    @kit.workflow("receive.shared")
    async def mixed() -> list[Any]:
        one = await cairn.wait_for_event("orders")
        rest = await cairn.receive("orders", max_messages=8)
        return [one, rest]

    async with kit.engine(workers=0) as queuer:
        run = await queuer.start(mixed)
        for n in (1, 2, 3):
            await queuer.send_event(run.run_id, "orders", n)
    async with kit.engine() as engine:
        assert await (await engine.get(run.run_id)).result(timeout=WAIT) == [1, [2, 3]]


async def test_receive__payloads_come_back_as_their_own_types(kit: Kit) -> None:
    @kit.workflow("receive.types")
    async def typed() -> list[Any]:
        return await cairn.receive("values", max_messages=3)

    when = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
    async with kit.engine(workers=0) as queuer:
        run = await queuer.start(typed)
        await queuer.send_event(run.run_id, "values", Decimal("1.50"))
        await queuer.send_event(run.run_id, "values", when)
        await queuer.send_event(run.run_id, "values", (1, "two"))
    async with kit.engine() as engine:
        got = await (await engine.get(run.run_id)).result(timeout=WAIT)
    assert got == [Decimal("1.50"), when, (1, "two")]
    assert [type(v) for v in got] == [Decimal, datetime, tuple]


class Opaque:
    """A value only the pickle serializer stores (no dataclass, no JSON form)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.n == self.n

    __hash__ = None  # type: ignore[assignment]


async def test_receive__pickled_payloads_with_the_pickle_serializer(kit: Kit) -> None:
    @kit.workflow("receive.pickled")
    async def pickled() -> list[Any]:
        return await cairn.receive("values", max_messages=3)

    async with kit.engine(workers=0, serializer="pickle") as queuer:
        run = await queuer.start(pickled)
        await queuer.send_event(run.run_id, "values", Opaque(1))
        await queuer.send_event(run.run_id, "values", {"inner": Opaque(2)})
    async with kit.engine(serializer="pickle") as engine:
        got = await (await engine.get(run.run_id)).result(timeout=WAIT)
    assert got == [Opaque(1), {"inner": Opaque(2)}]


async def test_receive__sync_workflow_blocks(kit: Kit) -> None:
    @kit.workflow("receive.sync")
    def sync_receive() -> list[Any]:
        first = cairn.receive("go", max_messages=2)
        nothing = cairn.receive("go", timeout=0)
        return [first, nothing]

    async with kit.engine() as engine:
        run = await engine.start(sync_receive)
        await parked(engine, run.run_id)
        await run.send_event("go", 42)
        assert await run.result(timeout=WAIT) == [[42], []]


async def test_receive__gathered_with_a_wait_on_another_topic(kit: Kit) -> None:
    @kit.workflow("receive.gather")
    async def both() -> list[Any]:
        return list(
            await asyncio.gather(
                cairn.receive("left", max_messages=5), cairn.wait_for_event("right")
            )
        )

    async with kit.engine() as engine:
        run = await engine.start(both)
        first = await parked(engine, run.run_id)
        await run.send_event("right", "R")
        await parked(engine, run.run_id, fence_above=first.fence)
        await run.send_event("left", "L")
        assert await run.result(timeout=WAIT) == [["L"], "R"]


async def test_receive__bad_arguments_raise_in_the_workflow(kit: Kit) -> None:
    @kit.workflow("receive.bad")
    async def bad() -> list[str]:
        errors = []
        for call in (
            lambda: cairn.receive("orders", max_messages=0),
            lambda: cairn.receive("orders", max_messages=True),
            lambda: cairn.receive("", max_messages=1),
            lambda: cairn.receive("orders", timeout="eventually"),
        ):
            try:
                await call()
            except ValueError as exc:
                errors.append(str(exc))
        return errors

    async with kit.engine() as engine:
        run = await engine.start(bad)
        errors = await run.result(timeout=WAIT)
        history = await engine.history(run.run_id)
    assert len(errors) == 4
    assert "max_messages" in errors[0] and "0" in errors[0]
    assert "max_messages" in errors[1] and "True" in errors[1]
    assert "topic" in errors[2]
    assert "'eventually'" in errors[3]
    assert history == []  # nothing recorded for a call refused at its arguments


async def test_receive__recorded_history_replays_and_checks_clean(kit: Kit) -> None:
    @kit.workflow("receive.check")
    async def flow() -> list[Any]:
        first = await cairn.receive("orders", max_messages=2)
        second = await cairn.receive("orders", max_messages=2)
        return [first, second]

    @kit.workflow("receive.check_changed")
    async def changed() -> list[Any]:
        return [await cairn.wait_for_event("orders")]

    async with kit.engine(workers=0) as queuer:
        run = await queuer.start(flow)
        await queuer.send_event(run.run_id, "orders", 1)
        await queuer.send_event(run.run_id, "orders", 2)
    async with kit.engine() as engine:
        await parked(engine, run.run_id)  # took [1, 2], then parked on the second call
        report = await engine.check()
        assert report.ok and report.runs == 1, report.divergences
        await engine.send_event(run.run_id, "orders", 3)
        assert await (await engine.get(run.run_id)).result(timeout=WAIT) == [[1, 2], [3]]
        history = await engine.history(run.run_id)
    replay(history, flow)
    with pytest.raises(cairn.NonDeterminismError, match=r"~receive:orders#1"):
        replay(history, changed)


def test_receive__bad_arguments_raise_before_anything_else() -> None:
    with pytest.raises(ValueError, match="max_messages must be an int >= 1, got -1"):
        cairn.receive("orders", max_messages=-1)
    with pytest.raises(ValueError, match="max_messages must be an int >= 1, got '3'"):
        cairn.receive("orders", max_messages="3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"max_messages must be an int >= 1, got 1\.5"):
        cairn.receive("orders", max_messages=1.5)  # type: ignore[arg-type]
    with pytest.raises(cairn.InvalidName, match="topic"):
        cairn.receive("", max_messages=1)
    with pytest.raises(cairn.InvalidName, match="topic"):
        cairn.receive(5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout of receive"):
        cairn.receive("orders", timeout="soon")
    with pytest.raises(cairn.NotInRun, match=r"cairn\.receive"):
        cairn.receive("orders")
