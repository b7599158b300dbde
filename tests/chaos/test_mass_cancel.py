"""An operator cancels runs in bulk while the network to PostgreSQL breaks in every way.

One worker with 200 runs in flight reaches PostgreSQL through two proxies: one that
loses the replies to committed writes (the connection dropped right after COMMIT), and
one that resets every connection, then freezes them for 10 s (no error, no reply). Half
of the runs are cancelled meanwhile with `cairn runs cancel`, one process per run, a few
at once, as `xargs -P 8` would; then the worker is stopped (SIGTERM) with its runs in
flight, and another takes them over. No step may start later than `LATE_START` after
its run's cancel was accepted. Every run must end (the cancelled ones CANCELLED unless
they completed first, the others COMPLETED with all ten steps), and no step whose
result was committed may run again (judged by the journal, as `journal_verdict`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tests.chaos.harness import ROOT, Chaos, Fault, Verdict, size
from tests.chaos.proxy import FreezingProxy, LosingProxy

import cairn

pytestmark = [pytest.mark.process, pytest.mark.timeout(900)]

RUNS = size(100, 200)
FREEZE = 10.0  # seconds
ENDED = ("COMPLETED", "FAILED", "CANCELLED")
# Seconds after its cancel was accepted that a step may still start: a worker learns of a
# cancel within a poll (50 ms here), reads slow a while after the freeze.
LATE_START = 2.0


@pytest.fixture
def proxies(pg_url: str) -> Iterator[tuple[FreezingProxy, LosingProxy]]:
    losing = LosingProxy(("127.0.0.1", 5432), rate=0.02, budget=40)
    freezing = FreezingProxy(("127.0.0.1", losing.port))
    try:
        yield freezing, losing
    finally:
        freezing.thaw()
        freezing.close()
        losing.close()


def _cancel(url: str, run_id: str) -> tuple[str, int, str, int]:
    """`cairn runs cancel RUN_ID`, as an operator types it; (run, exit code, output, and
    when it answered, on the clock of the side-effect logs)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")])}
    env.pop("CAIRN_DATABASE_URL", None)
    command = [sys.executable, "-m", "cairn", "runs", "cancel", run_id, "--db", url]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    return run_id, done.returncode, (done.stdout + done.stderr).strip(), time.monotonic_ns()


