"""Durable streams: appended items in order, fenced by the lease, voided attempts, forks."""

from __future__ import annotations

import pytest

from cairn.store import LeaseLost, Store
from cairn.store.programs import control, runs, streams
from cairn.store.programs import journal as journal_ops

from .kit import T0, held, run_record, step_record


def _chunks(*values: str) -> list[tuple[str, str | None]]:
    return [("chunk", value) for value in values]


async def _append(store: Store, items: list[tuple[str, str | None]], **fields: object) -> int:
    args: dict[str, object] = {"step_key": "add#1", "attempt": 1, "claim": 1, "base": 0}
    args["now"] = T0
    args.update(fields)
    return await store.write(
        streams.append_stream(held("w1"), "r1", "tokens", items, **args)  # type: ignore[arg-type]
    )


async def test_append_stream__items_read_back_in_seq_order(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))

    assert await _append(store, _chunks('"a"', '"b"')) == 2
    assert await _append(store, [*_chunks('"c"'), ("close", None)], base=2) == 2

    items = await store.read(streams.read_stream("r1", "tokens"))
    assert [(i.seq, i.kind, i.value) for i in items] == [
        (1, "chunk", '"a"'),
        (2, "chunk", '"b"'),
        (3, "chunk", '"c"'),
        (4, "close", None),
    ]
    later = await store.read(streams.read_stream("r1", "tokens", after=2, limit=1))
    assert [i.seq for i in later] == [3]
    assert await store.read(streams.stream_names("r1")) == [("tokens", 4, 4)]


async def test_append_stream__sent_again_stores_nothing_twice(store: Store) -> None:
    # What a writer's store does when an append's reply was lost (PostgreSQL; see
    # test_stream_lost_replies): the same append again finds its items stored.
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await _append(store, _chunks('"a"'))
    assert await _append(store, _chunks('"b"', '"c"'), base=1) == 2

    with pytest.raises(LeaseLost):  # how a resend's "nothing stored" is answered
        await _append(store, _chunks('"b"', '"c"'), base=1)
    assert await store.read(streams.appended("r1", "tokens", "add#1", 1, 1, 3))
    assert not await store.read(streams.appended("r1", "tokens", "add#1", 1, 1, 4))
    assert await _append(store, _chunks('"d"'), base=3) == 1

    items = await store.read(streams.read_stream("r1", "tokens"))
    assert [i.value for i in items] == ['"a"', '"b"', '"c"', '"d"']


async def test_append_stream__not_held_raises_lease_lost_and_writes_nothing(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w2")))

    with pytest.raises(LeaseLost):
        await _append(store, _chunks('"a"'))

    assert await store.read(streams.read_stream("r1", "tokens")) == []


async def test_void_attempt__a_new_claim_voids_the_dead_attempts(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await _append(store, _chunks('"a"'))

    void = streams.void_attempt(held("w1"), "r1", "add#1", attempt=1, claim=2, own=False, now=T0)
    assert await store.write(void) == ["tokens"]
    assert await store.write(void) == []  # already void
    await _append(store, _chunks('"b"'), claim=2)

    items = await store.read(streams.read_stream("r1", "tokens"))
    assert [(i.kind, i.attempt, i.value) for i in items] == [
        ("chunk", 1, '"a"'),
        ("reset", 1, None),
        ("chunk", 1, '"b"'),
    ]


async def test_void_attempt__own_failure_resets_once(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await _append(store, _chunks('"a"'))

    void = streams.void_attempt(held("w1"), "r1", "add#1", attempt=1, claim=1, own=True, now=T0)
    assert await store.write(void) == ["tokens"]
    assert await store.write(void) == []  # already void

    kinds = [i.kind for i in await store.read(streams.read_stream("r1", "tokens"))]
    assert kinds == ["chunk", "reset"]


async def test_workflow_writes__counts_workflow_code_chunks(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))
    assert await store.read(streams.workflow_writes("r1", "tokens")) == 0

    for n in (1, 2):
        await _append(store, _chunks('"x"'), step_key=streams.WORKFLOW_KEY, attempt=n, at_seq=0)

    assert await store.read(streams.workflow_writes("r1", "tokens")) == 2


async def test_copy_run__a_fork_keeps_the_copied_steps_streams(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))
    for seq in (1, 2):
        await store.write(journal_ops.record_step(held("w1"), step_record("r1", seq)))
    await _append(store, _chunks('"one"'), step_key="add#1")
    await _append(store, _chunks('"early"'), step_key=streams.WORKFLOW_KEY, attempt=1, at_seq=1)
    await _append(store, _chunks('"two"'), step_key="add#2")
    await _append(store, _chunks('"late"'), step_key=streams.WORKFLOW_KEY, attempt=2, at_seq=2)

    fork = run_record("r2", status="PENDING")
    await store.write(control.copy_run(fork, "r1", before_seq=2, now=T0))

    items = await store.read(streams.read_stream("r2", "tokens"))
    assert [i.value for i in items] == ['"one"', '"early"']


async def test_void_unfinished__resets_only_steps_without_an_outcome(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await store.write(journal_ops.record_step(held("w1"), step_record("r1", 1)))
    await _append(store, _chunks('"done"'), step_key="add#1")  # completed: kept
    await _append(store, _chunks('"early"'), step_key=streams.WORKFLOW_KEY, attempt=1, at_seq=1)
    await _append(store, _chunks('"dead"'), step_key="add#2")  # its worker died: void
    await _append(store, _chunks('"dead too"'), step_key="add#2", attempt=2, claim=2)
    assert len(await store.read(streams.unfinished_writers("r1"))) == 2
    with pytest.raises(LeaseLost):  # a worker that does not hold the run resets nothing
        await store.write(streams.void_unfinished(held("w2"), "r1", now=T0))

    void = streams.void_unfinished(held("w1"), "r1", now=T0)
    assert await store.write(void) == ["tokens"]
    assert await store.read(streams.unfinished_writers("r1")) == []
    assert await store.write(void) == []  # already void

    items = await store.read(streams.read_stream("r1", "tokens"))
    assert [(i.kind, i.step_key, i.attempt) for i in items[-2:]] == [
        ("reset", "add#2", 1),
        ("reset", "add#2", 2),
    ]
