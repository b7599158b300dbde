"""A waiting run wakes only for a message on a channel its open waits consume."""

from __future__ import annotations

import json

from cairn.store import Store
from cairn.store.programs import claims, waits
from cairn.store.programs import runs as run_ops
from cairn.store.records import Delivery, HookRecord, TaskRecord

from .kit import T0, OpenStore, held, run_record, step_record


async def waiting(
    store: Store,
    run_id: str,
    *channels: str,
    wake_at: float | None = None,
    hook: HookRecord | None = None,
    task: TaskRecord | None = None,
) -> None:
    """`run_id` held by w1 (which creates `hook` or `task`), then parked WAITING on `channels`."""
    await store.write(run_ops.create_run(run_record(run_id, status="RUNNING", owner="w1")))
    if hook is not None:
        await store.write(waits.create_hook(held("w1"), step_record(run_id, 1), hook))
    if task is not None:
        await store.write(waits.create_task(held("w1"), step_record(run_id, 1), task))
    await store.write(
        run_ops.park_run(
            run_id,
            held("w1"),
            "WAITING",
            wake_at=wake_at,
            waiting_for="event:approval",
            now=T0,
            waits_on=list(channels),
        )
    )


async def test_send_message__on_a_channel_no_wait_takes_does_not_wake_the_run(
    store: Store,
) -> None:
    await waiting(store, "r1", "event:approval", wake_at=T0 + 3600)

    sent = await store.write(
        waits.send_message("r1", "event:aproval", "1", idempotency_key=None, now=T0 + 1)
    )

    assert sent == Delivery("WAITING", False, ("event:approval",))
    run = await store.read(run_ops.get_run("r1"))
    assert run is not None and run.wake_at == T0 + 3600  # its own timeout, not now
    claimed = await store.write(claims.claim("w1", 5, now=T0 + 2, stale=True))
    assert claimed.runs == []


async def test_send_message__on_a_channel_a_wait_takes_wakes_the_run(store: Store) -> None:
    await waiting(store, "r1", "event:left", "event:right")

    sent = await store.write(
        waits.send_message("r1", "event:right", "R", idempotency_key=None, now=T0 + 1)
    )

    assert sent == Delivery("WAITING", True, ("event:left", "event:right"))
    run = await store.read(run_ops.get_run("r1"))
    assert run is not None and run.wake_at == T0 + 1
    claimed = await store.write(claims.claim("w1", 5, now=T0 + 2, stale=True))
    assert [r.run_id for r in claimed.runs] == ["r1"]
    taken = await store.write(
        waits.consume_message(held("w1", 2), "event:right", step_record("r1", 1))
    )
    assert taken == "R"


async def test_send_message__from_another_store_wakes_only_for_its_channel(
    open_store_at: OpenStore,
) -> None:
    worker, client = await open_store_at(), await open_store_at()
    await waiting(worker, "r1", "event:go")

    other = await client.write(
        waits.send_message("r1", "event:stop", "1", idempotency_key=None, now=T0)
    )
    awaited = await client.write(
        waits.send_message("r1", "event:go", "2", idempotency_key=None, now=T0)
    )

    assert (other.woken, awaited.woken) == (False, True)  # type: ignore[union-attr]
    claimed = await worker.write(claims.claim("w1", 5, now=T0 + 1, stale=True))
    assert [r.run_id for r in claimed.runs] == ["r1"]


async def test_send_message__to_a_run_not_waiting_is_kept_without_a_wake(store: Store) -> None:
    await store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))

    sent = await store.write(waits.send_message("r1", "event:x", "1", idempotency_key=None, now=T0))

    assert sent == Delivery("RUNNING")
    assert (
        await store.write(waits.send_message("nope", "event:x", "1", idempotency_key=None, now=T0))
        is None
    )


async def test_park_run__a_queued_message_only_its_waits_take_makes_it_due(store: Store) -> None:
    for run_id in ("other", "mine"):
        await store.write(run_ops.create_run(run_record(run_id, status="RUNNING", owner="w1")))
        await store.write(
            waits.send_message(run_id, "event:typo", "1", idempotency_key=None, now=T0)
        )
    await store.write(waits.send_message("mine", "event:b", "2", idempotency_key=None, now=T0))

    for run_id in ("other", "mine"):
        await store.write(
            run_ops.park_run(
                run_id,
                held("w1"),
                "WAITING",
                wake_at=T0 + 60,
                waiting_for="event:a",
                now=T0 + 1,
                waits_on=["event:a", "event:b"],
            )
        )

    other, mine = (
        await store.read(run_ops.get_run("other")),
        await store.read(run_ops.get_run("mine")),
    )
    assert other is not None and mine is not None
    assert (other.wake_at, mine.wake_at) == (T0 + 60, T0 + 1)
    assert json.loads(other.waits_on or "null") == ["event:a", "event:b"]


async def test_park_run__without_channels_any_message_wakes_it(store: Store) -> None:
    # A run parked by code that does not say what its waits take (before schema 14).
    await store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await store.write(
        run_ops.park_run("r1", held("w1"), "WAITING", wake_at=None, waiting_for=None, now=T0)
    )

    sent = await store.write(
        waits.send_message("r1", "event:anything", "1", idempotency_key=None, now=T0)
    )

    assert sent == Delivery("WAITING", True, None)


async def test_finish_run__a_child_wakes_its_parent_only_if_it_waits_for_that_child(
    store: Store,
) -> None:
    for parent, channel in (("p1", "child:c1"), ("p2", "event:go")):
        await waiting(store, parent, channel)
        child = "c1" if parent == "p1" else "c2"
        await store.write(
            run_ops.create_run(run_record(child, status="RUNNING", owner="w1", parent_id=parent))
        )
        await store.write(
            run_ops.finish_run(child, held("w1"), "COMPLETED", result="1", error=None, now=T0 + 1)
        )

    p1, p2 = await store.read(run_ops.get_run("p1")), await store.read(run_ops.get_run("p2"))
    assert p1 is not None and p2 is not None
    assert (p1.wake_at, p2.wake_at) == (T0 + 1, None)
    # p2's child told it all the same: once p2 goes on, its wait for the child takes it.
    await store.write(waits.send_message("p2", "event:go", "1", idempotency_key=None, now=T0 + 2))
    claimed = await store.write(claims.claim("w1", 5, now=T0 + 3, stale=True))
    assert [r.run_id for r in claimed.runs] == ["p1", "p2"]
    told = await store.write(waits.consume_message(held("w1", 2), "child:c2", step_record("p2", 1)))
    assert told is not None and json.loads(told)["result"] == "1"


async def test_hooks_and_tasks__wake_the_run_only_while_it_waits_for_them(store: Store) -> None:
    hook = HookRecord(token="digest", run_id="h", name="cb", created_at=T0)
    task = TaskRecord("t1", "t", "review", "Review", None, None, None, None, "open", T0)
    await waiting(store, "h", "event:go", hook=hook)  # a hook it has not awaited yet
    await waiting(store, "t", "task:t1", task=task)

    assert await store.write(waits.resume_hook("digest", "1", now=T0 + 1)) == "h"
    assert await store.write(waits.submit_task("t1", "{}", by="ann", now=T0 + 1)) is not None

    h, t = await store.read(run_ops.get_run("h")), await store.read(run_ops.get_run("t"))
    assert h is not None and t is not None
    assert (h.wake_at, t.wake_at) == (None, T0 + 1)
