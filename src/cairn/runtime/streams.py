"""Reading a run's durable stream: its values in order, resets, the end (`read_stream`).

Writers: core/streams.py. A reader reads what is stored after the last item it saw, then
waits for a ring of the stream (this process's writes at once; PostgreSQL NOTIFY
cairn_streams from other processes) or a short poll, and reads again. It ends at the
stream's "close", or once the run has finished and nothing more is stored.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from cairn import serialization
from cairn.errors import RunNotFound
from cairn.models import StreamReset
from cairn.store import Store
from cairn.store.programs import runs as run_ops
from cairn.store.programs import streams as stream_ops
from cairn.store.programs.base import FINISHED
from cairn.store.records import StreamItem

POLL = 0.005
"""Seconds a reader waits for a ring before it reads again (other processes' writes)."""
STATUS_EVERY = 0.2
"""Seconds between a waiting reader's looks at whether the run has finished."""


async def next_items(
    store: Store, run_id: str, name: str, *, after: int, wait: float, poll: float = POLL
) -> tuple[list[StreamItem], bool]:
    """The items of stream `name` after seq `after`, waiting up to `wait` seconds for some.

    Also True once the stream has ended: its "close" (the last item returned), or the run
    has finished with nothing more stored. Raises RunNotFound if the run is unknown.
    """
    bells = store.stream_bells()
    deadline = time.monotonic() + wait
    looked = float("-inf")  # the first time nothing is there, look at the run at once
    while True:
        batch = await store.read(stream_ops.read_stream(run_id, name, after=after))
        for i, item in enumerate(batch):
            if item.kind == "close":
                return batch[: i + 1], True
        if batch:
            return batch, False
        now = time.monotonic()
        if now - looked >= STATUS_EVERY:
            looked = now
            run = await store.read(run_ops.get_run(run_id))
            if run is None:
                raise RunNotFound(run_id)
            if run.status in FINISHED:
                batch = await store.read(stream_ops.read_stream(run_id, name, after=after))
                return batch, not batch
        if now >= deadline:
            return [], False
        await bells.wait(run_id, name, min(poll, deadline - now))


async def items(
    store: Store, run_id: str, name: str, *, after: int = 0, poll: float = POLL
) -> AsyncIterator[StreamItem]:
    """The stored items of stream `name` after seq `after`, as they come, until its end."""
    if await store.read(run_ops.get_run(run_id)) is None:
        raise RunNotFound(run_id)
    while True:
        batch, ended = await next_items(store, run_id, name, after=after, wait=60.0, poll=poll)
        for item in batch:
            after = item.seq
            yield item
        if ended:
            return


async def read_stream(
    store: Store,
    serializer: serialization.Serializer,
    run_id: str,
    name: str,
    *,
    after: int | None = None,
) -> AsyncGenerator[Any, None]:
    """The values of stream `name` in order, with a StreamReset where an attempt's are void."""
    async for item in items(store, run_id, name, after=after or 0):
        if item.kind == "chunk" and item.value is not None:
            yield serializer.loads(item.value)
        elif item.kind == "reset":
            yield StreamReset(item.attempt, item.step_key)
