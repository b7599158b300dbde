"""Runs: creating, reading, finishing and parking (the Store contract, on both stores)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from cairn.store import LeaseLost, RunQuery, Store
from cairn.store.programs import claims, waits, workers
from cairn.store.programs import runs as run_ops
from cairn.store.records import Delivery

from .kit import T0, OpenStore, held, run_record, step_record


async def test_create_run__new_run_is_stored(store: Store) -> None:
    run = run_record("r1", args='{"args": [1], "kwargs": {}}')

    stored, created = await store.write(run_ops.create_run(run))

    assert created
    assert stored == run
    assert await store.read(run_ops.get_run("r1")) == run


async def test_create_run__existing_id_returns_the_stored_run(store: Store) -> None:
    first = run_record("r1", args='{"args": [1], "kwargs": {}}')
    await store.write(run_ops.create_run(first))

    stored, created = await store.write(
        run_ops.create_run(run_record("r1", args='{"args": [2], "kwargs": {}}'))
    )

    assert not created
    assert stored == first


async def test_create_run__racing_creators_make_one_run(open_store_at: OpenStore) -> None:
    stores = [await open_store_at() for _ in range(4)]
    attempts = [
        store.write(
            run_ops.create_run(run_record("same", args=f'{{"args": [{i}], "kwargs": {{}}}}'))
        )
        for i, store in enumerate(stores * 3)
    ]

    outcomes = await asyncio.gather(*attempts)

    assert sum(created for _, created in outcomes) == 1
    assert len({stored.args for stored, _ in outcomes}) == 1


async def test_create_run__many_at_once_each_report_their_own(store: Store) -> None:
    await store.write(run_ops.create_run(run_record("r3")))
    runs = [run_record(f"r{i}") for i in range(8)]

    outcomes = await asyncio.gather(*(store.write(run_ops.create_run(run)) for run in runs))

    assert [created for _, created in outcomes] == [i != 3 for i in range(8)]
    assert [stored.run_id for stored, _ in outcomes] == [f"r{i}" for i in range(8)]


async def test_get_run__unknown_id_is_none(store: Store) -> None:
    assert await store.read(run_ops.get_run("nope")) is None


async def test_list_runs__newest_first_a_page_at_a_time(store: Store) -> None:
    for i in range(5):
        await store.write(run_ops.create_run(run_record(f"r{i}", created_at=T0 + i)))

    first = await store.read(run_ops.list_runs(RunQuery(limit=2)))
    rest = await store.read(
        run_ops.list_runs(RunQuery(limit=10, cursor=(first[-1].created_at, first[-1].run_id)))
    )

    assert [r.run_id for r in first] == ["r4", "r3"]
    assert [r.run_id for r in rest] == ["r2", "r1", "r0"]


async def test_list_runs__filters_by_status_and_workflow(store: Store) -> None:
    await store.write(run_ops.create_run(run_record("a", workflow="one")))
    await store.write(run_ops.create_run(run_record("b", workflow="two")))
    await store.write(
        run_ops.create_run(run_record("c", workflow="two", status="RUNNING", owner="w"))
    )

    found = await store.read(run_ops.list_runs(RunQuery(status="PENDING", workflow="two")))

    assert [r.run_id for r in found] == ["b"]


async def test_list_runs__by_columns_newest_first_a_page_at_a_time(store: Store) -> None:
    # A column filter reads its value's entries in page order (they carry created_at).
    for i in range(6):
        await store.write(
            run_ops.create_run(
                run_record(f"r{i}", created_at=T0 + i, status="FAILED" if i % 2 else "PENDING")
            )
        )
        columns = {"customer": '"ann"' if i < 5 else '"bob"', "region": f'"{i % 3}"'}
        await store.write(
            run_ops.update_run_meta(f"r{i}", columns=columns, progress=None, now=T0 + i)
        )
    await store.write(
        run_ops.update_run_meta("nope", columns={"customer": '"ann"'}, progress=None, now=T0)
    )
    ann = {"customer": '"ann"'}

    first = await store.read(run_ops.list_runs(RunQuery(columns=ann, limit=2)))
    rest = await store.read(
        run_ops.list_runs(
            RunQuery(columns=ann, limit=10, cursor=(first[-1].created_at, first[-1].run_id))
        )
    )
    failed = await store.read(run_ops.list_runs(RunQuery(columns=ann, status="FAILED")))
    both = await store.read(run_ops.list_runs(RunQuery(columns={**ann, "region": '"1"'})))
    since = await store.read(run_ops.list_runs(RunQuery(columns=ann, since=T0 + 2)))

    assert [r.run_id for r in first] == ["r4", "r3"]
    assert [r.run_id for r in rest] == ["r2", "r1", "r0"]
    assert [r.run_id for r in failed] == ["r3", "r1"]
    assert [r.run_id for r in both] == ["r4", "r1"]
    assert [r.run_id for r in since] == ["r4", "r3", "r2"]
    assert await store.read(run_ops.get_run("nope")) is None


async def test_finish_run__owner_ends_and_releases_it(store: Store) -> None:
    await store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))

    await store.write(
        run_ops.finish_run("r1", held("w1"), "COMPLETED", result="42", error=None, now=T0 + 5)
    )

    run = await store.read(run_ops.get_run("r1"))
    assert run is not None
    assert (run.status, run.result, run.owner, run.finished_at) == ("COMPLETED", "42", None, T0 + 5)


async def test_finish_run__non_owner_raises_lease_lost_and_changes_nothing(store: Store) -> None:
    await store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))

    with pytest.raises(LeaseLost):
        await store.write(
            run_ops.finish_run("r1", held("w2"), "COMPLETED", result="42", error=None, now=T0 + 5)
        )

    run = await store.read(run_ops.get_run("r1"))
    assert run is not None
    assert (run.status, run.owner) == ("RUNNING", "w1")


async def test_finish_run__many_at_once_tell_parents_and_fence_each(store: Store) -> None:
    await store.write(run_ops.create_run(run_record("parent", status="RUNNING", owner="w1")))
    await store.write(
        run_ops.park_run(
            "parent", held("w1"), "WAITING", wake_at=None, waiting_for="children", now=T0
        )
    )
    for i in range(6):
        await store.write(
            run_ops.create_run(
                run_record(f"c{i}", status="RUNNING", owner="w1", parent_id="parent")
            )
        )

    outcomes = await asyncio.gather(
        *(
            store.write(
                run_ops.finish_run(
                    f"c{i}",
                    held("w1" if i != 2 else "w9"),
                    "COMPLETED",
                    result=str(i),
                    error=None,
                    now=T0 + 1,
                )
            )
            for i in range(6)
        ),
        return_exceptions=True,
    )

    assert [type(o).__name__ for o in outcomes] == ["NoneType"] * 2 + ["LeaseLost"] + [
        "NoneType"
    ] * 3
    parent = await store.read(run_ops.get_run("parent"))
    assert parent is not None and parent.wake_at == T0 + 1  # woken by its children
    claimed = await store.write(claims.claim("w1", 5, now=T0 + 2, stale=True))
    assert [run.run_id for run in claimed.runs] == ["parent"]
    told = {}
    for i in range(6):
        payload = await store.write(
            waits.consume_message(held("w1", 2), f"child:c{i}", step_record("parent", i))
        )
        told[i] = None if payload is None else json.loads(payload)["result"]
    assert told == {0: "0", 1: "1", 2: None, 3: "3", 4: "4", 5: "5"}


async def test_finish_run__parent_ending_cancels_attached_children(store: Store) -> None:
    await store.write(run_ops.create_run(run_record("p", status="RUNNING", owner="w1")))
    await store.write(
        run_ops.create_run(run_record("kid", status="RUNNING", owner="w1", parent_id="p"))
    )
    await store.write(
        run_ops.park_run("kid", held("w1"), "SLEEPING", wake_at=T0 + 3600, waiting_for=None, now=T0)
    )
    await store.write(
        run_ops.create_run(run_record("free", status="PENDING", parent_id="p", detached=1))
    )

    await store.write(
        run_ops.finish_run("p", held("w1"), "COMPLETED", result=None, error=None, now=T0 + 1)
    )

    kid = await store.read(run_ops.get_run("kid"))
    free = await store.read(run_ops.get_run("free"))
    assert kid is not None and free is not None
    assert (kid.control, kid.wake_at) == ("cancel", T0 + 1)  # due now, to replay into it
    assert free.control is None


async def test_park_run__sleeping_run_is_released_until_its_wake_time(store: Store) -> None:
    await store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))

    await store.write(
        run_ops.park_run("r1", held("w1"), "SLEEPING", wake_at=T0 + 60, waiting_for=None, now=T0)
    )

    run = await store.read(run_ops.get_run("r1"))
    assert run is not None
    assert (run.status, run.owner, run.wake_at) == ("SLEEPING", None, T0 + 60)
    assert await store.read(workers.next_wake()) == T0 + 60


async def test_park_run__waiting_run_with_a_queued_message_is_due_at_once(store: Store) -> None:
    await store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))
    status = await store.write(
        waits.send_message(
            "r1", "approval", json.dumps({"ok": True}), idempotency_key=None, now=T0 + 1
        )
    )

    await store.write(
        run_ops.park_run(
            "r1",
            held("w1"),
            "WAITING",
            wake_at=None,
            waiting_for="approval",
            now=T0 + 2,
            waits_on=["approval"],
        )
    )

    run = await store.read(run_ops.get_run("r1"))
    assert status == Delivery("RUNNING")
    assert run is not None
    assert (run.status, run.wake_at) == ("WAITING", T0 + 2)


async def test_park_run__non_owner_raises_lease_lost(store: Store) -> None:
    await store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))

    with pytest.raises(LeaseLost):
        await store.write(
            run_ops.park_run(
                "r1", held("w2"), "SLEEPING", wake_at=T0 + 60, waiting_for=None, now=T0
            )
        )


async def test_send_message__wakes_a_waiting_run_from_another_store(
    open_store_at: OpenStore,
) -> None:
    worker, client = await open_store_at(), await open_store_at()
    await worker.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await worker.write(
        run_ops.park_run(
            "r1", held("w1"), "WAITING", wake_at=None, waiting_for="go", now=T0, waits_on=["go"]
        )
    )

    status = await client.write(
        waits.send_message("r1", "go", "1", idempotency_key="k", now=T0 + 1)
    )
    again = await client.write(waits.send_message("r1", "go", "1", idempotency_key="k", now=T0 + 2))

    run = await worker.read(run_ops.get_run("r1"))
    assert status == Delivery("WAITING", True, ("go",))
    assert again == Delivery("WAITING", repeated=True)  # a retry: nothing new, no wake-up
    assert run is not None and run.wake_at == T0 + 1
    claimed = await worker.write(claims.claim("w1", 1, now=T0 + 3, stale=True))
    assert [r.run_id for r in claimed.runs] == ["r1"]
    first = await worker.write(waits.consume_message(held("w1", 2), "go", step_record("r1", 1)))
    second = await worker.write(waits.consume_message(held("w1", 2), "go", step_record("r1", 2)))
    assert (first, second) == ("1", None)  # the idempotency key stored it once


async def test_finish_run__alone_many_at_once_are_each_fenced(store: Store) -> None:
    for i in range(6):
        await store.write(run_ops.create_run(run_record(f"r{i}", status="RUNNING", owner="w1")))

    outcomes = await asyncio.gather(
        *(
            store.write(
                run_ops.finish_run(
                    f"r{i}",
                    held("w1" if i != 4 else "w2"),
                    "COMPLETED",
                    result=str(i),
                    error=None,
                    now=T0 + i,
                    alone=True,
                )
            )
            for i in range(6)
        ),
        return_exceptions=True,
    )

    assert [isinstance(o, LeaseLost) for o in outcomes] == [i == 4 for i in range(6)]
    for i in range(6):
        run = await store.read(run_ops.get_run(f"r{i}"))
        assert run is not None
        expected = ("RUNNING", None, None) if i == 4 else ("COMPLETED", str(i), T0 + i)
        assert (run.status, run.result, run.finished_at) == expected


@pytest.mark.parametrize("together", [False, True], ids=["alone", "group-commit"])
async def test_finish_alone__as_finish_run_alone_and_fenced(store: Store, together: bool) -> None:
    # core/common_runs.py's end of a run: one fenced statement (SQLite runs it without its
    # program when it joins a batch), the same row as finish_run(..., alone=True).
    for i in range(4):
        await store.write(run_ops.create_run(run_record(f"r{i}", status="RUNNING", owner="w1")))

    def finish(i: int) -> Any:
        lease = held("w1" if i != 2 else "w2")
        return store.write(run_ops.finish_alone(f"r{i}", lease, "COMPLETED", str(i), T0 + i))

    if together:
        outcomes = await asyncio.gather(*(finish(i) for i in range(4)), return_exceptions=True)
    else:
        outcomes = []
        for i in range(4):
            try:
                outcomes.append(await finish(i))
            except LeaseLost as exc:
                outcomes.append(exc)

    assert [isinstance(o, LeaseLost) for o in outcomes] == [i == 2 for i in range(4)]
    for i in range(4):
        run = await store.read(run_ops.get_run(f"r{i}"))
        assert run is not None
        expected = ("RUNNING", None, None, "w1") if i == 2 else ("COMPLETED", str(i), T0 + i, None)
        assert (run.status, run.result, run.finished_at, run.owner) == expected
