"""Claims: due runs and orphans go to exactly one worker; poison after max_recoveries."""

from __future__ import annotations

import asyncio
import json

import pytest

from cairn.store import LeaseLost, Store
from cairn.store.programs import claims, journal, queues, workers
from cairn.store.programs import runs as run_ops
from cairn.store.records import Lease, QueueRecord

from .kit import (
    LEASE,
    T0,
    OpenStore,
    age_heartbeat,
    attempt_record,
    held,
    run_record,
    step_record,
    worker_record,
)


async def test_claim_runs__takes_due_pending_runs_by_priority(store: Store) -> None:
    await store.write(run_ops.create_run(run_record("low", priority=5)))
    await store.write(run_ops.create_run(run_record("high", priority=0, created_at=T0 + 1)))
    await store.write(run_ops.create_run(run_record("later", wake_at=T0 + 60)))

    claimed = await store.write(claims.claim("w1", 10, now=T0, stale=True))

    assert [run.run_id for run in claimed.runs] == ["high", "low"]
    assert claimed.poisoned == {}
    run = claimed.runs[0]
    # Created after the claim read its clock (another process's start, seen by the claim's
    # query): it starts when it was created, never before.
    assert (run.status, run.owner, run.attempt, run.started_at) == ("RUNNING", "w1", 1, T0 + 1)
    assert claimed.runs[1].started_at == T0


async def test_claim_runs__takes_no_more_than_the_limit(store: Store) -> None:
    for i in range(5):
        await store.write(run_ops.create_run(run_record(f"r{i}", created_at=T0 + i)))

    first = await store.write(claims.claim("w1", 2, now=T0, stale=True))
    rest = await store.write(claims.claim("w1", 10, now=T0, stale=True))
    none = await store.write(claims.claim("w1", 0, now=T0, stale=True))

    assert [run.run_id for run in first.runs] == ["r0", "r1"]
    assert [run.run_id for run in rest.runs] == ["r2", "r3", "r4"]
    assert none.runs == []


async def test_claim_runs__wakes_a_sleeper_without_a_new_attempt(store: Store) -> None:
    await store.write(workers.register_worker(worker_record("w1")))
    await store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await store.write(
        run_ops.park_run("r1", held("w1"), "SLEEPING", wake_at=T0 + 60, waiting_for=None, now=T0)
    )

    early = await store.write(claims.claim("w2", 10, now=T0 + 59, stale=True))
    due = await store.write(claims.claim("w2", 10, now=T0 + 60, stale=True))

    assert early.runs == []
    assert [(run.run_id, run.attempt, run.owner) for run in due.runs] == [("r1", 1, "w2")]


async def test_claim_runs__never_hands_a_run_to_two_claimers(open_store_at: OpenStore) -> None:
    stores = [await open_store_at() for _ in range(6)]
    for i in range(12):
        await stores[0].write(workers.register_worker(worker_record(f"w{i}")))
    for i in range(60):
        await stores[0].write(run_ops.create_run(run_record(f"r{i:02}", created_at=T0 + i)))

    async def claimer(store: Store, worker: str) -> list[str]:
        taken: list[str] = []
        while True:
            claimed = await store.write(claims.claim(worker, 3, now=T0 + 100, stale=True))
            if not claimed.runs:
                return taken
            taken += [run.run_id for run in claimed.runs]

    # Two claimers per store and six stores: concurrent transactions on one database.
    results = await asyncio.gather(*(claimer(store, f"w{i}") for i, store in enumerate(stores * 2)))

    taken = [run_id for result in results for run_id in result]
    assert sorted(taken) == [f"r{i:02}" for i in range(60)]
    for i, result in enumerate(results):
        for run_id in result:
            run = await stores[0].read(run_ops.get_run(run_id))
            assert run is not None and run.owner == f"w{i}"


