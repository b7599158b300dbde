"""cancelling: tasks that swallow a cancellation (as psycopg does inside a query) still end."""

from __future__ import annotations

import asyncio

import pytest

from cairn import cancelling


async def _like_a_query_on_a_silent_server(cancelled: list[int]) -> None:
    """Waits for ever; cancelled once, waits on (psycopg asking the server to cancel)."""
    forever = asyncio.Event()
    try:
        await forever.wait()
    except asyncio.CancelledError:
        cancelled.append(1)
        await forever.wait()  # cancelled again: psycopg closes the connection, and ends
        raise


async def test_stop__cancels_again_what_a_first_cancellation_did_not_end() -> None:
    cancelled: list[int] = []
    task = asyncio.ensure_future(_like_a_query_on_a_silent_server(cancelled))
    await asyncio.sleep(0)
    left = await cancelling.stop([task], patience=0.01, within=5.0)
    assert left == set()
    assert task.cancelled() and cancelled == [1]


async def test_stop__returns_a_task_that_swallows_every_cancellation() -> None:
    swallow = True

    async def stubborn() -> None:
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                if not swallow:
                    raise

    task = asyncio.ensure_future(stubborn())
    await asyncio.sleep(0)
    assert await cancelling.stop([task], patience=0.01, within=0.05) == {task}
    swallow = False
    assert await cancelling.stop([task]) == set()


async def test_bounded__stops_the_work_and_raises_timeout() -> None:
    cancelled: list[int] = []
    with pytest.raises(TimeoutError):
        await cancelling.bounded(_like_a_query_on_a_silent_server(cancelled), 0.01)
    assert cancelled == [1]
    assert await cancelling.bounded(asyncio.sleep(0, "done"), 1.0) == "done"


async def test_bounded__a_gather_that_does_not_answer_raises_timeout_not_cancelled() -> None:
    # A stopped gather ends with CancelledError as its exception, not as cancelled: a step
    # worker's hand-backs on a silent database crashed `cairn worker` with it.
    work = asyncio.gather(asyncio.sleep(60), asyncio.sleep(60))

    with pytest.raises(TimeoutError):
        await cancelling.bounded(work, 0.01)
