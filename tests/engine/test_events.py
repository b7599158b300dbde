"""Events: FIFO per name, kept when sent early, deduplicated by key, with timeouts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import cairn
from cairn.clock import VirtualClock
from cairn.store.records import RunRecord

from .kit import WAIT, Kit


async def until(engine: cairn.Engine, run_id: str, *statuses: str) -> RunRecord:
    """The stored run once its status is one of `statuses` (polled; fails after WAIT)."""
    async with asyncio.timeout(WAIT):
        while True:
            run = await engine.control.record(run_id)
            if run.status in statuses:
                return run
            await asyncio.sleep(0.005)


def _collector(kit: Kit, name: str, event: str, count: int) -> Any:
    @kit.workflow(name)
    async def collect() -> list[Any]:
        return [await cairn.wait_for_event(event) for _ in range(count)]

    return collect


async def test_wait_for_event__waiting_status_names_the_event(kit: Kit) -> None:
    collect = _collector(kit, "events.status", "approval", 1)

    async with kit.engine() as engine:
        run = await engine.start(collect)
        parked = await until(engine, run.run_id, "WAITING")
        assert await run.status() == cairn.RunStatus.WAITING
        assert parked.waiting_for is not None and "approval" in parked.waiting_for
        assert parked.owner is None and parked.wake_at is None  # no timeout: no timer
        assert engine.worker is not None and not engine.worker.active
        await run.send_event("approval", {"ok": True})
        assert await run.result(timeout=WAIT) == [{"ok": True}]
        [entry] = await engine.history(run.run_id)
    assert (entry.kind, entry.name, entry.status, entry.result) == (
        "event",
        "approval",
        "completed",
        {"ok": True},
    )


async def test_wait_for_event__two_waits_consume_two_events_in_order(kit: Kit) -> None:
    collect = _collector(kit, "events.two", "item", 2)

    async with kit.engine() as engine:
        run = await engine.start(collect)
        await until(engine, run.run_id, "WAITING")
        await engine.send_event(run.run_id, "item", "first")
        await engine.send_event(run.run_id, "item", "second")
        assert await run.result(timeout=WAIT) == ["first", "second"]
        history = await engine.history(run.run_id)
    assert [(h.kind, h.result) for h in history] == [("event", "first"), ("event", "second")]


async def test_wait_for_event__sent_before_the_wait_is_kept_fifo_per_name(kit: Kit) -> None:
    @kit.workflow("events.fifo")
    async def fifo() -> list[Any]:
        b = await cairn.wait_for_event("b")
        a = [await cairn.wait_for_event("a") for _ in range(3)]
        return [b, a]

    async with kit.engine(workers=0) as queuer:  # no worker runs it yet
        run = await queuer.start(fifo)
        for n in (1, 2, 3):
            await queuer.send_event(run.run_id, "a", n)
        await queuer.send_event(run.run_id, "b", "bee")
    async with kit.engine() as engine:  # delivered once a worker runs
        assert await (await engine.get(run.run_id)).result(timeout=WAIT) == ["bee", [1, 2, 3]]


async def test_send_event__idempotency_key_dedupes(kit: Kit) -> None:
    collect = _collector(kit, "events.dedupe", "pay", 2)

    async with kit.engine() as engine:
        run = await engine.start(collect)
        await until(engine, run.run_id, "WAITING")
        await engine.send_event(run.run_id, "pay", 1, idempotency_key="k1")
        await engine.send_event(run.run_id, "pay", 1, idempotency_key="k1")  # retried delivery
        await run.send_event("pay", 2, idempotency_key="k2")
        await engine.send_event(run.run_id, "pay", 3)
        assert await run.result(timeout=WAIT) == [1, 2]


async def test_send_event__same_key_on_another_name_is_another_event(kit: Kit) -> None:
    @kit.workflow("events.keys")
    async def keys() -> list[Any]:
        return [await cairn.wait_for_event("x"), await cairn.wait_for_event("y")]

    async with kit.engine() as engine:
        run = await engine.start(keys)
        await engine.send_event(run.run_id, "x", "ex", idempotency_key="same")
        await engine.send_event(run.run_id, "y", "why", idempotency_key="same")
        assert await run.result(timeout=WAIT) == ["ex", "why"]


async def test_wait_for_event__timeout_raises_event_timeout(kit: Kit) -> None:
    clock = VirtualClock()

    @kit.workflow("events.timeout")
    async def timed() -> str:
        try:
            await cairn.wait_for_event("never", timeout="1h")
        except cairn.EventTimeout as exc:
            return f"gave up: {exc}"
        return "got it"

    @kit.workflow("events.timeout_uncaught")
    async def uncaught() -> None:
        await cairn.wait_for_event("never", timeout="30m")

    async with kit.engine(clock=clock) as engine:
        started = clock.now()
        run = await engine.start(timed)
        failing = await engine.start(uncaught)
        parked = await until(engine, run.run_id, "WAITING")
        await until(engine, failing.run_id, "WAITING")
        assert parked.wake_at == pytest.approx(started + 3600)
        clock.advance(1800)
        with pytest.raises(cairn.RunFailed) as info:
            await failing.result(timeout=WAIT)
        assert await run.status() == cairn.RunStatus.WAITING
        clock.advance(1800)
        message = await run.result(timeout=WAIT)
        [entry] = await engine.history(run.run_id)
    assert message.startswith("gave up:") and "'never'" in message
    assert info.value.error_type == "cairn.errors.EventTimeout"
    assert (entry.kind, entry.status) == ("event", "timeout")


async def test_wait_for_event__timeout_returns_default(kit: Kit) -> None:
    clock = VirtualClock()

    @kit.workflow("events.default")
    async def defaulted() -> list[Any]:
        late = await cairn.wait_for_event("late", timeout="5m", default={"ok": False})
        none = await cairn.wait_for_event("late", timeout=0, default=None)
        return [late, none]

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(defaulted)
        await until(engine, run.run_id, "WAITING")
        clock.advance(300)
        assert await run.result(timeout=WAIT) == [{"ok": False}, None]


async def test_wait_for_event__event_before_the_timeout_wins(kit: Kit) -> None:
    clock = VirtualClock()

    @kit.workflow("events.in_time")
    async def in_time() -> Any:
        return await cairn.wait_for_event("reply", timeout="1h", default="timed out")

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(in_time)
        await until(engine, run.run_id, "WAITING")
        clock.advance(3599)
        await run.send_event("reply", "on time")
        assert await run.result(timeout=WAIT) == "on time"


async def test_send_event__unknown_and_finished_runs(kit: Kit) -> None:
    @kit.workflow("events.quick")
    async def quick() -> str:
        return "done"

    async with kit.engine() as engine:
        run = await engine.start(quick)
        await run.result(timeout=WAIT)
        with pytest.raises(cairn.RunNotFound, match="'nobody'"):
            await engine.send_event("nobody", "e", 1)
        with pytest.raises(cairn.RunFinished, match=run.run_id):
            await engine.send_event(run.run_id, "e", 1)
        with pytest.raises(cairn.RunFinished):
            await run.send_event("e", 1)
        with pytest.raises(ValueError, match="event name"):
            await engine.send_event(run.run_id, "", 1)
        with pytest.raises(cairn.SerializationError, match="'e'"):
            await engine.send_event(run.run_id, "e", object())


async def test_client__send_event_and_bad_targets(kit: Kit) -> None:
    collect = _collector(kit, "events.client", "ping", 1)

    async with kit.engine() as engine:
        run = await engine.start(collect)
        await until(engine, run.run_id, "WAITING")

        def from_a_script() -> None:
            with cairn.Client(kit.url, registry=kit.registry) as client:
                with pytest.raises(cairn.RunNotFound):
                    client.send_event("nobody", "ping", 0)
                client.send_event(run.run_id, "ping", "pong", idempotency_key="once")
                client.send_event(run.run_id, "ping", "pong", idempotency_key="once")

        await asyncio.to_thread(from_a_script)
        assert await run.result(timeout=WAIT) == ["pong"]

        def after_the_end() -> None:
            with cairn.Client(kit.url, registry=kit.registry) as client:
                with pytest.raises(cairn.RunFinished):
                    client.send_event(run.run_id, "ping", "again")

        await asyncio.to_thread(after_the_end)


async def test_wait_for_event__sync_workflow_blocks(kit: Kit) -> None:
    @kit.workflow("events.sync")
    def sync_wait() -> Any:
        first = cairn.wait_for_event("go")
        second = cairn.wait_for_event("go", timeout=0, default="none left")
        return [first, second]

    async with kit.engine() as engine:
        run = await engine.start(sync_wait)
        await until(engine, run.run_id, "WAITING")
        await run.send_event("go", 42)
        assert await run.result(timeout=WAIT) == [42, "none left"]


async def test_wait_for_event__gathered_waits_on_two_names(kit: Kit) -> None:
    @kit.workflow("events.gather")
    async def both() -> list[Any]:
        return list(
            await asyncio.gather(cairn.wait_for_event("left"), cairn.wait_for_event("right"))
        )

    async with kit.engine() as engine:
        run = await engine.start(both)
        await until(engine, run.run_id, "WAITING")
        await run.send_event("right", "R")
        await until(engine, run.run_id, "WAITING")
        await run.send_event("left", "L")
        assert await run.result(timeout=WAIT) == ["L", "R"]


async def test_wait_for_event__bad_timeout_raises_value_error(kit: Kit) -> None:
    @kit.workflow("events.bad_timeout")
    async def bad() -> str:
        try:
            await cairn.wait_for_event("e", timeout="eventually")
        except ValueError as exc:
            return str(exc)
        return "waited"

    async with kit.engine() as engine:
        assert "'eventually'" in await (await engine.start(bad)).result(timeout=WAIT)


async def test_send_event__a_repeated_key_after_the_run_finished_is_the_same_delivery(
    kit: Kit,
) -> None:
    # A sender that retries (its first answer was lost) must not be told the run
    # finished when its first send is what finished it; a new key still is.
    collect = _collector(kit, "events.repeat_after_end", "ping", 1)

    async with kit.engine() as engine:
        run = await engine.start(collect)
        await until(engine, run.run_id, "WAITING")
        first = await engine.send_event(run.run_id, "ping", "pong", idempotency_key="once")
        assert first.awaited and not first.repeated
        assert await run.result(timeout=WAIT) == ["pong"]

        again = await engine.send_event(run.run_id, "ping", "pong", idempotency_key="once")
        assert again.repeated and not again.awaited
        assert again.status is cairn.RunStatus.COMPLETED
        assert again.note == (
            f"run {run.run_id} had event 'ping' with this idempotency_key already; "
            "nothing new is kept"
        )
        with pytest.raises(cairn.RunFinished):
            await engine.send_event(run.run_id, "ping", "pong", idempotency_key="twice")
        with pytest.raises(cairn.RunFinished):
            await engine.send_event(run.run_id, "ping", "pong")


async def test_send_event__a_repeated_key_to_a_waiting_run_is_the_same_delivery(
    kit: Kit,
) -> None:
    # A sender's retry (or two senders of one approval) while the run still waits: the
    # event is stored once, and the answer must say so rather than "sent and awaited",
    # nor wake the run for a message it will not find.
    collect = _collector(kit, "events.repeat_while_waiting", "approval", 2)

    async with kit.engine() as engine:
        run = await engine.start(collect)
        await until(engine, run.run_id, "WAITING")
        first = await engine.send_event(run.run_id, "approval", 1, idempotency_key="mail-1")
        assert first.awaited and not first.repeated
        async with asyncio.timeout(WAIT):  # the first wait took it; the second waits
            while len(await engine.history(run.run_id)) < 2:
                await asyncio.sleep(0.005)
        await until(engine, run.run_id, "WAITING")

        async with kit.engine(workers=0) as sender:  # no worker of its own to claim it
            again = await sender.send_event(run.run_id, "approval", 1, idempotency_key="mail-1")
            assert (await sender.control.record(run.run_id)).wake_at is None  # not woken
        assert again.repeated and not again.awaited
        assert again.status is cairn.RunStatus.WAITING
        assert again.note == (
            f"run {run.run_id} had event 'approval' with this idempotency_key already; "
            "nothing new is kept"
        )
        await engine.send_event(run.run_id, "approval", 2, idempotency_key="mail-2")
        assert await run.result(timeout=WAIT) == [1, 2]