async def test_claim_runs__recovers_an_orphan_once_its_owners_lease_expires(
    store: Store, store_url: str
) -> None:
    await store.write(workers.register_worker(worker_record("dead", lease=LEASE)))
    await store.write(workers.register_worker(worker_record("alive")))
    await store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="dead")))
    await store.write(journal.record_step(held("dead"), step_record("r1", 1)))

    age_heartbeat(store_url, "dead", LEASE - 2)  # by the database's clock
    within = await store.write(claims.claim("alive", 10, now=T0, stale=True))
    age_heartbeat(store_url, "dead", LEASE + 2)
    unjudged = await store.write(claims.claim("alive", 10, now=T0, stale=False))
    after = await store.write(claims.claim("alive", 10, now=T0, stale=True))

    assert within.runs == []
    assert unjudged.runs == []  # a claimer not yet entitled to judge heartbeats leaves it
    [run] = after.runs
    assert (run.run_id, run.owner, run.attempt, run.recoveries) == ("r1", "alive", 2, 1)
    assert run.fence == 2
    with pytest.raises(LeaseLost):  # the old owner, if it was only slow, is fenced off
        await store.write(journal.record_step(held("dead"), step_record("r1", 2)))
    with pytest.raises(LeaseLost):
        await store.write(
            run_ops.finish_run("r1", held("dead"), "COMPLETED", result=None, error=None, now=T0)
        )
    assert len(await store.read(journal.load_journal("r1"))) == 1


async def test_claim_runs__judges_a_heartbeat_by_its_owners_own_lease(
    store: Store, store_url: str
) -> None:
    await store.write(workers.register_worker(worker_record("patient", lease=60.0)))
    await store.write(workers.register_worker(worker_record("hasty", lease=5.0)))
    await store.write(run_ops.create_run(run_record("slow", status="RUNNING", owner="patient")))
    await store.write(run_ops.create_run(run_record("quick", status="RUNNING", owner="hasty")))
    age_heartbeat(store_url, "patient", 30.0)
    age_heartbeat(store_url, "hasty", 30.0)

    claimed = await store.write(claims.claim("w9", 10, now=T0, stale=True))

    # Thirty seconds of silence is within the patient worker's 60 s, past the hasty one's 5 s.
    assert [run.run_id for run in claimed.runs] == ["quick"]


async def test_claim_runs__a_run_claimed_again_gets_a_new_fence(
    store: Store, store_url: str
) -> None:
    await store.write(workers.register_worker(worker_record("a")))
    await store.write(workers.register_worker(worker_record("b")))
    await store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="a")))
    await store.write(
        run_ops.park_run("r1", held("a"), "SLEEPING", wake_at=T0, waiting_for=None, now=T0)
    )
    [first] = (await store.write(claims.claim("a", 10, now=T0 + 1, stale=True))).runs
    age_heartbeat(store_url, "a", 0)  # presumed dead (while only paused, say)
    [second] = (await store.write(claims.claim("b", 10, now=T0 + 1, stale=True))).runs
    await store.write(
        run_ops.park_run("r1", held("b", 3), "SLEEPING", wake_at=T0, waiting_for=None, now=T0)
    )
    [third] = (await store.write(claims.claim("a", 10, now=T0 + 2, stale=True))).runs

    assert [(r.owner, r.fence) for r in (first, second, third)] == [("a", 2), ("b", 3), ("a", 4)]
    # The same worker, but the attempt of its earlier claim: fenced off in each write.
    old = held("a", 2)
    with pytest.raises(LeaseLost):
        await store.write(journal.record_step(old, step_record("r1", 1)))
    with pytest.raises(LeaseLost):
        await store.write(journal.record_attempt(old, attempt_record("r1", "add#1", 1)))
    with pytest.raises(LeaseLost):
        await store.write(
            run_ops.park_run("r1", old, "SLEEPING", wake_at=T0, waiting_for=None, now=T0)
        )
    with pytest.raises(LeaseLost):
        await store.write(
            run_ops.finish_run("r1", old, "COMPLETED", result=None, error=None, now=T0)
        )
    assert not await store.write(workers.release_run("r1", old))
    await store.write(journal.record_step(held("a", 4), step_record("r1", 1)))
    assert [(s.key, s.result) for s in await store.read(journal.load_journal("r1"))] == [
        ("add#1", "1")
    ]


async def test_claim_runs__an_orphan_of_an_unregistered_worker_is_recovered(
    store: Store,
) -> None:
    await store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="gone")))

    claimed = await store.write(claims.claim("w1", 10, now=T0, stale=True))

    assert [(run.run_id, run.recoveries) for run in claimed.runs] == [("r1", 1)]


