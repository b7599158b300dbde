"""Event triggers on both stores: `@workflow(on=)`, `engine.emit` and `cairn.emit` in runs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import cairn
from cairn.store.programs import schedules

from .kit import WAIT, Gate, Kit


async def test_emit__starts_every_subscriber_with_the_payload(kit: Kit) -> None:
    @kit.workflow("trig.bill", on="order.created")
    async def bill(order: dict[str, Any]) -> str:
        return f"billed {order['id']}"

    @kit.workflow("trig.ship", on="order.created")
    def ship(order: dict[str, Any]) -> str:  # sync workflows subscribe too
        return f"shipped {order['id']}"

    @kit.workflow("trig.other", on="order.cancelled")
    async def other(order: dict[str, Any]) -> None:
        raise AssertionError("not subscribed to order.created")

    async with kit.engine() as engine:
        first = await engine.emit("order.created", {"id": "o-1"})
        second = await engine.emit("order.created", {"id": "o-2"})
        results = [await h.result(timeout=WAIT) for h in [*first, *second]]
        workflows = {run.run_id: run.workflow for run in await engine.list_runs()}
    assert results == ["billed o-1", "shipped o-1", "billed o-2", "shipped o-2"]
    assert [workflows[h.run_id] for h in first] == ["trig.bill", "trig.ship"]
    assert len(set(workflows)) == 4  # without a key every emit starts new runs


async def test_emit__a_key_is_remembered_per_event_type(kit: Kit) -> None:
    calls: list[str] = []

    @kit.workflow("trig.welcome", on="user.signed_up")
    async def welcome(user: str) -> str:
        calls.append(user)
        return f"welcome {user}"

    @kit.workflow("trig.audit", on="user.deleted")
    async def audit(user: str) -> str:
        return f"audit {user}"

    async with kit.engine() as engine:
        once = await engine.emit("user.signed_up", "ada", key="u-1")
        again = await engine.emit("user.signed_up", "ignored", key="u-1")
        assert again == once
        assert [h.run_id for h in once] == ["emit:user.signed_up:u-1:trig.welcome"]
        assert await once[0].result(timeout=WAIT) == "welcome ada"
        # The same key under another event type is another emit.
        [deleted] = await engine.emit("user.deleted", "ada", key="u-1")
        assert await deleted.result(timeout=WAIT) == "audit ada"
        # Concurrent emits of one key start one run.
        handles = await asyncio.gather(
            *(engine.emit("user.signed_up", f"grace-{n}", key="u-2") for n in range(5))
        )
        assert len({h.run_id for group in handles for h in group}) == 1
        await handles[0][0].result(timeout=WAIT)
    assert sorted(calls)[0] == "ada" and len(calls) == 2


async def test_emit__with_no_subscriber_returns_empty_and_remembers_nothing(kit: Kit) -> None:
    async with kit.engine() as engine:
        assert await engine.emit("nobody.listens", {"x": 1}, key="k-1") == []
        assert list(await engine.list_runs()) == []

    later = kit.fresh()

    @later.workflow("trig.late", on="nobody.listens")
    async def late(payload: dict[str, int]) -> int:
        return payload["x"]

    async with later.engine() as engine:
        [handle] = await engine.emit("nobody.listens", {"x": 2}, key="k-1")
        assert await handle.result(timeout=WAIT) == 2


async def test_emit__subscriptions_are_stored_for_emitters_without_the_code(kit: Kit) -> None:
    @kit.workflow("trig.stored", on="invoice.paid")
    async def stored(invoice: str) -> str:
        return f"paid {invoice}"

    async with kit.engine() as worker:
        emitter = kit.fresh()  # an empty registry: like a Client or the CLI
        async with emitter.engine(workers=0) as client:
            [handle] = await client.emit("invoice.paid", "i-9", key="i-9")
        assert handle.run_id == "emit:invoice.paid:i-9:trig.stored"
        assert await (await worker.get(handle.run_id)).result(timeout=WAIT) == "paid i-9"
        subscriptions = await worker.store.read(schedules.list_subscriptions())
    assert [(s.event_type, s.workflow) for s in subscriptions] == [("invoice.paid", "trig.stored")]


async def test_emit__code_that_drops_on_unsubscribes(kit: Kit) -> None:
    @kit.workflow("trig.fickle", on="thing.happened")
    async def fickle(payload: Any) -> None:
        return None

    async with kit.engine():
        pass
    changed = kit.fresh()

    @changed.workflow("trig.fickle")
    async def fickle_now(payload: Any) -> None:
        return None

    async with changed.engine() as engine:
        assert await engine.store.read(schedules.list_subscriptions()) == []
        async with kit.fresh().engine(workers=0) as client:
            assert await client.emit("thing.happened", 1) == []


async def test_emit__bad_input_is_refused_before_anything_is_stored(kit: Kit) -> None:
    @kit.workflow("trig.any", on="any.thing")
    async def anything(payload: Any) -> None:
        return None

    async with kit.engine(workers=0) as engine:
        with pytest.raises(ValueError, match="event type must be a non-empty string"):
            await engine.emit("", 1)
        with pytest.raises(ValueError, match=r"emit key for 'any\.thing'"):
            await engine.emit("any.thing", 1, key="")
        with pytest.raises(cairn.SerializationError, match=r"payload of event 'any\.thing'"):
            await engine.emit("any.thing", object())
        assert list(await engine.list_runs()) == []


async def test_cairn_emit__outside_a_run_raises_not_in_run() -> None:
    with pytest.raises(cairn.NotInRun, match=r"engine\.emit"):
        await cairn.emit("x.y", 1)


async def test_cairn_emit__durable_and_replayed_with_the_same_run_ids(kit: Kit, gate: Gate) -> None:
    @kit.workflow("trig.child", on="fan.out")
    async def child(n: int) -> int:
        return n * 10

    @kit.step("trig.hold")
    async def hold() -> str:
        return await gate()

    @kit.workflow("trig.parent")
    async def parent() -> list[str]:
        first = await cairn.emit("fan.out", 1)
        keyed = await cairn.emit("fan.out", 2, key="two")
        none = await cairn.emit("fan.nobody", 3)
        await hold()
        return [*first, *keyed, *none]

    async with kit.engine() as engine:
        run = await engine.start(parent, run_id="parent-1")
        await gate.hold(engine)  # the engine closes with the run inside `hold`
    async with kit.engine() as engine:
        ids = await (await engine.get("parent-1")).result(timeout=WAIT)
        assert ids[1] == "emit:fan.out:two:trig.child" and len(ids) == 2
        assert [await (await engine.get(i)).result(timeout=WAIT) for i in ids] == [10, 20]
        children = [r for r in await engine.list_runs(workflow="trig.child")]
        history = await engine.history(run.run_id)
    assert len(children) == 2  # the replay started nothing again
    emits = [(e.kind, e.key, e.name, e.result) for e in history if e.kind == "emit"]
    assert emits == [
        ("emit", "~emit:fan.out#1", "fan.out", [ids[0]]),
        ("emit", "~emit:fan.out#2", "fan.out", [ids[1]]),
        ("emit", "~emit:fan.nobody#1", "fan.nobody", []),
    ]
    assert gate.calls == 2


async def test_cairn_emit__from_a_sync_workflow(kit: Kit) -> None:
    @kit.workflow("trig.sync_child", on="sync.event")
    def sync_child(word: str) -> str:
        return word.upper()

    @kit.workflow("trig.sync_parent")
    def sync_parent() -> list[str]:
        ids: list[str] = cairn.emit("sync.event", "hi", key="once")  # type: ignore[assignment]
        return ids

    async with kit.engine() as engine:
        ids = await (await engine.start(sync_parent)).result(timeout=WAIT)
        assert ids == ["emit:sync.event:once:trig.sync_child"]
        assert await (await engine.get(ids[0])).result(timeout=WAIT) == "HI"


async def test_cairn_emit__keys_with_separators_do_not_collide(kit: Kit) -> None:
    @kit.workflow("trig.sep", on="a")
    async def sep(payload: str) -> str:
        return payload

    @kit.workflow("trig.sep2", on="a:b")
    async def sep2(payload: str) -> str:
        return payload

    async with kit.engine() as engine:
        [one] = await engine.emit("a", "first", key="b:c")
        [two] = await engine.emit("a:b", "second", key="c")
        assert one.run_id != two.run_id
        assert one.run_id == "emit:a:b%3Ac:trig.sep"
        assert [await one.result(timeout=WAIT), await two.result(timeout=WAIT)] == [
            "first",
            "second",
        ]
