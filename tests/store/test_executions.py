"""Executions and the audit trail: retry keeps what it replaces, copies say where they came
from, heartbeats publish the steps in flight, and a takeover records them as interrupted."""

from __future__ import annotations

import json
from dataclasses import replace

from cairn.store import Store
from cairn.store import in_flight as flights
from cairn.store.in_flight import InFlightStep
from cairn.store.programs import claims, control, workers
from cairn.store.programs import journal as journal_ops
from cairn.store.programs import runs as run_ops

from .kit import T0, attempt_record, held, run_record, step_record, worker_record


async def _failed_run(store: Store, run_id: str = "r1") -> None:
    """A run that failed at its second step, after two failed attempts of it."""
    await store.write(run_ops.create_run(run_record(run_id, status="RUNNING", owner="w1")))
    await store.write(journal_ops.record_step(held("w1"), step_record(run_id, 1)))
    for attempt in (1, 2):
        await store.write(
            journal_ops.record_attempt(held("w1"), attempt_record(run_id, "charge#1", attempt))
        )
    failed = step_record(run_id, 2, "charge", key="charge#1", status="failed", error="{}")
    await store.write(journal_ops.record_step(held("w1"), failed))
    await store.write(
        run_ops.finish_run(run_id, held("w1"), "FAILED", result=None, error="{}", now=T0)
    )


async def test_retry_run__keeps_the_failed_entry_and_attempts_under_execution_1(
    store: Store,
) -> None:
    await _failed_run(store)

    assert await store.write(control.retry_run("r1", now=T0 + 5, by="ada"))

    run = await store.read(run_ops.get_run("r1"))
    assert run is not None and (run.status, run.execution) == ("PENDING", 2)
    # The journal a replay reads no longer has the failure: its step runs again.
    assert [s.key for s in await store.read(journal_ops.load_journal("r1"))] == ["add#1"]
    lineage = await store.read(control.load_lineage("r1"))
    assert [(r.execution, r.step.key, r.step.status) for r in lineage.retried] == [
        (1, "charge#1", "failed")
    ]
    [began] = lineage.executions
    assert (began.execution, began.started_at, began.cause, began.started_by) == (
        2,
        T0 + 5,
        "retry",
        "ada",
    )
    assert began.from_seq == 2
    attempts = await store.read(journal_ops.load_attempts("r1"))
    assert [(a.execution, a.key, a.attempt) for a in attempts] == [
        (1, "charge#1", 1),
        (1, "charge#1", 2),
    ]


async def test_retry_run__a_second_retry_keeps_both_failures(store: Store) -> None:
    await _failed_run(store)
    assert await store.write(control.retry_run("r1", now=T0 + 5, by=None))
    # Execution 2 fails at the same step again, after one failed attempt of its own.
    [claimed] = (await store.write(claims.claim("w2", 1, now=T0 + 6, stale=False))).runs
    lease = held("w2", claimed.fence)
    await store.write(
        journal_ops.record_attempt(lease, replace(attempt_record("r1", "charge#1", 1), execution=2))
    )
    again = step_record("r1", 2, "charge", key="charge#1", status="failed", error="{}")
    await store.write(journal_ops.record_step(lease, again))
    await store.write(
        run_ops.finish_run("r1", lease, "FAILED", result=None, error="{}", now=T0 + 7)
    )

    assert await store.write(control.retry_run("r1", now=T0 + 8, by="bob"))

    lineage = await store.read(control.load_lineage("r1"))
    assert [(r.execution, r.step.seq) for r in lineage.retried] == [(1, 2), (2, 2)]
    assert [(e.execution, e.started_by) for e in lineage.executions] == [(2, None), (3, "bob")]
    attempts = await store.read(journal_ops.load_attempts("r1"))
    assert [(a.execution, a.attempt) for a in attempts] == [(1, 1), (1, 2), (2, 1)]


async def test_retry_run__only_a_failed_run_and_nothing_written_otherwise(store: Store) -> None:
    await store.write(run_ops.create_run(run_record("r1")))

    assert not await store.write(control.retry_run("r1", now=T0, by="ada"))
    assert not await store.write(control.retry_run("nobody", now=T0, by="ada"))

    lineage = await store.read(control.load_lineage("r1"))
    assert (lineage.executions, lineage.retried) == ([], [])
    run = await store.read(run_ops.get_run("r1"))
    assert run is not None and run.execution == 1


async def test_copy_run__restart_and_fork_record_their_source(store: Store) -> None:
    await _failed_run(store, "src")
    restarted = run_record("again", restarted_from="src")
    forked = run_record("fork", forked_from="src", forked_from_seq=2)

    await store.write(control.copy_run(restarted, "src", before_seq=None, by="ada", now=T0 + 1))
    await store.write(control.copy_run(forked, "src", before_seq=2, by=None, now=T0 + 2))

    assert [s.key for s in await store.read(journal_ops.load_journal("again"))] == []
    assert [s.key for s in await store.read(journal_ops.load_journal("fork"))] == ["add#1"]
    copies = (await store.read(control.load_lineage("src"))).copies
    assert [(c.run_id, c.restarted_from, c.forked_from, c.forked_from_seq) for c in copies] == [
        ("again", "src", None, None),
        ("fork", None, "src", 2),
    ]
    [first] = (await store.read(control.load_lineage("again"))).executions
    assert (first.execution, first.cause, first.started_by, first.started_at) == (
        1,
        "restart",
        "ada",
        T0 + 1,
    )
    [first] = (await store.read(control.load_lineage("fork"))).executions
    assert (first.cause, first.started_by, first.from_seq) == ("fork", None, 2)