async def test_claim_runs__orphans_first_takes_a_dead_workers_run_before_a_backlog(
    store: Store,
) -> None:
    # A backlog of new runs would keep a dead worker's run waiting until it drained.
    for i in range(3):
        await store.write(run_ops.create_run(run_record(f"new{i}", created_at=T0 + i)))
    await store.write(run_ops.create_run(run_record("orphan", status="RUNNING", owner="gone")))

    usual = await store.write(claims.claim("w1", 1, now=T0, stale=True))
    first = await store.write(claims.claim("w1", 1, now=T0, stale=True, orphans_first=True))

    assert [run.run_id for run in usual.runs] == ["new0"]
    assert [run.run_id for run in first.runs] == ["orphan"]


async def test_claim_runs__a_poisoned_run_cancels_its_children(store: Store) -> None:
    # Its relatives (parent G, child C) are locked without waiting (orphans.relatives_held):
    # free, they are written as by any end of a run.
    await store.write(run_ops.create_run(run_record("G", status="WAITING")))
    child = run_record("C", status="RUNNING", owner="w0", parent_id="P")
    await store.write(run_ops.create_run(child))
    poisoned = run_record(
        "P", status="RUNNING", owner="w0", parent_id="G", recoveries=2, max_recoveries=2
    )
    await store.write(run_ops.create_run(poisoned))  # w0 has no worker row: dead

    claimed = await store.write(claims.claim("w1", 10, now=T0, stale=True, only=["P"]))

    assert (claimed.runs, claimed.poisoned) == ([], {"P": "tests.flow"})
    p = await store.read(run_ops.get_run("P"))
    c = await store.read(run_ops.get_run("C"))
    assert p is not None and p.status == "FAILED"
    assert c is not None and (c.status, c.control) == ("RUNNING", "cancel")


async def test_claim_runs__poisons_a_run_recovered_max_recoveries_times(store: Store) -> None:
    await store.write(
        run_ops.create_run(run_record("r1", status="RUNNING", owner="gone", max_recoveries=2))
    )
    recoveries = []
    for worker in ("a", "b"):  # never heartbeating, each counts as dead at once
        claimed = await store.write(claims.claim(worker, 10, now=T0, stale=True))
        recoveries += [run.recoveries for run in claimed.runs]

    last = await store.write(claims.claim("c", 10, now=T0, stale=True))

    assert recoveries == [1, 2]
    assert (last.runs, last.poisoned) == ([], {"r1": "tests.flow"})
    run = await store.read(run_ops.get_run("r1"))
    assert run is not None
    assert (run.status, run.owner) == ("FAILED", None)
    assert json.loads(run.error or "{}")["type"] == "cairn.errors.PoisonRun"


async def test_claim_run_over_a_live_owner__leaves_it_alone(store: Store) -> None:
    await store.write(workers.register_worker(worker_record("w1")))
    await store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))

    claimed = await store.write(claims.claim("w2", 10, now=T0 + 1, stale=True))

    assert claimed.runs == []
    assert claimed.poisoned == {}


async def test_release_run__a_live_owner_queues_one_run_again(store: Store) -> None:
    await store.write(workers.register_worker(worker_record("w1")))
    await store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await store.write(run_ops.create_run(run_record("r2", status="RUNNING", owner="w1")))

    refused = await store.write(
        workers.release_run("r1", held("w2"))
    )  # not its owner: nothing happens
    untouched = await store.write(claims.claim("w2", 10, now=T0 + 1, stale=True))
    released = await store.write(workers.release_run("r1", held("w1")))
    claimed = await store.write(claims.claim("w2", 10, now=T0 + 1, stale=True))

    assert (refused, released) == (False, True)
    assert untouched.runs == []
    # Only r1, queued again: a hand-back is not a recovery (a flapping database must not
    # poison healthy runs), but it is a new attempt.
    assert [(r.run_id, r.owner, r.recoveries, r.attempt) for r in claimed.runs] == [
        ("r1", "w2", 0, 2)
    ]
    with pytest.raises(LeaseLost):
        await store.write(journal.record_step(held("w1"), step_record("r1", 1)))


async def test_claim_runs__says_when_each_claimed_run_became_due(store: Store) -> None:
    await store.write(workers.register_worker(worker_record("w1")))
    await store.write(run_ops.create_run(run_record("queued", created_at=T0 - 5)))
    await store.write(run_ops.create_run(run_record("delayed", created_at=T0 - 9, wake_at=T0 - 2)))
    await store.write(run_ops.create_run(run_record("napper", status="RUNNING", owner="w1")))
    await store.write(
        run_ops.park_run("napper", held("w1"), "SLEEPING", wake_at=T0 - 1, waiting_for=None, now=T0)
    )

    claimed = await store.write(claims.claim("w2", 10, now=T0, stale=True))

    assert {run.run_id for run in claimed.runs} == {"queued", "delayed", "napper"}
    assert claimed.due == {"queued": T0 - 5, "delayed": T0 - 2, "napper": T0 - 1}


