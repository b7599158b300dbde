"""Waiting across processes: sleepers and waiters outlive the worker that parked them."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

import cairn

from .worker_procs import workers

pytestmark = pytest.mark.process


@pytest.mark.parametrize("seconds", [2.0, 0.9], ids=["parked", "in_memory"])
async def test_sleep__run_asleep_when_its_process_is_killed_wakes_on_time(
    tmp_path: Path, store_url: str, seconds: float
) -> None:
    async with workers(tmp_path, store_url) as (procs, control):
        first = procs.spawn()
        run = await control.start("proc.sleeper", seconds, allow_unknown=True)
        await procs.until("the first step", lambda: procs.counts()["before"] == 1)
        if seconds > 1:  # beyond the in-memory window: parked in the database
            parked = await procs.status(control, run.run_id, "SLEEPING")
            wake_at = parked.wake_at
        else:  # asleep in the worker's memory, the run still RUNNING
            history = await procs.until(
                "the recorded sleep", lambda: _sleep_entry(control, run.run_id)
            )
            wake_at = history.result.timestamp()
        assert wake_at is not None
        procs.kill(first)
        assert time.time() < wake_at, "the kill came too late to prove anything"

        second = procs.spawn()
        done = await procs.status(control, run.run_id, "COMPLETED", "FAILED")
        assert await run.result(timeout=1) == "after"
    assert done.finished_at is not None
    late = done.finished_at - wake_at
    print(f"\n{seconds}s sleep, process killed: woke {late:.3f}s after due in a new process")
    assert 0 <= late < 1.0
    assert procs.counts() == {"before": 1, "after": 1}
    assert procs.pids("before") == {str(first.pid)}
    assert procs.pids("after") == {str(second.pid)}


async def _sleep_entry(control: cairn.Engine, run_id: str) -> cairn.HistoryEntry | None:
    return next((h for h in await control.history(run_id) if h.kind == "sleep"), None)


async def test_events__sent_while_no_worker_runs_are_delivered_later(
    tmp_path: Path, store_url: str
) -> None:
    async with workers(tmp_path, store_url) as (procs, control):
        first = procs.spawn()
        run = await control.start("proc.waiter", allow_unknown=True)
        parked = await procs.status(control, run.run_id, "WAITING")
        assert parked.waiting_for is not None and "go" in parked.waiting_for
        procs.kill(first)  # no worker runs now

        def from_a_script() -> None:
            with cairn.Client(store_url) as client:
                client.send_event(run.run_id, "go", {"n": 1})
                client.send_event(run.run_id, "go", {"n": 2}, idempotency_key="second")
                client.send_event(run.run_id, "go", {"n": 2}, idempotency_key="second")
                client.send_event(run.run_id, "go", {"n": 3})

        await asyncio.to_thread(from_a_script)
        assert await run.status() == cairn.RunStatus.WAITING
        second = procs.spawn()
        await procs.status(control, run.run_id, "COMPLETED", "FAILED")
        assert await run.result(timeout=1) == [{"n": 1}, {"n": 2}]
        history = await control.history(run.run_id)
    assert [(h.kind, h.result) for h in history if h.kind == "event"] == [
        ("event", {"n": 1}),
        ("event", {"n": 2}),
    ]
    assert procs.counts() == {"before": 1, "after [{'n': 1}, {'n': 2}]": 1}
    assert procs.pids("before") == {str(first.pid)}
    assert procs.pids("after [{'n': 1}, {'n': 2}]") == {str(second.pid)}
