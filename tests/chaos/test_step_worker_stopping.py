"""Stopping a `cairn worker --queue gpu` inside a step-queue attempt while its database is silent.

The worker's promise (docs/howto/workers.md, docs/howto/step-queues.md) holds for the
attempts it executes for a step queue too: it stops within its grace plus the hand-back
window, whether PostgreSQL hangs (a FreezingProxy) or a SQLite file's write lock is held
by another connection, and at once on a second signal. One worker executes the run (on
the database directly); the one stopped executes its "train" step for step queue "gpu".
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.chaos.harness import ROOT
from tests.chaos.signalled import SignalledProcess

import cairn
from cairn.runtime.worker import HAND_BACK, HURRIED

pytestmark = [pytest.mark.process, pytest.mark.timeout(180)]

GRACE = 2.0
# Besides the grace and the hand-back window: cancelling the loops, closing the store,
# and the interpreter's exit on a loaded machine (as tests/chaos/test_stopping.py).
SLACK = 4.0
DEADLINE = 60.0
FLOW = "tests.process.step_queue_flow"
LEASE = ("--lease", "10s")


class Worker(SignalledProcess):
    """A `cairn worker -m tests.process.step_queue_flow` process."""

    def __init__(self, url: str, folder: Path, name: str, *args: str) -> None:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")},
            "CAIRN_EFFECTS": str(folder / "effects.txt"),
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")]),
        }
        self.log = folder / f"{name}.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "cairn", "worker", "--db", url, "-m", FLOW, *LEASE, *args],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@contextlib.contextmanager
def _silence(
    request: pytest.FixtureRequest, store_url: str
) -> Iterator[tuple[str, Callable[[], None], Callable[[], None]]]:
    """(the stopped worker's URL, make its database silent, let it answer again)."""
    if store_url.startswith("sqlite"):
        holder = sqlite3.connect(store_url.removeprefix("sqlite:///"), isolation_level=None)
        try:
            yield (
                store_url,
                lambda: holder.execute("BEGIN IMMEDIATE"),  # every writer waits for it
                lambda: holder.execute("COMMIT"),
            )
        finally:
            holder.close()
        return
    freezing = request.getfixturevalue("freezing")

    def answer() -> None:
        freezing.thaw()
        freezing.restore()

    # A hung network path: nothing answers, nothing fails, new connections alike.
    yield freezing.url(store_url.rsplit("/", 1)[1]), lambda: freezing.freeze(new=True), answer


@contextlib.contextmanager
def _in_step(
    request: pytest.FixtureRequest, store_url: str, folder: Path, grace: float
) -> Iterator[tuple[Worker, Callable[[], None], Callable[[], None]]]:
    """The "gpu" worker inside the run's "train" attempt; silence, answer (as _silence)."""
    effects = folder / "effects.txt"
    workers: list[Worker] = []
    with _silence(request, store_url) as (url, silence, answer):
        try:
            workers.append(Worker(store_url, folder, "cpu"))
            gpu = Worker(url, folder, "gpu", "--queue", "gpu", "--grace", f"{grace:g}s")
            workers.append(gpu)
            with cairn.Client(store_url) as client:
                client.start("steps.pipeline", 2, allow_unknown=True)
            deadline = time.monotonic() + DEADLINE
            while f"train start pid={gpu.proc.pid}" not in (
                effects.read_text() if effects.exists() else ""
            ):
                for worker in workers:
                    assert worker.proc.poll() is None, worker.text()
                assert time.monotonic() < deadline, gpu.text()
                time.sleep(0.05)
            yield gpu, silence, answer
        finally:
            for worker in workers:
                worker.close()


def test_step_worker_stop__database_silent_exits_within_grace_and_hand_back(
    request: pytest.FixtureRequest, store_url: str, tmp_path: Path
) -> None:
    with _in_step(request, store_url, tmp_path, GRACE) as (gpu, silence, _):
        silence()
        time.sleep(1.0)
        took = gpu.stop(signal.SIGTERM)
    log = gpu.text()
    assert gpu.proc.returncode == 0, log
    assert took < GRACE + HAND_BACK + SLACK, f"{took:.1f} s\n{log}"


def test_step_worker_stop__second_signal_on_a_silent_database_stops_at_once(
    request: pytest.FixtureRequest, store_url: str, tmp_path: Path
) -> None:
    with _in_step(request, store_url, tmp_path, 60.0) as (gpu, silence, _):  # not waited out
        silence()
        time.sleep(1.0)
        took = gpu.stop(signal.SIGINT, again_after=1.0)
    log = gpu.text()
    assert gpu.proc.returncode == 0, log
    assert took < 1.0 + HURRIED + SLACK, f"{took:.1f} s\n{log}"
    assert "received again: stopping at once" in log, log


def test_step_worker_stop__database_back_just_before_hands_the_attempt_back(
    request: pytest.FixtureRequest, store_url: str, tmp_path: Path
) -> None:
    with _in_step(request, store_url, tmp_path, GRACE) as (gpu, silence, answer):
        silence()
        time.sleep(2.0)
        answer()
        took = gpu.stop(signal.SIGTERM)
        log = gpu.text()
        assert gpu.proc.returncode == 0, log
        assert took < GRACE + HAND_BACK + SLACK, f"{took:.1f} s\n{log}"
        # Handed back: claimed again by a worker of the queue at once, not after its lease.
        again = Worker(store_url, tmp_path, "gpu2", "--queue", "gpu")
        try:
            deadline = time.monotonic() + 5.0  # well within the 10 s lease
            effects = tmp_path / "effects.txt"
            while f"train start pid={again.proc.pid}" not in effects.read_text():
                assert time.monotonic() < deadline, again.text()
                time.sleep(0.05)
        finally:
            again.close()
