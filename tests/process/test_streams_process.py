"""Durable streams across real processes: each failure case of the contract with a worker
killed with SIGKILL (docs/explanation/streams.md names these tests case by case).

The reader (this process) sees a dead or failed attempt's chunks voided by a reset, the
retry's chunks, and workflow code's writes once each, although the recovered run replays
them; a run that fails or is cancelled after the kill gives its readers the reset and
then their end; a fork or a restart of a run whose worker was killed streams as the
contract says.
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


async def _rest(values: Any, timeout: float = 30) -> list[Any]:
    async def collect() -> list[Any]:
        return [value async for value in values]

    return await asyncio.wait_for(collect(), timeout)


async def test_kill_9__a_failed_attempt_and_a_dead_one_are_each_reset_before_the_retry(
    tmp_path: Path, store_url: str
) -> None:
    async with workers(tmp_path, store_url) as (procs, control):
        victim = procs.spawn()
        run = await control.start("proc.streams_flaky", allow_unknown=True)
        values = control.read_stream(run.run_id, "tokens")
        seen: list[Any] = [await asyncio.wait_for(anext(values), 20) for _ in range(3)]
        # attempt 1 raised and was voided; attempt 2 streams and holds
        assert seen == ["try 1", cairn.StreamReset(attempt=1, step_key="flaky_streamer#1"), "try 2"]
        procs.kill(victim)
        procs.release()
        procs.spawn()
        seen += await _rest(values)
        await procs.status(control, run.run_id, "COMPLETED")

    assert seen[3:] == [cairn.StreamReset(attempt=2, step_key="flaky_streamer#1"), "try 3"]
    assert procs.counts()["flaky start"] == 3


async def test_kill_9__a_step_failing_for_good_after_a_takeover_is_reset_and_readers_end(
    tmp_path: Path, store_url: str
) -> None:
    async with workers(tmp_path, store_url) as (procs, control):
        victim = procs.spawn()
        run = await control.start("proc.streams_doomed", allow_unknown=True)
        values = control.read_stream(run.run_id, "tokens")
        assert await asyncio.wait_for(anext(values), 20) == "try 1"
        procs.kill(victim)
        procs.release()
        procs.spawn()
        rest = await _rest(values)  # ends: the run failed and nothing more is stored
        await procs.status(control, run.run_id, "FAILED")

    # The dead attempt spends none of the step's two attempts (its worker failed, not the
    # step): both run after the takeover, each voided, then the reader ends. (An attempt's
    # number after a takeover depends on whether a heartbeat published the dead one.)
    resets = [item for item in rest if isinstance(item, cairn.StreamReset)]
    assert [r.step_key for r in resets] == ["doomed_streamer#1"] * 3
    assert resets[0].attempt == 1  # the victim's
    reset = "reset"
    assert [reset if item in resets else item for item in rest] == [
        reset,
        "try 2",
        reset,
        "try 3",
        reset,
    ]
    assert procs.counts()["doomed start"] == 3


async def test_kill_9__a_run_cancelled_before_its_dead_attempt_is_retried_gets_the_reset(
    tmp_path: Path, store_url: str
) -> None:
    async with workers(tmp_path, store_url) as (procs, control):
        victim = procs.spawn()
        run = await control.start("proc.streams", 3, allow_unknown=True)
        values = control.read_stream(run.run_id, "tokens")
        seen: list[Any] = [await asyncio.wait_for(anext(values), 20) for _ in range(4)]
        procs.kill(victim)
        await control.cancel(run.run_id)  # asked while nobody holds the run alive
        procs.release()
        procs.spawn()  # takes the run over and ends it CANCELLED
        seen += await _rest(values)
        await procs.status(control, run.run_id, "CANCELLED")

    assert seen == ["start", 0, 1, 2, cairn.StreamReset(attempt=1, step_key="streamer#1")]
    assert procs.counts()["streamer start"] == 1


async def _killed_after_a_completed_stream(procs: Any, control: cairn.Engine) -> str:
    """proc.streams_replayed with its worker killed in the step after the stream's step."""
    victim = procs.spawn()
    run = await control.start("proc.streams_replayed", 3, allow_unknown=True)
    await procs.until("the held step", lambda: procs.counts()["held start"] == 1)
    procs.kill(victim)
    return run.run_id


async def test_kill_9__a_fork_keeps_the_completed_steps_streams(
    tmp_path: Path, store_url: str
) -> None:
    async with workers(tmp_path, store_url) as (procs, control):
        run_id = await _killed_after_a_completed_stream(procs, control)
        procs.release()
        procs.spawn()  # takes the run over and completes it
        await procs.status(control, run_id, "COMPLETED")
        entries = await control.history(run_id)
        held = next(e.seq for e in entries if e.name == "held_async")
        fork = await control.fork(run_id, held)  # keeps "start" and spoken's stream
        await procs.status(control, fork.run_id, "COMPLETED")
        forked = await _rest(control.read_stream(fork.run_id, "tokens"))
        source = await _rest(control.read_stream(run_id, "tokens"))

    assert forked == ["start", 0, 1, 2, "end"]
    assert source == ["start", 0, 1, 2, "end"]
    counts = procs.counts()
    assert counts["spoken"] == 1  # the fork did not stream spoken's chunks again
    assert counts["held start"] == 3  # the victim's, the takeover's, the fork's


async def test_kill_9__a_restart_streams_anew_and_the_source_keeps_its_streams(
    tmp_path: Path, store_url: str
) -> None:
    async with workers(tmp_path, store_url) as (procs, control):
        run_id = await _killed_after_a_completed_stream(procs, control)
        restarted = await control.restart(run_id)
        procs.release()
        procs.spawn()
        await procs.status(control, restarted.run_id, "COMPLETED")
        await procs.status(control, run_id, "COMPLETED")
        again = await _rest(control.read_stream(restarted.run_id, "tokens"))
        source = await _rest(control.read_stream(run_id, "tokens"))

    assert again == ["start", 0, 1, 2, "end"]
    assert source == ["start", 0, 1, 2, "end"]
    assert procs.counts()["spoken"] == 2  # the restart keeps no steps: it streamed again
