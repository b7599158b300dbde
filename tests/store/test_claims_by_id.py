"""Claims by run id (what a transport's message leads to) and the runs a claim could take."""

from __future__ import annotations

from cairn.store import Store
from cairn.store.programs import claimable, claims, workers
from cairn.store.programs import runs as run_ops

from .kit import LEASE, T0, age_heartbeat, held, run_record, worker_record


async def test_claim_runs_only__takes_the_named_run_and_no_other(store: Store) -> None:
    await store.write(workers.register_worker(worker_record("w1")))
    await store.write(run_ops.create_run(run_record("first")))
    await store.write(run_ops.create_run(run_record("named", created_at=T0 + 1)))

    claimed = await store.write(claims.claim("w1", 10, now=T0 + 2, stale=True, only=["named"]))
    again = await store.write(claims.claim("w2", 10, now=T0 + 2, stale=True, only=["named"]))
    nothing = await store.write(claims.claim("w2", 10, now=T0 + 2, stale=True, only=[]))

    assert [run.run_id for run in claimed.runs] == ["named"]
    assert (claimed.runs[0].owner, claimed.runs[0].fence) == ("w1", 1)
    assert again.runs == [] and nothing.runs == []  # held now: a second message takes nothing
    first = await store.read(run_ops.get_run("first"))
    assert first is not None and first.status == "PENDING"


async def test_claim_runs_only__wakes_a_due_sleeper_and_recovers_an_orphan(
    store: Store, store_url: str
) -> None:
    await store.write(workers.register_worker(worker_record("w1")))
    await store.write(workers.register_worker(worker_record("dead")))
    await store.write(run_ops.create_run(run_record("sleeper", status="RUNNING", owner="w1")))
    await store.write(
        run_ops.park_run(
            "sleeper", held("w1"), "SLEEPING", wake_at=T0 + 60, waiting_for=None, now=T0
        )
    )
    await store.write(run_ops.create_run(run_record("orphan", status="RUNNING", owner="dead")))

    early = await store.write(claims.claim("w2", 10, now=T0 + 59, stale=True, only=["sleeper"]))
    due = await store.write(claims.claim("w2", 10, now=T0 + 60, stale=True, only=["sleeper"]))
    alive = await store.write(claims.claim("w2", 10, now=T0 + 60, stale=True, only=["orphan"]))
    age_heartbeat(store_url, "dead", LEASE + 2)
    dead = await store.write(claims.claim("w2", 10, now=T0 + 60, stale=True, only=["orphan"]))

    assert early.runs == []
    assert [run.run_id for run in due.runs] == ["sleeper"]
    assert alive.runs == []  # its owner's lease has not run out
    assert [(run.run_id, run.recoveries) for run in dead.runs] == [("orphan", 1)]


async def test_claimable_runs__lists_what_a_claim_could_take_with_a_mark_per_state(
    store: Store, store_url: str
) -> None:
    await store.write(workers.register_worker(worker_record("w1")))
    await store.write(workers.register_worker(worker_record("dead")))
    await store.write(run_ops.create_run(run_record("new", queue="emails")))
    await store.write(run_ops.create_run(run_record("later", wake_at=T0 + 60)))
    await store.write(run_ops.create_run(run_record("other", workflow="tests.unknown")))
    await store.write(run_ops.create_run(run_record("sleeper", status="RUNNING", owner="w1")))
    await store.write(
        run_ops.park_run(
            "sleeper", held("w1"), "SLEEPING", wake_at=T0 + 5, waiting_for=None, now=T0
        )
    )
    await store.write(run_ops.create_run(run_record("orphan", status="RUNNING", owner="dead")))
    age_heartbeat(store_url, "dead", LEASE + 2)

    found = await store.read(
        claimable.claimable_runs(now=T0 + 10, limit=10, stale=True, workflows=["tests.flow"])
    )
    fresh = await store.read(
        claimable.claimable_runs(now=T0 + 10, limit=10, stale=False, workflows=["tests.flow"])
    )
    none = await store.read(
        claimable.claimable_runs(now=T0 + 10, limit=10, stale=True, workflows=[])
    )

    assert sorted(found) == [
        ("new", "PENDING", "emails", T0),
        ("orphan", "RUNNING", None, 1.0),
        ("sleeper", "SLEEPING", None, T0 + 5),
    ]
    assert sorted(run_id for run_id, *_ in fresh) == ["new", "sleeper"]  # heartbeat only old
    assert none == []