@pytest.mark.parametrize("uncount", [False, True], ids=["stopped", "keyless"])
async def test_claim_runs__a_run_claimed_before_has_no_due_time(
    store: Store, uncount: bool
) -> None:
    # Handed back (a clean stop; a worker without the key, whose attempt is taken back),
    # it was due long before this claim: the lag of its first claim was measured then.
    await store.write(workers.register_worker(worker_record("w1")))
    await store.write(run_ops.create_run(run_record("r", created_at=T0 - 5)))
    first = await store.write(claims.claim("w1", 1, now=T0, stale=True))
    assert first.due == {"r": T0 - 5}
    await store.write(workers.release_run("r", held("w1"), uncount=uncount))

    again = await store.write(claims.claim("w1", 1, now=T0 + 60, stale=True))

    assert [(run.run_id, run.fence) for run in again.runs] == [("r", 2)]
    assert again.due == {}


async def test_claim_runs__many_at_once_in_candidate_order_each_once(store: Store) -> None:
    # Unqueued candidates are claimed by one statement, queued ones one by one past their
    # queue's limits; the claim still answers in candidate order, every run claimed once,
    # with a new attempt and fence, the version of the code here, and when it became due.
    for worker in ("w1", "w2", "w3"):
        await store.write(workers.register_worker(worker_record(worker)))
    await store.write(queues.update_queue(QueueRecord("q", concurrency=2), now=T0))
    for i in range(8):
        queue = "q" if i % 2 else None
        await store.write(
            run_ops.create_run(run_record(f"p{i}", created_at=T0 - 100 + i, queue=queue))
        )
    await store.write(run_ops.create_run(run_record("pinned", created_at=T0 - 50, version="v0")))
    for name, status in (("sleeper", "SLEEPING"), ("waiter", "WAITING")):
        await store.write(run_ops.create_run(run_record(name, status="RUNNING", owner="w1")))
        await store.write(
            run_ops.park_run(name, held("w1"), status, wake_at=T0 - 1, waiting_for=None, now=T0)
        )

    claimed = await store.write(
        claims.claim("w2", 9, now=T0, stale=True, versions={"tests.flow": "v1"})
    )

    ids = [run.run_id for run in claimed.runs]
    # Woken first (by wake time), then pending by age; q holds all but two of its runs.
    assert ids == ["sleeper", "waiter", "p0", "p1", "p2", "p3", "p4", "p6", "pinned"]
    by_id = {run.run_id: run for run in claimed.runs}
    assert {run.status for run in claimed.runs} == {"RUNNING"}
    assert {run.owner for run in claimed.runs} == {"w2"}
    assert (by_id["sleeper"].attempt, by_id["p0"].attempt) == (1, 1)
    # No history yet: what the code that runs it first makes of it is that code's.
    assert by_id["pinned"].version == "v1" and by_id["p0"].version == "v1"
    assert by_id["sleeper"].version is None  # a waking run keeps what it had
    assert claimed.due["p2"] == T0 - 98 and claimed.due["waiter"] == T0 - 1
    again = await store.write(claims.claim("w3", 20, now=T0, stale=True))
    assert [run.run_id for run in again.runs] == []  # q's others wait for a free place


async def test_claim_runs__a_queued_run_with_history_keeps_its_version(store: Store) -> None:
    # Handed back by a worker of another version (a rolling deploy): its history is its
    # version's, so a claim by code of any version leaves the version as it was.
    await store.write(workers.register_worker(worker_record("w1")))
    await store.write(
        run_ops.create_run(run_record("r", status="RUNNING", owner="w1", version="v1"))
    )
    await store.write(journal.record_step(held("w1"), step_record("r", 1)))
    assert await store.write(workers.release_run("r", held("w1")))

    claimed = await store.write(
        claims.claim("w1", 1, now=T0, stale=True, versions={"tests.flow": "v2"})
    )

    assert [(run.run_id, run.version) for run in claimed.runs] == [("r", "v1")]


