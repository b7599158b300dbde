"""The mailbox: `cairn.receive` takes up to N queued events of a topic as one journal entry.

A receive is a wait (core/waits.py) on the channel `wait_for_event` uses, so an event is
taken by whichever asks first. It takes what is queued at once, or parks the run WAITING
until a message comes or its timeout passes; either way one entry records the call: the
messages taken, or the timeout (an empty list). Never an entry per message or per tick.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cairn.core import journal, waits
from cairn.core.run_values import BlobsNeeded
from cairn.store.programs import waits as wait_ops
from cairn.store.records import StepRecord

if TYPE_CHECKING:
    from cairn.core.live_view import LiveView

KIND = "receive"
"""The journal kind of a receive's entry; its name is the topic."""

NOTHING = "[]"
"""The stored result of a receive that timed out: no messages."""

MAX_LIMIT = 2**31 - 1
"""A larger `max_messages` takes as many as this (more than a SQL LIMIT takes everywhere)."""


def key_name(topic: str) -> str:
    """What a receive's keys count: `~receive:TOPIC` (`~receive:orders#2`)."""
    return journal.op_name(KIND, topic)


async def receive(
    live: LiveView, topic: str, max_messages: int, timeout: float | None
) -> list[Any]:
    """`cairn.receive`: up to `max_messages` events `topic`, oldest first; [] on timeout."""
    key = live.journal.next_key(key_name(topic))
    record = live.journal.take(key, KIND)
    if record is None:
        await live.journal.check_new_work(journal.started(KIND, key))
    deadline = None if timeout is None else live.env.clock.now() + timeout
    channel = f"event:{topic}"
    store, lease = live.env.store, live.lease

    async def take(done: StepRecord) -> str | None:
        values = live.values
        limit = min(max_messages, MAX_LIMIT)
        while True:
            try:
                taken = await store.write(
                    wait_ops.consume_messages(
                        lease, channel, done, limit=limit, combine=values.stored_list
                    )
                )
            except BlobsNeeded as needed:  # rolled back: read them outside it, then again
                await values.read_ahead(needed.texts, done.key)
                continue
            values.forget_ahead()
            return taken

    # The messages are decrypted (and encrypted again as one list) inside the write: one
    # under a key this worker lacks leaves the attempt there, and the blobs of offloaded
    # ones are read before it (core/run_values.py).
    with live.values.reading():
        taken = await waits.wait_message(
            live,
            key=key,
            kind=KIND,
            name=topic,
            channel=channel,
            record=record,
            deadline=deadline,
            default=[],
            take=take,
            timeout_result=NOTHING,
            waits_for=channel,  # it waits for events: `cairn send` and the dashboard say so
        )
    return list(taken)
