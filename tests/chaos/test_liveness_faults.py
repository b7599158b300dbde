"""Workers that are alive but look dead, on both stores: no step runs twice.

Each scenario leaves every worker alive; the contract allows no second execution of any
step except one cut off by SIGSTOP while in flight (it had not committed when frozen).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import time

import pytest
from tests.chaos.harness import Chaos, size
from tests.stopped_processes import sqlite_writable

pytestmark = [pytest.mark.process, pytest.mark.timeout(900)]


def test_pid_namespaces__two_workers_with_one_hostname_never_take_each_others_runs(
    chaos: Chaos,
) -> None:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("separate PID namespaces need unshare and root")
    unshare = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child=SIGTERM"]
    # Inside, a shell (pid 1) starts the worker as pid 2 in one namespace and pid 3 in the
    # other: each finds the other's pid free in its own namespace, and a worker that took
    # that for proof of death would take the other's runs.
    first = chaos.spawn(wrapper=[*unshare, "sh", "-c", '"$@"', "sh"], delay=0.05)
    second = chaos.spawn(wrapper=[*unshare, "sh", "-c", '/bin/true; "$@"', "sh"], delay=0.05)
    # Runs come once both are up: a slow start of the second (a loaded machine) otherwise
    # let the first finish everything alone, and the scenario proved nothing.
    run_ids = chaos.enqueue(size(40, 300))
    verdict = chaos.verdict(run_ids)
    print(verdict)
    assert verdict.duplicates == [], chaos.story(verdict)
    assert chaos.effects_by(first) > 0 and chaos.effects_by(second) > 0


def test_sigstop__a_worker_frozen_past_its_lease_and_thawed_runs_nothing_twice(
    chaos: Chaos,
) -> None:
    run_ids = chaos.enqueue(size(60, 200))
    workers = [chaos.spawn(concurrency=5, delay=0.25), chaos.spawn(concurrency=5, delay=0.25)]
    rounds = size(3, 10)
    for round_ in range(rounds):
        victim = workers[round_ % 2]
        held = _busy(chaos, victim)  # it holds runs mid-step
        _freeze_outside_a_commit(chaos, victim)
        chaos.wait_taken_over(held, victim)  # its lease ran out and the other took over
        time.sleep(chaos.lease / 2)
        chaos.thaw(victim)  # its old attempts must find their claims gone
    verdict = chaos.verdict(run_ids)
    print(verdict, f"{rounds} freezes")
    assert verdict.duplicates == [], chaos.story(verdict)
    assert verdict.excused > 0  # the freezes did cut steps off: the scenario bit
    for worker in workers:  # a freeze is reported as one, not blamed on a step
        log = chaos.log_of(worker)
        assert "stood still" in log and "has been blocked" not in log, log[-2000:]


def _freeze_outside_a_commit(chaos: Chaos, proc: subprocess.Popen[bytes]) -> None:
    """SIGSTOP `proc`, but never while it holds SQLite's write lock.

    That lock has no lease: a process frozen inside a commit stops every writer until it
    thaws, so no other worker could take over (PostgreSQL has no such lock to hold).
    """
    while True:
        chaos.freeze(proc)
        if not chaos.url.startswith("sqlite") or sqlite_writable(chaos.url, wait=1):
            return
        chaos.thaw(proc)
        time.sleep(0.05)


def _busy(chaos: Chaos, proc: subprocess.Popen[bytes]) -> set[str]:
    """The runs `proc` is executing a step of, once it executes some."""
    deadline = time.monotonic() + 60
    while not (held := chaos.in_flight(proc)):
        assert time.monotonic() < deadline, (
            f"the worker never had a step in flight: {chaos.log_of(proc)[-3000:]}"
        )
        time.sleep(0.02)
    return held


def test_blocked_loop__a_step_blocking_the_loop_past_the_lease_keeps_its_run(
    chaos: Chaos,
) -> None:
    run_ids = chaos.enqueue(size(10, 40))
    blocker = chaos.spawn(env={"CAIRN_BLOCK_FOR": str(chaos.lease * 1.5)}, concurrency=4)
    chaos.wait_effects(1, blocker)
    chaos.spawn(concurrency=4)
    verdict = chaos.verdict(run_ids)
    print(verdict)
    assert verdict.duplicates == [], chaos.story(verdict)
    log = chaos.log_of(blocker)
    assert "the event loop has been blocked" in log and "'chaos_effect#4'" in log, log[-2000:]


def test_sqlite_lock__an_outside_connection_holding_the_write_lock_past_the_lease(
    chaos: Chaos,
) -> None:
    if not chaos.url.startswith("sqlite"):
        pytest.skip("the write lock of a database file is SQLite's")
    run_ids = chaos.enqueue(size(30, 120))
    chaos.spawn(concurrency=5, delay=0.1)
    chaos.spawn(concurrency=5, delay=0.1)
    path = chaos.url.removeprefix("sqlite:///")
    for _ in range(size(2, 6)):
        chaos.wait_effects(len(chaos.rows()) + 20)
        holder = sqlite3.connect(path, isolation_level=None, timeout=30)
        holder.execute("BEGIN IMMEDIATE")  # every writer now waits for us
        time.sleep(chaos.lease * 2)
        holder.execute("COMMIT")
        holder.close()
    verdict = chaos.verdict(run_ids)
    print(verdict)
    assert verdict.duplicates == [], chaos.story(verdict)


def _faketime() -> str:
    found = shutil.which("faketime")
    if found is None:
        from tests.conftest import IN_CI

        reason = "the clock shim needs libfaketime (apt-get install faketime)"
        if IN_CI:
            pytest.fail(f"CI=true but {reason}", pytrace=False)
        pytest.skip(reason)
    return found


@pytest.mark.parametrize("leases", [2 / 3, -2 / 3, 10, -10])
def test_clock_skew__a_worker_whose_clock_is_off_judges_by_the_databases(
    chaos: Chaos, leases: float
) -> None:
    if not chaos.url.startswith("postgres"):
        pytest.skip("SQLite's clock is the machine's: processes sharing a file share it")
    faketime = _faketime()
    run_ids = chaos.enqueue(size(30, 100))
    offset = f"{leases * chaos.lease:+.1f}s"
    chaos.spawn(concurrency=5, delay=0.1)
    skewed = chaos.spawn(
        wrapper=[faketime, "-f", offset],
        env={"FAKETIME_DONT_FAKE_MONOTONIC": "1"},
        concurrency=5,
        delay=0.1,
    )
    verdict = chaos.verdict(run_ids)
    print(offset, verdict)
    assert verdict.duplicates == [], chaos.story(verdict)
    assert chaos.effects_by(skewed) > 0
