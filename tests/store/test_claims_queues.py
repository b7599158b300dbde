"""Queue limits and a worker's queues hold on every claim path, not only for new runs.

A run comes to be claimed in one of seven ways: new (PENDING), woken by its timer, by an
event, by its child's end, retried, resumed after a pause, or recovered from a dead
worker. Each must pass its queue's limits and go only to a worker that serves its queue.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from cairn.store import Store
from cairn.store.programs import claims as claim_ops
from cairn.store.programs import control, queues, waits, workers
from cairn.store.programs import runs as run_ops
from cairn.store.records import QueueRecord

from .kit import T0, execute, held, run_record, worker_record

LATER = T0 + 10  # when the claims below look: every run set up is due by then

# Puts run "r" of queue "pq" in a claimable state by one path (the runs it needs on the way
# belong to worker "maker", which is alive and serves no claim here).
Setup = Callable[[Store], Awaitable[None]]


async def _parked(store: Store, status: str, wake_at: float | None, **options: object) -> None:
    await store.write(
        run_ops.create_run(run_record("r", status="RUNNING", owner="maker", queue="pq"))
    )
    await store.write(
        run_ops.park_run(
            "r", held("maker"), status, wake_at=wake_at, waiting_for="something", now=T0, **options
        )
    )


async def pending(store: Store) -> None:
    await store.write(run_ops.create_run(run_record("r", queue="pq")))


async def woken_by_timer(store: Store) -> None:
    await _parked(store, "SLEEPING", T0)


async def woken_by_event(store: Store) -> None:
    await _parked(store, "WAITING", None, waits_on=["event:go"])
    await store.write(waits.send_message("r", "event:go", '"now"', idempotency_key=None, now=T0))


async def woken_by_child(store: Store) -> None:
    await _parked(store, "WAITING", None, waits_on=["child:kid"])
    await store.write(
        run_ops.create_run(run_record("kid", status="RUNNING", owner="maker", parent_id="r"))
    )
    await store.write(
        run_ops.finish_run("kid", held("maker"), "COMPLETED", result="1", error=None, now=T0)
    )


async def retried(store: Store) -> None:
    await store.write(
        run_ops.create_run(run_record("r", status="RUNNING", owner="maker", queue="pq"))
    )
    await store.write(
        run_ops.finish_run("r", held("maker"), "FAILED", result=None, error="{}", now=T0)
    )
    assert await store.write(control.retry_run("r", now=T0))


async def resumed(store: Store) -> None:
    await _parked(store, "SLEEPING", T0 + 3600)
    assert await store.write(control.control_run("r", "pause", now=T0)) == "PAUSED"
    assert await store.write(control.control_run("r", "resume", now=T0)) == "WAITING"


async def recovered(store: Store) -> None:
    # Its owner never registered (or was expired): dead, so the run is an orphan.
    await store.write(
        run_ops.create_run(run_record("r", status="RUNNING", owner="gone", queue="pq"))
    )


PATHS = [pending, woken_by_timer, woken_by_event, woken_by_child, retried, resumed, recovered]
# A recovered run is RUNNING all along: it holds its place in the queue's concurrency and
# its partition's while its owner is dead, so only the claimer's own limit can hold it.
STARTING = [path for path in PATHS if path is not recovered]


async def _workers(store: Store, *names: str) -> None:
    for name in ("maker", *names):
        await store.write(workers.register_worker(worker_record(name)))


async def _claimed(store: Store, worker: str, **options: object) -> list[str]:
    claimed = await store.write(claim_ops.claim(worker, 10, now=LATER, stale=True, **options))  # type: ignore[arg-type]
    return [run.run_id for run in claimed.runs]


async def _waiting_for(store: Store, run_id: str) -> str | None:
    run = await store.read(run_ops.get_run(run_id))
    assert run is not None and run.owner in (None, "gone")  # not claimed (an orphan's is dead)
    return run.waiting_for


@pytest.mark.parametrize("path", STARTING, ids=lambda path: path.__name__)
async def test_claim__a_full_queue_holds_a_run_back_on_every_path(
    store: Store, path: Setup
) -> None:
    await _workers(store, "busy", "w2")
    await store.write(queues.update_queue(QueueRecord("pq", concurrency=1), now=T0))
    await path(store)
    await store.write(
        run_ops.create_run(run_record("holder", status="RUNNING", owner="busy", queue="pq"))
    )

    while_full = await _claimed(store, "w2")
    why = await _waiting_for(store, "r")
    await store.write(
        run_ops.finish_run("holder", held("busy"), "COMPLETED", result=None, error=None, now=T0)
    )
    once_free = await _claimed(store, "w2")

    assert while_full == []
    assert why == "queue 'pq': concurrency limit 1 reached"
    assert once_free == ["r"]


@pytest.mark.parametrize("path", PATHS, ids=lambda path: path.__name__)
async def test_claim__a_worker_at_its_per_worker_limit_leaves_the_run_to_another(
    store: Store, path: Setup
) -> None:
    await _workers(store, "w2", "w3")
    await store.write(queues.update_queue(QueueRecord("pq", per_worker=1), now=T0))
    await path(store)
    await store.write(
        run_ops.create_run(run_record("mine", status="RUNNING", owner="w2", queue="pq"))
    )

    by_w2 = await _claimed(store, "w2")
    why = await _waiting_for(store, "r")
    by_w3 = await _claimed(store, "w3")

    assert by_w2 == []
    assert why == "queue 'pq': per-worker limit 1 reached"
    assert by_w3 == ["r"]


@pytest.mark.parametrize("path", STARTING, ids=lambda path: path.__name__)
async def test_claim__a_full_partition_holds_its_run_back_on_every_path(
    store: Store, store_url: str, path: Setup
) -> None:
    await _workers(store, "busy", "w2")
    await store.write(queues.update_queue(QueueRecord("pq", partition_concurrency=1), now=T0))
    await path(store)
    execute(store_url, "UPDATE runs SET partition_key = 'a' WHERE run_id = 'r'")
    await store.write(
        run_ops.create_run(
            run_record("holder", status="RUNNING", owner="busy", queue="pq", partition_key="a")
        )
    )
    await store.write(run_ops.create_run(run_record("other", queue="pq", partition_key="b")))

    claimed = await _claimed(store, "w2")
    why = await _waiting_for(store, "r")

    assert claimed == ["other"]
    assert why == "queue 'pq': partition 'a' limit 1 reached"


@pytest.mark.parametrize("path", PATHS, ids=lambda path: path.__name__)
async def test_claim__a_worker_takes_a_run_only_if_it_serves_the_runs_queue(
    store: Store, path: Setup
) -> None:
    await _workers(store, "w2", "w3")
    await path(store)

    by_other = await _claimed(store, "w2", queues=["other"])
    by_pq = await _claimed(store, "w3", queues=["other", "pq"])

    assert by_other == []
    assert by_pq == ["r"]


async def test_claim__a_full_queues_woken_runs_leave_the_room_to_others(store: Store) -> None:
    await _workers(store, "busy", "w2")
    await store.write(queues.update_queue(QueueRecord("pq", concurrency=1), now=T0))
    await store.write(
        run_ops.create_run(run_record("holder", status="RUNNING", owner="busy", queue="pq"))
    )
    # Due first, three runs of the full queue; behind them one on no queue, one on another.
    for i, (run_id, queue) in enumerate(
        [("pq1", "pq"), ("pq2", "pq"), ("pq3", "pq"), ("free", None), ("q2", "q2")]
    ):
        await store.write(
            run_ops.create_run(run_record(run_id, status="RUNNING", owner="maker", queue=queue))
        )
        await store.write(
            run_ops.park_run(
                run_id, held("maker"), "SLEEPING", wake_at=T0 + i, waiting_for=None, now=T0
            )
        )

    claimed = await store.write(claim_ops.claim("w2", 2, now=LATER, stale=True))

    assert [run.run_id for run in claimed.runs] == ["free", "q2"]


async def test_claim__a_waking_run_is_no_new_start_for_the_rate(store: Store) -> None:
    await _workers(store)
    await store.write(
        queues.update_queue(QueueRecord("pq", rate_count=1, rate_period=60.0), now=T0)
    )
    await woken_by_timer(store)  # "r" started at T0: the one start the rate allows a minute
    await store.write(run_ops.create_run(run_record("new", queue="pq")))

    claimed = await _claimed(store, "w2")
    why = await _waiting_for(store, "new")

    assert claimed == ["r"]
    assert why == "queue 'pq': rate limit 1/60s reached"
