"""Operator requests reaching a worker process mid-step, and SIGKILL in the middle of a gather.

The test process steers runs through an engine with no workers; the runs execute in worker
processes (served_workflows.py), whose side-effect file proves what ran, how often, where.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import cairn

from .worker_procs import workers

pytestmark = pytest.mark.process

KINDS = ["sync", "async"]
# Steps of 5 ms after the held one: ten times the worker's 50 ms poll for requests.
TICKS = 100


def _ticks(counts: dict[str, int]) -> list[int]:
    return sorted(int(k.split()[1]) for k in counts if k.startswith("tick "))


@pytest.mark.parametrize("kind", KINDS)
async def test_cancel__arrives_mid_step_and_stops_at_the_next_durable_point(
    tmp_path: Path, store_url: str, kind: str
) -> None:
    async with workers(tmp_path, store_url) as (procs, control):
        procs.spawn()
        run = await control.start("proc.control", kind, TICKS, allow_unknown=True)
        await procs.until("the held step", lambda: procs.counts()["held start"] == 1)
        assert await control.cancel(run.run_id) == cairn.RunStatus.RUNNING
        procs.release()  # the step in flight finishes; the run stops at a durable point
        await procs.status(control, run.run_id, "CANCELLED", "COMPLETED", "FAILED")
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=1)
        history = await control.history(run.run_id)
    counts = procs.counts()
    ticks = _ticks(counts)
    assert counts["held start"] == counts["held end"] == 1
    assert counts["cleanup"] == 1 and counts["finished"] == 0
    assert len(ticks) < TICKS and ticks == list(range(len(ticks)))  # each once, in order
    assert all(counts[f"tick {i}"] == 1 for i in ticks)
    assert history[0].key == f"held_{kind}#1" and history[0].status == "completed"
    assert history[-1].key == "note#1" and history[-1].result == "cleanup"


@pytest.mark.parametrize("kind", KINDS)
async def test_cancel__check_cancelled_stops_a_long_step_in_a_worker(
    tmp_path: Path, store_url: str, kind: str
) -> None:
    async with workers(tmp_path, store_url) as (procs, control):
        procs.spawn()
        run = await control.start("proc.stubborn", kind, allow_unknown=True)
        await procs.until("the long step", lambda: procs.counts()["stubborn start"] == 1)
        await run.cancel()
        await procs.status(control, run.run_id, "CANCELLED", "COMPLETED", "FAILED")
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=1)
        history = await control.history(run.run_id)
    # The step recorded no outcome: the only entry is the point the cancel was delivered at.
    assert [(h.kind, h.key, h.result) for h in history] == [
        ("cancel", "~cancel#1", {"at": f"stubborn_{kind}#1", "reason": "cancelled"})
    ]
    assert procs.counts() == {"stubborn start": 1, "stubborn stopped": 1}


@pytest.mark.parametrize("kind", KINDS)
async def test_pause__arrives_mid_step_and_resume_finishes_the_run(
    tmp_path: Path, store_url: str, kind: str
) -> None:
    async with workers(tmp_path, store_url) as (procs, control):
        procs.spawn()
        run = await control.start("proc.control", kind, TICKS, allow_unknown=True)
        await procs.until("the held step", lambda: procs.counts()["held start"] == 1)
        assert await run.pause() == cairn.RunStatus.RUNNING
        procs.release()
        paused = await procs.status(control, run.run_id, "PAUSED", "COMPLETED", "FAILED")
        assert paused.status == "PAUSED" and paused.owner is None
        at_pause = procs.counts()
        assert await control.resume(run.run_id) == cairn.RunStatus.WAITING
        await procs.status(control, run.run_id, "COMPLETED", "FAILED", "CANCELLED")
        assert await run.result(timeout=1) == "done"
    counts = procs.counts()
    assert at_pause["finished"] == 0 and len(_ticks(at_pause)) < TICKS
    assert counts["held start"] == counts["held end"] == counts["finished"] == 1
    assert _ticks(counts) == list(range(TICKS))
    assert all(counts[f"tick {i}"] == 1 for i in range(TICKS))  # nothing ran twice


async def test_crash__sigkill_mid_gather_repeats_no_completed_step(
    tmp_path: Path, store_url: str
) -> None:
    async with workers(tmp_path, store_url) as (procs, control):
        first = procs.spawn("--hold", "2,4")
        run = await control.start("proc.gather", allow_unknown=True)

        async def three_committed() -> bool:
            keys = {h.key for h in await control.history(run.run_id)}
            held = procs.counts()["part 2"] == procs.counts()["part 4"] == 1
            return held and keys == {"part#1", "part#3", "part#5"}

        await procs.until("three committed branches", three_committed)
        procs.kill(first)
        second = procs.spawn()
        await procs.status(control, run.run_id, "COMPLETED", "FAILED")
        assert await run.result(timeout=1) == [1, 4, 9, 16, 25]
        history = await control.history(run.run_id)
    counts = procs.counts()
    assert counts == {"part 1": 1, "part 2": 2, "part 3": 1, "part 4": 2, "part 5": 1}
    for i in (1, 3, 5):
        assert procs.pids(f"part {i}") == {str(first.pid)}
    for i in (2, 4):
        assert procs.pids(f"part {i}") == {str(first.pid), str(second.pid)}
    assert sorted(h.key for h in history) == [f"part#{i}" for i in range(1, 6)]
