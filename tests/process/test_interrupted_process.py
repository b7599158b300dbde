"""A worker process killed with SIGKILL mid-step: its step was shown executing, and the
worker that takes the run over records it as an interrupted attempt (it may have run)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from tests.dashboard.server import start_server
from tests.stopped_processes import stop_outside_a_write

import cairn

from .worker_procs import workers

pytestmark = pytest.mark.process


async def test_kill_9__the_step_in_flight_becomes_an_interrupted_attempt(
    tmp_path: Path, store_url: str
) -> None:
    async with workers(tmp_path, store_url) as (procs, control):
        victim = procs.spawn()
        run = await control.start("proc.control", "async", 0, allow_unknown=True)
        await procs.until("the held step", lambda: procs.counts()["held start"] == 1)
        # The worker's heartbeat shows it executing (its lease is 30 s: a beat is asked for).
        [step] = await procs.until(
            "the executing step", lambda: control.control.executing(run.run_id)
        )
        procs.kill(victim)
        procs.spawn()  # sees the victim's process gone, and takes the run over

        async def interrupted() -> list[dict[str, object]]:
            found = await control.control.attempts(run.run_id)
            return [a for a in found if a["outcome"] == "interrupted"]

        [attempt] = await procs.until("the interrupted attempt", interrupted)
        [again] = await procs.until(
            "attempt 2 executing", lambda: control.control.executing(run.run_id)
        )
        procs.release()
        await procs.status(control, run.run_id, "COMPLETED")
        history = await control.history(run.run_id)

    assert (step["key"], step["attempt"], step["execution"]) == ("held_async#1", 1, 1)
    assert step["worker"].split(":")[1] == str(victim.pid)  # host:pid:random
    assert (again["key"], again["attempt"]) == ("held_async#1", 2)
    assert again["worker"] != step["worker"]
    assert (attempt["key"], attempt["attempt"], attempt["worker"]) == (
        "held_async#1",
        1,
        step["worker"],
    )
    assert attempt["started_at"] == step["started_at"]
    assert history[0].key == "held_async#1" and history[0].attempts == 2
    # It did run twice, once in each process: what the interrupted attempt warns of.
    assert procs.counts()["held start"] == 2 and len(procs.pids("held start")) == 2
    # Every recovery recorded what it interrupted: no caveat under the history.
    assert "no step recorded in flight" not in runs_show(store_url, run.run_id)


async def test_kill_9_at_once__the_view_says_a_step_may_have_started_unrecorded(
    tmp_path: Path, store_url: str
) -> None:
    """Killed before its heartbeat published the step: nothing says it ran, save the effect.

    Recording it would take a write per step; the view says what is known instead.
    """
    async with workers(tmp_path, store_url) as (procs, control):
        victim = procs.spawn()
        run = await control.start("proc.control", "async", 0, allow_unknown=True)
        await procs.until("the held step", lambda: procs.counts()["held start"] == 1)
        procs.kill(victim)  # within milliseconds of the step's start: not yet published
        procs.spawn()
        await procs.until("the step again", lambda: procs.counts()["held start"] == 2)
        procs.release()
        record = await procs.status(control, run.run_id, "COMPLETED")
        history = await control.history(run.run_id)
        attempts = await control.control.attempts(run.run_id)

    assert len(procs.pids("held start")) == 2  # it started in both processes
    assert record.recoveries == 1
    assert history[0].key == "held_async#1" and history[0].attempts == 1 and attempts == []
    said = (
        "taken over once from a worker that died or lost its lease, with no step recorded "
        "in flight: a step that had run under about a second may have started once more "
        "than its ATTEMPTS say"
    )
    assert said in " ".join(runs_show(store_url, run.run_id).split())
    dashboard = start_server(store_url, tmp_path)  # the run page says it too
    try:
        async with httpx.AsyncClient(base_url=dashboard.url, timeout=10) as web:
            page = (await web.get(f"/runs/{run.run_id}")).text
    finally:
        dashboard.stop()
    assert f'data-field="unrecorded">{said}<' in page


async def test_lease_lost_at_once__nothing_records_the_attempt_cut_off(
    tmp_path: Path, store_url: str
) -> None:
    """A worker stopped (SIGSTOP) before its heartbeat published the step loses the run to
    another worker, which runs the step again as attempt 1: it never heard of the first.

    Resumed, the first worker ends its attempt (a sync step's thread runs on to its end;
    its writes are fenced off) and records nothing either: by then its attempt's number
    is the new worker's. The view says what is known, as for a worker that died.
    """
    async with workers(tmp_path, store_url) as (procs, control):
        victim = procs.spawn("--lease", "2s")
        run = await control.start("proc.control", "sync", 0, allow_unknown=True)
        await procs.until("the held step", lambda: procs.counts()["held start"] == 1)
        # Within milliseconds of the step's start, and never inside a SQLite commit: a
        # worker frozen there would hold the write lock, and nobody could take over.
        stop_outside_a_write(victim.pid, store_url)
        try:
            procs.spawn("--lease", "2s")  # takes the run once the victim's lease has run out
            await procs.until("the step again", lambda: procs.counts()["held start"] == 2)
        finally:
            victim.send_signal(signal.SIGCONT)
        procs.release()
        await procs.until("both attempts' ends", lambda: procs.counts()["held end"] == 2)
        record = await procs.status(control, run.run_id, "COMPLETED")
        history = await control.history(run.run_id)
        attempts = await control.control.attempts(run.run_id)
        assert victim.poll() is None  # alive all along: it lost the run, it did not die

    assert len(procs.pids("held end")) == 2  # both attempts ran to their end, side by side
    assert record.recoveries == 1
    assert history[0].key == "held_sync#1" and history[0].attempts == 1 and attempts == []
    said = (
        "taken over once from a worker that died or lost its lease, with no step recorded "
        "in flight: a step that had run under about a second may have started once more "
        "than its ATTEMPTS say"
    )
    assert said in " ".join(runs_show(store_url, run.run_id).split())


def runs_show(url: str, run_id: str) -> str:
    """`cairn runs show RUN_ID` at 80 columns."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env.update(COLUMNS="80", PYTHONPATH=str(Path(cairn.__file__).resolve().parents[1]))
    proc = subprocess.run(
        [sys.executable, "-m", "cairn", "runs", "show", run_id, "--db", url],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80, proc.stdout
    return proc.stdout
