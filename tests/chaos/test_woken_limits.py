"""Woken runs on a queue with a concurrency limit, under kill -9 and SIGSTOP, both stores.

Each run of `chaos.limited` parks half way and wakes, taking its queue's place again.
A worker killed in a woken run's step, and another frozen past its lease in one, must
leave the limit held at every moment (counted from the side-effect logs: the runs with a
step executing), and no step run twice except one a fault cut off.
"""

from __future__ import annotations

import subprocess
import time

import pytest
from tests.chaos import flow
from tests.chaos.harness import Chaos, size
from tests.chaos.test_liveness_faults import _freeze_outside_a_commit

pytestmark = [pytest.mark.process, pytest.mark.timeout(900)]


def test_woken_runs__a_queue_limit_holds_through_kill_and_freeze_and_no_step_runs_twice(
    chaos: Chaos,
) -> None:
    run_ids = chaos.enqueue(size(12, 60), "chaos.limited")
    # Ten slots for a queue of two places: only the limit keeps more from executing.
    first = chaos.spawn(concurrency=5, delay=0.2)
    second = chaos.spawn(concurrency=5, delay=0.2)
    victim = _in_a_woken_step(chaos, [first, second])
    chaos.kill(victim)
    survivor = second if victim is first else first
    third = chaos.spawn(concurrency=5, delay=0.2)
    frozen = _in_a_woken_step(chaos, [survivor, third])
    held = _woken_in_flight(chaos, frozen)
    _freeze_outside_a_commit(chaos, frozen)
    chaos.wait_taken_over(held, frozen)  # its lease ran out; another worker took over
    time.sleep(chaos.lease / 2)
    chaos.thaw(frozen)  # its old attempts must find their claims gone

    verdict = chaos.verdict(run_ids)
    most = _most_executing(chaos)
    print(verdict, f"at most {most} runs executing at once (limit {flow.LIMIT})")
    assert verdict.duplicates == [], chaos.story(verdict)
    assert verdict.excused > 0  # the faults did cut woken steps off: the scenario bit
    assert most == flow.LIMIT, chaos.story(verdict)  # held, and reached


def _woken_in_flight(chaos: Chaos, proc: subprocess.Popen[bytes]) -> set[str]:
    """The runs `proc` is executing a step of after their wake-up (a woken attempt)."""
    latest: dict[str, tuple[int, str]] = {}
    tag = chaos.tag(proc)
    for _, worker, run_id, step, phase in chaos.rows():
        if worker == tag:
            latest[run_id] = (step, phase)
    return {
        r for r, (step, phase) in latest.items() if phase == "start" and step >= flow.WOKEN_FROM
    }


def _in_a_woken_step(chaos: Chaos, procs: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """The first of `procs` seen executing a step of a woken run."""
    deadline = time.monotonic() + 120
    while True:
        for proc in procs:
            if _woken_in_flight(chaos, proc):
                return proc
        assert time.monotonic() < deadline, "no worker ever ran a woken run's step"
        time.sleep(0.01)


def _most_executing(chaos: Chaos) -> int:
    """The most runs with a step executing at one moment, by the side-effect logs.

    A run's execution counts from its start to its end, or until the run's next start
    (one cut off by a fault: the run's place passes with it to the worker that took it
    over; a frozen worker's late end of it then counts for nothing).
    """
    executing: dict[str, tuple[str, int]] = {}
    most = 0
    for _, worker, run_id, step, phase in chaos.rows():
        if phase == "start":
            executing[run_id] = (worker, step)
            most = max(most, len(executing))
        elif executing.get(run_id) == (worker, step):
            del executing[run_id]
    return most
