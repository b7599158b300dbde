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


async def items(
    store: Store, run_id: str, name: str, *, after: int = 0, poll: float = POLL
) -> AsyncIterator[StreamItem]:
    """The stored items of stream `name` after seq `after`, as they come, until its end.

    Raises RunNotFound if the run is unknown.
    """
    if await store.read(run_ops.get_run(run_id)) is None:
        raise RunNotFound(run_id)
    bells = store.stream_bells()
    looked = float("-inf")  # the first time nothing is there, look at the run at once
    while True:
        batch = await store.read(stream_ops.read_stream(run_id, name, after=after))
        for item in batch:
            after = item.seq
            yield item
            if item.kind == "close":
                return
        if batch:
            continue
        if time.monotonic() - looked >= STATUS_EVERY:
            looked = time.monotonic()
            run = await store.read(run_ops.get_run(run_id))
            if run is None or run.status in FINISHED:
                if not await store.read(stream_ops.read_stream(run_id, name, after=after)):
                    return
                continue
        await bells.wait(run_id, name, poll)


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
