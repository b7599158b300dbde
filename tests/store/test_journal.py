"""The journal: step outcomes and failed attempts, fenced by run ownership."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from cairn.errors import StoreError
from cairn.store import LeaseLost, Store
from cairn.store.programs import journal as journal_ops
from cairn.store.programs import runs, waits

from .kit import T0, attempt_record, held, run_record, step_record


async def test_record_step__owner_appends_entries_in_seq_order(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))

    for seq in (1, 2, 3):
        await store.write(journal_ops.record_step(held("w1"), step_record("r1", seq)))

    assert await store.read(journal_ops.load_journal("r1")) == [
        step_record("r1", seq) for seq in (1, 2, 3)
    ]


async def test_record_step__non_owner_raises_lease_lost_and_writes_nothing(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))

    with pytest.raises(LeaseLost):
        await store.write(journal_ops.record_step(held("w2"), step_record("r1", 1)))

    assert await store.read(journal_ops.load_journal("r1")) == []


async def test_record_step__finished_run_is_fenced(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await store.write(
        runs.finish_run("r1", held("w1"), "COMPLETED", result=None, error=None, now=T0)
    )

    with pytest.raises(LeaseLost):
        await store.write(journal_ops.record_step(held("w1"), step_record("r1", 1)))


async def test_record_step__concurrent_writers_share_commits_and_fail_alone(store: Store) -> None:
    for i in range(10):
        await store.write(runs.create_run(run_record(f"r{i}", status="RUNNING", owner="w1")))
    await store.write(journal_ops.record_step(held("w1"), step_record("r7", 1)))

    outcomes = await asyncio.gather(
        *(
            store.write(
                journal_ops.record_step(held("w1" if i != 4 else "w2"), step_record(f"r{i}", 1))
            )
            for i in range(10)
        ),
        return_exceptions=True,
    )

    kinds = [type(outcome).__name__ for outcome in outcomes]
    assert kinds[4] == "LeaseLost"  # not its owner
    assert isinstance(outcomes[7], StoreError)  # the same key twice
    assert all(kind == "NoneType" for i, kind in enumerate(kinds) if i not in (4, 7))
    for i in range(10):
        assert len(await store.read(journal_ops.load_journal(f"r{i}"))) == (0 if i == 4 else 1)


async def test_record_step__input_is_read_for_the_history_not_for_a_replay(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))
    given = '{"args":[1,"é"],"kwargs":{"b":null}}'

    await store.write(journal_ops.record_step(held("w1"), step_record("r1", 1, input=given)))
    await store.write(journal_ops.record_step(held("w1"), step_record("r1", 2)))

    assert [s.input for s in await store.read(journal_ops.load_journal("r1", inputs=True))] == [
        given,
        None,
    ]
    assert await store.read(journal_ops.load_journal("r1")) == [
        step_record("r1", seq) for seq in (1, 2)
    ]


async def test_record_step__inputs_of_writes_sharing_a_commit_stay_with_their_steps(
    store: Store,
) -> None:
    # Side by side, PostgreSQL writes these steps in one bulk statement (arrays).
    for i in range(6):
        await store.write(runs.create_run(run_record(f"r{i}", status="RUNNING", owner="w1")))

    await asyncio.gather(
        *(
            store.write(
                journal_ops.record_step(
                    held("w1"), step_record(f"r{i}", 1, input=None if i == 3 else f'{{"n":{i}}}')
                )
            )
            for i in range(6)
        )
    )

    for i in range(6):
        [step] = await store.read(journal_ops.load_journal(f"r{i}", inputs=True))
        assert step.input == (None if i == 3 else f'{{"n":{i}}}')


async def test_upsert_step__replaces_a_waiting_entry(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))
    waiting = step_record("r1", 1, name="event", status="waiting", finished_at=None, result=None)
    await store.write(journal_ops.upsert_step(held("w1"), waiting))

    done = step_record("r1", 1, name="event", result='"payload"')
    await store.write(journal_ops.upsert_step(held("w1"), done))

    assert await store.read(journal_ops.load_journal("r1")) == [done]


async def test_upsert_step__non_owner_raises_lease_lost(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))

    with pytest.raises(LeaseLost):
        await store.write(journal_ops.upsert_step(held("w2"), step_record("r1", 1)))


async def test_record_attempt__kept_once_per_attempt_in_order(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))

    for attempt in (2, 1, 1):
        await store.write(
            journal_ops.record_attempt(held("w1"), attempt_record("r1", "add#1", attempt))
        )

    loaded = await store.read(journal_ops.load_attempts("r1"))
    assert [(a.key, a.attempt) for a in loaded] == [("add#1", 1), ("add#1", 2)]


async def test_record_attempt__keeps_when_the_attempt_started(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))
    began = replace(attempt_record("r1", "add#1", 1), started_at=T0 - 0.25)

    await store.write(journal_ops.record_attempt(held("w1"), began))
    await store.write(journal_ops.record_attempt(held("w1"), attempt_record("r1", "add#1", 2)))

    assert [a.started_at for a in await store.read(journal_ops.load_attempts("r1"))] == [
        T0 - 0.25,
        None,
    ]


async def test_record_attempt__non_owner_raises_lease_lost_and_writes_nothing(
    store: Store,
) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))

    with pytest.raises(LeaseLost):
        await store.write(journal_ops.record_attempt(held("w2"), attempt_record("r1", "add#1", 1)))

    assert await store.read(journal_ops.load_attempts("r1")) == []


async def test_consume_message__takes_the_oldest_once(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))
    for payload in ("1", "2"):
        await store.write(waits.send_message("r1", "go", payload, idempotency_key=None, now=T0))

    first = await store.write(
        waits.consume_message(held("w1"), "go", step_record("r1", 1, name="event"))
    )
    second = await store.write(
        waits.consume_message(held("w1"), "go", step_record("r1", 2, name="event"))
    )
    third = await store.write(
        waits.consume_message(held("w1"), "go", step_record("r1", 3, name="event"))
    )

    assert (first, second, third) == ("1", "2", None)
    assert [step.result for step in await store.read(journal_ops.load_journal("r1"))] == ["1", "2"]


async def test_load_journal__pages_through_a_long_history(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))
    for seq in range(1, 8):
        await store.write(journal_ops.record_step(held("w1"), step_record("r1", seq)))

    first = await store.read(journal_ops.load_journal("r1", inputs=True, limit=3))
    second = await store.read(journal_ops.load_journal("r1", inputs=True, after_seq=3, limit=3))
    rest = await store.read(journal_ops.load_journal("r1", after_seq=6))

    assert [s.seq for s in first] == [1, 2, 3]
    assert [s.seq for s in second] == [4, 5, 6]
    assert [s.seq for s in rest] == [7]
    assert await store.read(journal_ops.load_journal("r1", after_seq=7, limit=3)) == []
