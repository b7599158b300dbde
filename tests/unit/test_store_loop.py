"""What a store reads of its event loop (store/_loop.py): the ready queue, fenced."""

from __future__ import annotations

import asyncio

from cairn.store import _loop


async def test_ready_queue__the_stock_loops_own_queue_kept_for_its_life() -> None:
    loop = asyncio.get_running_loop()
    ready = _loop.ready_queue(loop)
    assert ready is not None

    loop.call_soon(lambda: None)
    assert len(ready) >= 1 and _loop.others_ready(loop)  # the queue it reads, live
    await asyncio.sleep(0)
    await asyncio.sleep(0)

    assert _loop.ready_queue(loop) is ready  # never replaced: read once at open
    assert not _loop.others_ready(loop)


def test_ready_queue__a_loop_without_one_is_none_and_others_are_assumed_ready() -> None:
    class OtherLoop:  # uvloop keeps its ready callbacks in C, out of sight
        pass

    other = OtherLoop()
    assert _loop.ready_queue(other) is None  # type: ignore[arg-type]
    assert _loop.others_ready(other)  # type: ignore[arg-type]
