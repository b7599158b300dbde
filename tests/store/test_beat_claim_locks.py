"""A heartbeat and an orphan claim of the same runs, interleaved on PostgreSQL: no deadlock.

The heartbeat (the side channel's own connection, `workers.beat_at`) locks runs first (those
it hands back, or, re-registering a removed worker, those it owns), then its worker row; a
claim of its runs as orphans locks the runs (SKIP LOCKED), then the owner's row FOR SHARE
(`orphans.still_orphaned`). A third connection holds the lock one side needs next, so that
side stops there while the other goes on; then it lets go. Both must finish without a
deadlock (the database's deadlock count stays 0: a deadlock the store retried would still
count), and the run is held by exactly one of them, or handed back. Last, not a claim:
the end of a run, which locks it, its parent and its children, against a re-registering
beat and a worker's removal, each of which locks runs that worker owns. Every lock of
several runs that waits takes them by run_id, so none of these closes a circle.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import psycopg
import pytest

from cairn.core.tenure import Tenure
from cairn.store import LeaseLost, Store, _sql, open_store
from cairn.store.postgres import dialect, side_channel
from cairn.store.postgres.side_channel import PostgresSideChannel
from cairn.store.programs import claims, journal
from cairn.store.programs import runs as run_ops
from cairn.store.programs import workers as worker_ops
from cairn.store.records import Beat, Claimed, Lease

from .kit import LEASE, T0, age_heartbeat, execute, run_record, step_record, worker_record
from .test_claim_races import holder, lock_waiters, orphan_of
from .test_prune_races import held

# The heartbeat's paths: its worker row is there (late: the claimer judges its heartbeat
# old), or gone (removed: it registers again), or it hands the run back (late).
PATHS = {"renew": ("late", False), "reregister": ("removed", False), "hand_back": ("late", True)}
T = TypeVar("T")
BOUND = 10.0  # seconds: far beyond any wait here but the ones the test holds


@pytest.fixture
async def pg_store(pg_url: str) -> Any:
    store = open_store(pg_url)
    await store.open()
    yield store
    await store.close()


def deadlocks(url: str) -> int:
    name = url.rsplit("/", 1)[1]
    sql = "SELECT deadlocks FROM pg_stat_database WHERE datname = ?"
    return int(execute(url, sql, (name,))[0][0])


async def beat(
    url: str, hand_back: bool = False, let_go: list[tuple[str, int]] | None = None
) -> Beat:
    """A heartbeat of w0 on a side channel of its own, as its worker sends it.

    It hands back "r" if `hand_back`, else the runs of `let_go`.
    """
    channel = PostgresSideChannel(url, where="test")
    if let_go is None:
        let_go = [("r", 1)] if hand_back else []
    try:
        return await asyncio.to_thread(channel.beat, worker_record("w0"), let_go)
    finally:
        channel.close()


async def waiting(url: str, task: asyncio.Task[Any], count: int) -> None:
    """Return once `task` is done or `count` sessions wait for a lock."""
    async with asyncio.timeout(BOUND):
        while not task.done() and lock_waiters(url) < count:
            await asyncio.sleep(0.01)


def claim(store: Store, only: list[str] | None = None) -> asyncio.Task[Claimed]:
    """A claim by w1, of `only` these runs if given (as a transport's message asks)."""
    return asyncio.create_task(store.write(claims.claim("w1", 10, now=T0, stale=True, only=only)))


async def outcome(
    store: Store, url: str, before: int, beating: asyncio.Task[Beat], claiming: asyncio.Task[Any]
) -> tuple[Beat, Claimed, tuple[str | None, int]]:
    """Both ended, within the bound and without a deadlock; the run's holder then."""
    async with asyncio.timeout(BOUND):
        beat_done, claimed = await beating, await claiming
    assert deadlocks(url) == before
    return beat_done, claimed, await holder(store)


def held_by_one(beat_done: Beat, claimed: Claimed, now: tuple[str | None, int]) -> None:
    """Exactly one holds the run (or nobody, handed back), and each side knows it."""
    took = [run.run_id for run in claimed.runs]
    if now == ("w1", 2):
        assert took == ["r"] and "r" not in beat_done.owned
    elif now == ("w0", 1):
        assert took == [] and beat_done.owned == {"r": 1}
    else:
        assert now == (None, 1) and took == [] and beat_done.released == ("r",)


@pytest.mark.parametrize("path", PATHS)
async def test_beat_and_orphan_claim__the_claim_first_holds_the_run(
    pg_store: Store, pg_url: str, path: str
) -> None:
    # The claim has locked the run (and the owner's row FOR SHARE, if there is one) and
    # waits for its queue's row, held here, when the heartbeat comes.
    how, hand_back = PATHS[path]
    await orphan_of(pg_store, pg_url, how)
    before = deadlocks(pg_url)
    with held(pg_url) as queue_row:
        queue_row.conn.execute("SELECT name FROM queues WHERE name = 'q' FOR UPDATE")
        claiming = claim(pg_store)
        await waiting(pg_url, claiming, 1)
        beating = asyncio.create_task(beat(pg_url, hand_back))
        await waiting(pg_url, beating, 2)
        assert not beating.done()  # it waits for the claim, whichever lock it wanted
        queue_row.commit()
        beat_done, claimed, now = await outcome(pg_store, pg_url, before, beating, claiming)

    assert now == ("w1", 2)  # the claim judged w0 dead first: the run is w1's
    held_by_one(beat_done, claimed, now)


@pytest.mark.parametrize("path", PATHS)
async def test_beat_and_orphan_claim__the_beat_first_holds_its_locks(
    pg_store: Store, pg_url: str, path: str
) -> None:
    # The heartbeat has written everything (the run handed back, the row renewed or
    # inserted, the runs it owns read) and has not committed when the claim comes.
    how, hand_back = PATHS[path]
    await orphan_of(pg_store, pg_url, how)
    before = deadlocks(pg_url)
    with held(pg_url) as heartbeat:
        let_go = [("r", 1)] if hand_back else []
        beat_done = heartbeat.run(worker_ops.beat_at(worker_record("w0"), let_go, now=T0))
        claiming = claim(pg_store)
        await waiting(pg_url, claiming, 1)
        heartbeat.commit()
        async with asyncio.timeout(BOUND):
            claimed = await claiming
    assert deadlocks(pg_url) == before

    now = await holder(pg_store)
    assert now == ((None, 1) if hand_back else ("w0", 1))  # the claim saw the heartbeat
    held_by_one(beat_done, claimed, now)


@pytest.mark.parametrize("path", PATHS)
async def test_beat_and_orphan_claim__the_beat_waits_midway_for_its_row(
    pg_store: Store, pg_url: str, path: str
) -> None:
    # The heartbeat has taken its first locks (the run it hands back; a re-registered
    # row) and waits for the next (its row, the runs it owns), held here, when the claim
    # comes; then both go on.
    how, hand_back = PATHS[path]
    await orphan_of(pg_store, pg_url, how)
    before = deadlocks(pg_url)
    with held(pg_url) as blocker:
        if how == "removed":  # its beat then waits for the runs it owns
            blocker.conn.execute("SELECT run_id FROM runs WHERE run_id = 'r' FOR UPDATE")
        else:  # its beat waits for its own row
            blocker.conn.execute("SELECT worker_id FROM workers WHERE worker_id = 'w0' FOR UPDATE")
        beating = asyncio.create_task(beat(pg_url, hand_back))
        await waiting(pg_url, beating, 1)
        claiming = claim(pg_store)
        await waiting(pg_url, claiming, 2)
        blocker.commit()
        beat_done, claimed, now = await outcome(pg_store, pg_url, before, beating, claiming)

    held_by_one(beat_done, claimed, now)


async def poisoned_family(store: Store, url: str, how: str) -> None:
    """Run "P", recovered too often, and its child "C", both RUNNING under w0 (dead by `how`).

    A claim ends P (PoisonRun) and, as any end of a run does, cancels its children: it
    locks C after P and after w0's row. "G", P's parent, waits on no one.
    """
    await store.write(worker_ops.register_worker(worker_record("w0")))
    await store.write(run_ops.create_run(run_record("G", status="WAITING")))
    # C first: the beat that reads the runs w0 owns meets it before P.
    await store.write(
        run_ops.create_run(run_record("C", status="RUNNING", owner="w0", parent_id="P"))
    )
    poisoned = run_record(
        "P", status="RUNNING", owner="w0", parent_id="G", recoveries=2, max_recoveries=2
    )
    await store.write(run_ops.create_run(poisoned))
    if how == "late":
        age_heartbeat(url, "w0", LEASE + 5)
    else:
        execute(url, "DELETE FROM workers WHERE worker_id = ?", ("w0",))


async def family(store: Store) -> dict[str, tuple[str, str | None, str | None]]:
    found = {}
    for run_id in ("P", "C"):
        run = await store.read(run_ops.get_run(run_id))
        assert run is not None
        found[run_id] = (run.status, run.owner, run.control)
    return found


async def test_beat_and_poisoning_claim__a_child_handed_back_meanwhile(
    pg_store: Store, pg_url: str
) -> None:
    # w0's beat hands C back (C locked), then waits for its row, which a reader holds FOR
    # SHARE; the claim's FOR SHARE of w0 shares it, and the claim would end P and cancel
    # C, waiting for the beat, which then waits for the claim's share of w0 (a deadlock,
    # before the claim left a run whose relatives are locked to a later claim).
    await poisoned_family(pg_store, pg_url, "late")
    before = deadlocks(pg_url)
    with held(pg_url) as reader:
        reader.conn.execute("SELECT worker_id FROM workers WHERE worker_id = 'w0' FOR SHARE")
        beating = asyncio.create_task(beat(pg_url, let_go=[("C", 1)]))
        await waiting(pg_url, beating, 1)
        claiming = claim(pg_store)
        await waiting(pg_url, claiming, 2)
        reader.commit()
        async with asyncio.timeout(BOUND):
            beat_done, claimed = await beating, await claiming
    assert deadlocks(pg_url) == before

    assert (claimed.runs, claimed.poisoned) == ([], {})  # C was the beat's: P left alone
    assert beat_done.released == ("C",) and beat_done.owned == {"P": 1}
    assert await family(pg_store) == {"P": ("RUNNING", "w0", None), "C": ("PENDING", None, None)}


async def test_beat_and_poisoning_claim__a_reregistering_beat_locks_the_child_first(
    pg_store: Store, pg_url: str
) -> None:
    # w0's row is gone. A claim of P alone (as a transport's message asks) has locked P
    # and, before the fix, waited to tell G (held here) of P's end; w0's beat registers
    # again and locks the runs it owns FOR SHARE: C, then P, which it waits for. Once G
    # was let go, the claim came to cancel C, which the beat held: a deadlock. Now the
    # claim leaves P, whose parent is locked, to a later claim.
    await poisoned_family(pg_store, pg_url, "removed")
    before = deadlocks(pg_url)
    with held(pg_url) as parent:
        parent.conn.execute("SELECT run_id FROM runs WHERE run_id = 'G' FOR UPDATE")
        claiming = claim(pg_store, only=["P"])
        await waiting(pg_url, claiming, 1)
        beating = asyncio.create_task(beat(pg_url))
        await waiting(pg_url, beating, 2)
        parent.commit()
        async with asyncio.timeout(BOUND):
            beat_done, claimed = await beating, await claiming
    assert deadlocks(pg_url) == before

    assert (claimed.runs, claimed.poisoned) == ([], {})
    assert beat_done.owned == {"C": 1, "P": 1}
    assert await family(pg_store) == {"P": ("RUNNING", "w0", None), "C": ("RUNNING", "w0", None)}


async def test_orphan_claim__behind_a_frozen_beat_completes_and_the_owner_loses_the_run(
    pg_store: Store, pg_url: str
) -> None:
    # w0's beat has renewed its row on a side channel's connection (its session settings:
    # idle_in_transaction_session_timeout 5 s) and its process froze before COMMIT. The
    # claim that judged w0 dead waits for that row (FOR SHARE) until the server ends the
    # frozen session; then it reads w0's old heartbeat again and takes the run. w0 gained
    # no trust from the beat (it never committed), and what it checks next tells it the
    # run is gone: its fenced write is refused and its next beat does not list the run.
    await orphan_of(pg_store, pg_url, "late")
    tenure = Tenure(LEASE)
    tenure.renewed(time.monotonic() - LEASE)  # w0's last beat that committed: a lease ago
    begun = tenure.epoch  # when w0's attempt of the run began
    frozen = psycopg.connect(psycopg.conninfo.make_conninfo(pg_url, **side_channel._OPTIONS))
    try:
        for text, params in dialect.program_statements(_sql.HEARTBEAT, (None, "w0"), lock=""):
            assert frozen.execute(text, params).rowcount == 1  # the row is w0's, uncommitted
        claiming = claim(pg_store)
        await waiting(pg_url, claiming, 1)
        assert not claiming.done()  # it waits for the frozen beat
        async with asyncio.timeout(BOUND):
            claimed = await claiming
        with pytest.raises(psycopg.errors.IdleInTransactionSessionTimeout):
            frozen.commit()  # the server ended the session: the beat failed
    finally:
        frozen.close()

    assert [(run.run_id, run.owner, run.fence) for run in claimed.runs] == [("r", "w1", 2)]
    assert not tenure.trusts(begun)  # no beat committed: a step waits for one
    sent = time.monotonic()
    next_beat = await beat(pg_url, hand_back=False)
    tenure.renewed(sent)
    # A new epoch: the attempt checks its fence before its next step, and finds it gone.
    assert tenure.epoch == begun + 1 and not tenure.trusts(begun)
    assert "r" not in next_beat.owned
    with pytest.raises(LeaseLost):
        await pg_store.write(journal.record_step(Lease("w0", 1), step_record("r", 1)))


# w1 ends M, whose parent A and child Z are w0's; Z is created (and read) first.
FAMILY = (("Z", "w0", "M", T0 - 2), ("A", "w0", None, T0 - 1), ("M", "w1", "A", T0))


async def against_an_end(
    store: Store,
    url: str,
    family: Sequence[tuple[str, str, str | None, float]],
    *,
    held_back: str,
    other: Callable[[], Awaitable[T]],
) -> T:
    """End w1's run while `other` runs; both done, no deadlock; what `other` returned.

    The runs of `family` (id, owner, parent, created) are created RUNNING; w1 owns one. A reader's
    FOR SHARE of `held_back` stops the end part-way until `other` waits for a lock too.
    """
    await store.write(worker_ops.register_worker(worker_record("w1")))
    for run_id, owner, parent, created in family:
        record = run_record(
            run_id, status="RUNNING", owner=owner, parent_id=parent, created_at=created
        )
        await store.write(run_ops.create_run(record))
    before = deadlocks(url)
    with held(url) as reader:
        reader.conn.execute("SELECT run_id FROM runs WHERE run_id = %s FOR SHARE", (held_back,))
        [ending] = [run_id for run_id, owner, _, _ in family if owner == "w1"]
        end = run_ops.finish_run(
            ending, Lease("w1", 1), "COMPLETED", result="1", error=None, now=T0
        )
        finishing = asyncio.create_task(store.write(end))
        await waiting(url, finishing, 1)
        doing = asyncio.create_task(other())
        await waiting(url, doing, 2)
        reader.commit()
        async with asyncio.timeout(BOUND):
            done = await doing
            await finishing
    assert deadlocks(url) == before
    return done


async def test_beat_and_a_finish__a_reregistering_beat_and_the_end_of_a_relative(
    pg_store: Store, pg_url: str
) -> None:
    # Not a claim: w1 ends P, whose parent G and child C are w0's, while w0, its row gone,
    # registers again. The end locks P, G (to tell it), then C (to cancel it), were it to
    # lock in the order its statements come; the beat locks C, then G. The reader's FOR
    # SHARE of C holds the end back until the beat has C.
    family = (("C", "w0", "P", T0), ("G", "w0", None, T0), ("P", "w1", "G", T0))
    beat_done = await against_an_end(
        pg_store, pg_url, family, held_back="C", other=lambda: beat(pg_url)
    )
    assert beat_done.owned == {"C": 1, "G": 1}


async def test_beat_and_a_finish__a_reregistering_beat_that_meets_the_parent_last(
    pg_store: Store, pg_url: str
) -> None:
    # As above, but the beat reads w0's runs child first (Z, created first) and the end
    # locks by run_id: parent A first. Were the beat to lock in the order it reads, it
    # would hold Z and wait for A, which the end holds while it waits for Z.
    beat_done = await against_an_end(
        pg_store, pg_url, FAMILY, held_back="Z", other=lambda: beat(pg_url)
    )
    assert beat_done.owned == {"A": 1, "Z": 1}
    child = await pg_store.read(run_ops.get_run("Z"))
    assert child is not None and (child.status, child.control) == ("RUNNING", "cancel")


async def test_a_finish_and_a_removal__the_removed_worker_owns_the_parent_and_the_child(
    pg_store: Store, pg_url: str
) -> None:
    # Not a beat: w0 stops cleanly and hands its runs back (remove_worker). The end locks
    # A, then waits for M (held here); the removal would lock Z (read first), then wait
    # for A; M let go, the end would wait for Z. Both lock by run_id instead.
    await against_an_end(
        pg_store,
        pg_url,
        FAMILY,
        held_back="M",
        other=lambda: pg_store.write(worker_ops.remove_worker("w0")),
    )
    for run_id in ("A", "Z"):
        run = await pg_store.read(run_ops.get_run(run_id))
        assert run is not None and (run.status, run.owner) == ("PENDING", None)


async def test_beat_and_a_finish__a_reregistering_beat_that_hands_back_a_child(
    pg_store: Store, pg_url: str
) -> None:
    # w0, its row gone, hands back Z in the beat that registers it again. The end locks
    # A, then waits for M (held here). Were the beat to lock the run it hands back (Z)
    # before the runs it owns (A), it would hold Z and wait for A, which the end holds
    # while it waits for Z.
    beat_done = await against_an_end(
        pg_store, pg_url, FAMILY, held_back="M", other=lambda: beat(pg_url, let_go=[("Z", 1)])
    )
    assert (beat_done.owned, beat_done.released) == ({"A": 1}, ("Z",))
    child = await pg_store.read(run_ops.get_run("Z"))
    assert child is not None and (child.status, child.owner) == ("PENDING", None)