async def test_claim_runs__leaves_out_the_runs_skipped__pending_and_woken(store: Store) -> None:
    # What a worker without the key of a run's values does for a while (runtime/keyless.py).
    await store.write(workers.register_worker(worker_record("w1")))
    await store.write(run_ops.create_run(run_record("p1")))
    await store.write(run_ops.create_run(run_record("p2", created_at=T0 + 1)))
    await store.write(run_ops.create_run(run_record("s1", status="SLEEPING", wake_at=T0)))

    mine = await store.write(claims.claim("w1", 10, now=T0, stale=True, skip=["p1", "s1"]))
    others = await store.write(claims.claim("w2", 10, now=T0, stale=True))

    assert [run.run_id for run in mine.runs] == ["p2"]
    assert sorted(run.run_id for run in others.runs) == ["p1", "s1"]


async def test_release_run__says_what_the_run_waits_for_until_claimed(store: Store) -> None:
    await store.write(workers.register_worker(worker_record("w1")))
    await store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))

    refused = await store.write(workers.release_run("r1", held("w2"), waiting_for="key 'k1'"))
    released = await store.write(workers.release_run("r1", held("w1"), waiting_for="key 'k1'"))
    pending = await store.read(run_ops.get_run("r1"))
    claimed = await store.write(claims.claim("w2", 10, now=T0 + 1, stale=True))

    assert (refused, released) == (False, True)
    assert (pending.status, pending.owner, pending.waiting_for) == ("PENDING", None, "key 'k1'")
    assert [(r.run_id, r.waiting_for) for r in claimed.runs] == [("r1", None)]


async def test_release_run__a_woken_run_that_wrote_nothing_parks_again_keeping_its_attempt(
    store: Store,
) -> None:
    # Its claim counted no attempt (a wake-up), so the hand-back takes none back: it is
    # parked again as the claim found it, due, and the next claim wakes it, counting none.
    # The row says the claim woke it: the caller need not know (a reconciler resuming a
    # run whose claim's reply was lost does not).
    await store.write(workers.register_worker(worker_record("w1")))
    await store.write(run_ops.create_run(run_record("r", created_at=T0 - 5)))
    [started] = (await store.write(claims.claim("w1", 1, now=T0, stale=True))).runs
    await store.write(
        run_ops.park_run("r", held("w1"), "SLEEPING", wake_at=T0 + 1, waiting_for=None, now=T0)
    )
    woke = await store.write(claims.claim("w1", 1, now=T0 + 2, stale=True))
    assert started.attempt == woke.runs[0].attempt == 1
    lease = Lease("w1", woke.runs[0].fence)

    released = await store.write(
        workers.release_run("r", lease, waiting_for="key 'k1'", uncount=True, now=T0 + 3)
    )
    parked = await store.read(run_ops.get_run("r"))
    again = await store.write(claims.claim("w1", 1, now=T0 + 60, stale=True))

    assert released
    assert (parked.status, parked.owner, parked.attempt) == ("WAITING", None, 1)
    assert (parked.waiting_for, parked.wake_at) == ("key 'k1'", T0 + 3)
    assert [r.attempt for r in again.runs] == [1]


async def test_release_run__a_woken_run_recovered_since_goes_back_as_its_recovery_found_it(
    store: Store,
) -> None:
    # The row says how the claim that holds the run took it: woken by w1, whose worker
    # then died, the run was recovered by w2 (an attempt counted), so an idle hand-back
    # by w2 takes that attempt back and queues it PENDING; the recovery stays counted.
    await store.write(workers.register_worker(worker_record("w2")))
    await store.write(run_ops.create_run(run_record("r", created_at=T0 - 5)))
    [started] = (await store.write(claims.claim("w1", 1, now=T0, stale=True))).runs
    await store.write(
        run_ops.park_run("r", held("w1"), "SLEEPING", wake_at=T0 + 1, waiting_for=None, now=T0)
    )
    [woke] = (await store.write(claims.claim("w1", 1, now=T0 + 2, stale=True))).runs
    [recovered] = (await store.write(claims.claim("w2", 1, now=T0 + 3, stale=True))).runs
    assert (started.attempt, woke.attempt, recovered.attempt) == (1, 1, 2)

    released = await store.write(
        workers.release_run("r", Lease("w2", recovered.fence), uncount=True, now=T0 + 4)
    )
    back = await store.read(run_ops.get_run("r"))

    assert released
    assert (back.status, back.owner, back.attempt, back.recoveries) == ("PENDING", None, 1, 1)
