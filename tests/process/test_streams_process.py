"""Durable streams across real processes: a worker killed with SIGKILL mid-stream.

The reader (this process) sees the dead attempt's chunks voided by a reset, the retry's
chunks, and workflow code's writes once each, although the recovered run replays them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import cairn

from .worker_procs import workers

pytestmark = pytest.mark.process


async def test_kill_9__mid_stream_readers_get_a_reset_and_the_retry_streams_again(
    tmp_path: Path, store_url: str
) -> None:
    async with workers(tmp_path, store_url) as (procs, control):
        victim = procs.spawn()
        run = await control.start("proc.streams", 3, allow_unknown=True)
        values = control.read_stream(run.run_id, "tokens")
        seen: list[Any] = [await asyncio.wait_for(anext(values), 20) for _ in range(4)]
        assert seen == ["start", 0, 1, 2]  # the victim's attempt, still running
        procs.kill(victim)
        procs.release()
        procs.spawn()  # sees the victim gone and takes the run over

        async def rest() -> list[Any]:
            return [value async for value in values]

        seen += await asyncio.wait_for(rest(), 30)
        await procs.status(control, run.run_id, "COMPLETED")

    assert seen == [
        "start",
        0,
        1,
        2,
        cairn.StreamReset(attempt=1, step_key="streamer#1"),
        0,
        1,
        2,
        "end",
    ]
    assert procs.counts()["streamer start"] == 2


async def test_kill_9__after_a_completed_stream_the_replay_writes_nothing_again(
    tmp_path: Path, store_url: str
) -> None:
    async with workers(tmp_path, store_url) as (procs, control):
        victim = procs.spawn()
        run = await control.start("proc.streams_replayed", 3, allow_unknown=True)
        await procs.until("the held step", lambda: procs.counts()["held start"] == 1)
        procs.kill(victim)  # the stream step completed; a later step is in flight
        procs.release()
        procs.spawn()
        await procs.status(control, run.run_id, "COMPLETED")
        seen = [value async for value in control.read_stream(run.run_id, "tokens")]

    assert seen == ["start", 0, 1, 2, "end"]
    assert procs.counts()["spoken"] == 1 and procs.counts()["held start"] == 2
