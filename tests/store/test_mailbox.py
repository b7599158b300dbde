"""Store.consume_messages: several messages of a channel taken as one journal entry."""

from __future__ import annotations

import json

import pytest

from cairn.store import Store
from cairn.store.programs import journal as journal_ops
from cairn.store.programs import runs, waits
from cairn.store.protocol import LeaseLost
from cairn.store.records import StepRecord

from .kit import T0, held, run_record


def as_list(payloads: list[str]) -> str:
    """The entry's result: a JSON array of the payloads (each JSON text)."""
    return "[" + ",".join(payloads) + "]"


def receive_entry(run_id: str, seq: int = 1) -> StepRecord:
    return StepRecord(
        run_id=run_id,
        seq=seq,
        key=f"~receive:orders#{seq}",
        kind="receive",
        name="orders",
        status="completed",
        attempts=1,
        started_at=T0,
        finished_at=T0,
    )


async def queue(store: Store, run_id: str, channel: str, *payloads: str) -> None:
    for payload in payloads:
        await store.write(
            waits.send_message(run_id, channel, payload, idempotency_key=None, now=T0)
        )


async def test_consume_messages__takes_the_oldest_up_to_the_limit_as_one_entry(
    store: Store,
) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await queue(store, "r1", "event:orders", '"a"', '"b"', '"c"')
    await queue(store, "r1", "event:other", '"x"')

    taken = await store.write(
        waits.consume_messages(
            held("w1"), "event:orders", receive_entry("r1"), limit=2, combine=as_list
        )
    )

    assert taken == '["a","b"]'
    [entry] = await store.read(journal_ops.load_journal("r1"))
    assert (entry.key, entry.kind, entry.status, entry.result) == (
        "~receive:orders#1",
        "receive",
        "completed",
        '["a","b"]',
    )
    rest = await store.write(
        waits.consume_messages(
            held("w1"), "event:orders", receive_entry("r1", 2), limit=8, combine=as_list
        )
    )
    assert rest == '["c"]'
    other = await store.write(
        waits.consume_message(held("w1"), "event:other", receive_entry("r1", 3))
    )
    assert other == '"x"'  # another channel's message is untouched


async def test_consume_messages__nothing_queued_writes_nothing(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await queue(store, "r1", "event:other", '"x"')

    taken = await store.write(
        waits.consume_messages(
            held("w1"), "event:orders", receive_entry("r1"), limit=8, combine=as_list
        )
    )

    assert taken is None
    assert await store.read(journal_ops.load_journal("r1")) == []


async def test_consume_messages__replaces_the_waiting_entry(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))
    waiting = receive_entry("r1")
    waiting = StepRecord(
        **{
            **{f: getattr(waiting, f) for f in StepRecord.__dataclass_fields__},
            "status": "waiting",
            "finished_at": None,
            "result": json.dumps({"deadline": None, "channel": "event:orders"}),
        }
    )
    await store.write(journal_ops.upsert_step(held("w1"), waiting))
    await queue(store, "r1", "event:orders", "1", "2")

    taken = await store.write(
        waits.consume_messages(
            held("w1"), "event:orders", receive_entry("r1"), limit=8, combine=as_list
        )
    )

    assert taken == "[1,2]"
    [entry] = await store.read(journal_ops.load_journal("r1"))
    assert (entry.status, entry.result) == ("completed", "[1,2]")


async def test_consume_messages__without_the_lease_takes_nothing(store: Store) -> None:
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await queue(store, "r1", "event:orders", '"a"')

    with pytest.raises(LeaseLost):
        await store.write(
            waits.consume_messages(
                held("w2"), "event:orders", receive_entry("r1"), limit=8, combine=as_list
            )
        )

    assert await store.read(journal_ops.load_journal("r1")) == []
    taken = await store.write(
        waits.consume_messages(
            held("w1"), "event:orders", receive_entry("r1"), limit=8, combine=as_list
        )
    )
    assert taken == '["a"]'