def _flying(run_id: str, fence: int, key: str, attempt: int) -> str | None:
    return flights.encode([InFlightStep(run_id, fence, key, key.split("#")[0], attempt, T0 - 3)])


async def test_beat__stores_the_steps_in_flight(store: Store) -> None:
    worker = replace(worker_record("w1"), executing=_flying("r1", 1, "charge#1", 2))

    await store.write(workers.register_worker(worker_record("w1")))
    await store.write(workers.beat(worker))

    stored = await store.read(workers.get_worker("w1"))
    assert stored is not None and stored.executing == worker.executing
    [step] = flights.decode(stored.executing, "r1", 1)
    assert (step.key, step.name, step.attempt, step.started_at) == ("charge#1", "charge", 2, T0 - 3)
    assert flights.decode(stored.executing, "r1", 2) == []  # another hold of the run
    assert await store.read(workers.get_worker("nobody")) is None
    await store.write(workers.beat(worker_record("w1")))  # nothing in flight any more
    stored = await store.read(workers.get_worker("w1"))
    assert stored is not None and stored.executing is None


async def test_claim_runs__records_what_a_dead_owner_had_in_flight_as_interrupted(
    store: Store,
) -> None:
    await store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="dead")))
    await store.write(journal_ops.record_attempt(held("dead"), attempt_record("r1", "charge#1", 1)))
    await store.write(workers.register_worker(worker_record("dead")))
    await store.write(
        workers.beat(replace(worker_record("dead"), executing=_flying("r1", 1, "charge#1", 2)))
    )
    await store.write(workers.expire_workers(["dead"]))

    [run] = (await store.write(claims.claim("w2", 1, now=T0 + 9, stale=False))).runs

    assert run.run_id == "r1"
    attempts = await store.read(journal_ops.load_attempts("r1"))
    assert [(a.attempt, a.outcome, a.worker) for a in attempts] == [
        (1, "failed", None),
        (2, "interrupted", "dead"),
    ]
    interrupted = attempts[1]
    assert (interrupted.started_at, interrupted.failed_at, interrupted.execution) == (
        T0 - 3,
        T0 + 9,
        1,
    )
    assert "worker dead stopped" in interrupted.message


async def test_claim_runs__a_step_whose_outcome_was_committed_is_not_interrupted(
    store: Store,
) -> None:
    await store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="dead")))
    await store.write(
        journal_ops.record_step(held("dead"), step_record("r1", 1, "charge", key="charge#1"))
    )
    executing = json.loads(_flying("r1", 1, "charge#1", 1) or "{}")
    executing["other"] = {"fence": 1, "steps": [{"key": "x#1", "name": "x", "attempt": 1}]}
    await store.write(workers.register_worker(worker_record("dead")))
    await store.write(workers.beat(replace(worker_record("dead"), executing=json.dumps(executing))))
    await store.write(workers.expire_workers(["dead"]))

    [run] = (await store.write(claims.claim("w2", 1, now=T0 + 9, stale=False))).runs

    assert run.run_id == "r1"
    assert await store.read(journal_ops.load_attempts("r1")) == []


async def test_claim_runs__a_poisoned_run_keeps_its_interrupted_attempt(store: Store) -> None:
    await store.write(
        run_ops.create_run(
            run_record("r1", status="RUNNING", owner="dead", recoveries=1, max_recoveries=1)
        )
    )
    await store.write(workers.register_worker(worker_record("dead")))
    await store.write(
        workers.beat(replace(worker_record("dead"), executing=_flying("r1", 1, "charge#1", 1)))
    )
    await store.write(workers.expire_workers(["dead"]))

    claimed = await store.write(claims.claim("w2", 1, now=T0 + 9, stale=False))

    assert claimed.poisoned == {"r1": "tests.flow"}
    [attempt] = await store.read(journal_ops.load_attempts("r1"))
    assert (attempt.outcome, attempt.worker) == ("interrupted", "dead")


async def test_release_run__records_the_attempts_it_cut_short(store: Store) -> None:
    await store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await store.write(
        journal_ops.record_step(held("w1"), step_record("r1", 1, "charge", key="charge#1"))
    )
    flying = [
        InFlightStep("r1", 1, "charge#1", "charge", 1, T0),  # committed after all
        InFlightStep("r1", 1, "ship#1", "ship", 1, T0 + 1),
    ]
    cut = [
        flights.interrupted(step, execution=1, worker="w1", now=T0 + 2, why="stopped")
        for step in flying
    ]

    assert not await store.write(
        workers.release_run("r1", held("w2"), interrupted=cut)
    )  # not its lease
    assert await store.read(journal_ops.load_attempts("r1")) == []
    assert await store.write(workers.release_run("r1", held("w1"), interrupted=cut))

    [attempt] = await store.read(journal_ops.load_attempts("r1"))
    assert (attempt.key, attempt.outcome, attempt.worker, attempt.started_at) == (
        "ship#1",
        "interrupted",
        "w1",
        T0 + 1,
    )
    assert attempt.message.startswith("worker w1 stopped while attempt 1 of step 'ship' ran")