def test_mass_cancel__200_runs_through_resets_a_freeze_and_lost_commits(
    tmp_path: Path, pg_url: str, proxies: tuple[FreezingProxy, LosingProxy]
) -> None:
    freezing, losing = proxies
    database = pg_url.rsplit("/", 1)[1]
    chaos = Chaos(tmp_path, pg_url, lease=5.0)  # the freeze outlasts the lease
    cancels: list[tuple[str, int, str, int]] = []
    try:
        worker = chaos.spawn(
            url=freezing.url(database), concurrency=RUNS, delay=6.0, retry_for=30.0
        )
        run_ids = chaos.enqueue(RUNS)
        doomed = run_ids[::2]
        chaos.wait_effects(RUNS)  # every run is under way (a step each, about)
        assert freezing.reset() > 0
        chaos.faults.append(Fault(chaos.tag(worker), chaos.mark(), "reset"))

        def cancel_all() -> None:
            with ThreadPoolExecutor(8) as pool:
                cancels.extend(pool.map(lambda r: _cancel(pg_url, r), doomed))

        cancelling = threading.Thread(target=cancel_all)
        cancelling.start()
        chaos.wait_effects(len(chaos.rows()) + RUNS)
        assert freezing.freeze() > 0
        chaos.faults.append(Fault(chaos.tag(worker), chaos.mark(), "frozen 10 s"))
        time.sleep(FREEZE)  # the fault itself: the network hangs this long
        freezing.thaw()
        chaos.wait_effects(len(chaos.rows()) + RUNS // 2)
        worker.send_signal(signal.SIGTERM)  # it hands its runs back, their writes cut off
        assert worker.wait(timeout=120) == 0, chaos.log_of(worker)[-4000:]
        chaos.faults.append(Fault(chaos.tag(worker), chaos.mark(), "stopped"))
        second = chaos.spawn(
            url=freezing.url(database), concurrency=RUNS, delay=6.0, retry_for=30.0
        )
        cancelling.join(timeout=300)
        assert not cancelling.is_alive(), "the cancels did not end"
        statuses = chaos.wait_done(run_ids, timeout=300)
        verdict = _judge(chaos, run_ids, statuses)
        settled = len(chaos.rows())
        time.sleep(2.0)
        assert len(chaos.rows()) == settled, "steps started after every run had ended"
    finally:
        chaos.stop_all()
    logs = chaos.log_of(worker) + chaos.log_of(second)
    refused = {run_id: out for run_id, code, out, _ in cancels if code != 0}
    accepted = {run_id: at for run_id, code, _, at in cancels if code == 0}
    # Steps started after their run's cancel was accepted: within a poll, the worker did not
    # know yet. Steps that had passed their durable point, then waited for a heartbeat
    # after the freeze, started up to 6 s late (they now wait before the point).
    after = sorted(
        ((when - accepted[run_id]) / 1e9, run_id, step)
        for when, _, run_id, step, phase in chaos.rows()
        if phase == "start" and run_id in accepted and when > accepted[run_id]
    )
    cancelled = {r for r, s in statuses.items() if s == "CANCELLED"}
    late = [r for r, code, _, _ in cancels if code == 0 and statuses[r] == "COMPLETED"]
    print(verdict, f"{len(cancelled)} cancelled, {len(refused)} refused (finished already),")
    print(f"{len(late)} completed in the step they were in; replies lost: {dict(losing.lost)}")
    print(f"steps started after their run's cancel was accepted: {after}")
    assert verdict.duplicates == [], chaos.story(verdict)
    assert cancelled <= set(doomed), cancelled - set(doomed)
    assert all(statuses[r] == "COMPLETED" for r in run_ids if r not in doomed)
    for run_id, code, out, _ in cancels:  # a refused cancel found the run finished already
        assert code == 0 or statuses[run_id] == "COMPLETED", (run_id, code, out)
        assert code != 0 or statuses[run_id] in ("CANCELLED", "COMPLETED"), (run_id, out)
    assert [row for row in after if row[0] > LATE_START] == [], after
    assert cancelled, "no cancel reached a run in flight: the scenario did not bite"
    assert "writer failed" not in logs and "Traceback" not in logs, logs[-4000:]
    assert chaos.effects_by(second) > 0
    assert sum(losing.lost.values()) > 0, "no reply was lost"


def _judge(chaos: Chaos, run_ids: list[str], statuses: dict[str, str]) -> Verdict:
    """`Chaos.journal_verdict` for runs that may end CANCELLED: every COMPLETED run has
    its ten steps recorded, and no step starts after the execution whose result was."""
    assert all(s in ENDED for s in statuses.values())
    assert "FAILED" not in statuses.values(), statuses
    committed: dict[tuple[str, int], tuple[int, str]] = {}
    with cairn.Client(chaos.url) as client:
        for run_id in run_ids:
            for entry in client.history(run_id):
                if entry.kind == "step" and isinstance(entry.result, dict):
                    key = (run_id, int(entry.result["step"]))
                    committed[key] = (int(entry.result["at"]), str(entry.result["by"]))
    for run_id in run_ids:
        if statuses[run_id] == "COMPLETED":
            missing = [s for s in range(10) if (run_id, s) not in committed]
            assert not missing, f"run {run_id} completed without steps {missing}"
    verdict = Verdict(runs=len(run_ids), steps=len(committed))
    for when, worker, run_id, step, phase in chaos.rows():
        if phase != "start" or (run_id, step) not in committed:
            continue
        at, by = committed[(run_id, step)]
        if when < at:
            verdict.excused += 1
        elif (when, worker) != (at, by):
            verdict.duplicates.append((run_id, step, by, worker))
    return verdict
