"""Stopping `cairn worker`: SIGTERM lets steps in flight finish (`--grace`), hands each run
back at once, and a second signal stops at once.

Runs are held by a step that waits for a file; the lease is a minute, so a run that another
worker finishes within the test's deadline was handed back, not taken over after its lease
(and the database says so: a handed-back run is claimed without counting a recovery).
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import cairn
from cairn.store import open_store
from cairn.store.programs import journal as journal_ops
from cairn.store.programs import runs

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 30.0  # seconds; far below the one-minute lease


class Worker:
    """A `cairn worker` process whose stderr lines the test reads as they come."""

    def __init__(self, url: str, effects: Path, *args: str) -> None:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")},
            "CAIRN_EFFECTS": str(effects),
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")]),
        }
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cairn",
                "worker",
                "--db",
                url,
                "-m",
                "tests.process.shutdown_flow",
                "--lease",
                "60s",
                *args,
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.log: list[str] = []
        self.pump = threading.Thread(target=self._pump, daemon=True)
        self.pump.start()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, text: str) -> str:
        deadline = time.monotonic() + DEADLINE
        while True:
            line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            assert line is not None, f"worker exited before logging {text!r}: {self.log}"
            self.log.append(line)
            if text in line:
                return line

    def signal(self) -> None:
        self.proc.send_signal(signal.SIGTERM)

    def exit_code(self) -> int:
        code = self.proc.wait(timeout=DEADLINE)
        while (line := self.lines.get(timeout=DEADLINE)) is not None:
            self.log.append(line)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.pump.join(timeout=DEADLINE)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@pytest.fixture
def procs() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.close()


def _effects(path: Path) -> Counter[str]:
    if not path.exists():
        return Counter()
    return Counter(line.rsplit(" pid=", 1)[0] for line in path.read_text().splitlines())


def _start(url: str, kind: str) -> str:
    with cairn.Client(url) as client:
        return client.start("shutdown.held", kind, run_id=f"held-{kind}", allow_unknown=True).run_id


async def _stored(url: str, run_id: str) -> tuple[str, str | None, int, list[str]]:
    store = open_store(url)
    await store.open()
    try:
        run = await store.read(runs.get_run(run_id))
        journal = await store.read(journal_ops.load_journal(run_id))
    finally:
        await store.close()
    assert run is not None
    return run.status, run.owner, run.recoveries, [step.key for step in journal]


def _stored_now(url: str, run_id: str) -> tuple[str, str | None, int, list[str]]:
    import asyncio

    return asyncio.run(_stored(url, run_id))


def _held(effects: Path, worker: Worker) -> None:
    """Until the worker is inside the held step (failing if it exits first)."""
    deadline = time.monotonic() + DEADLINE
    while _effects(effects)["held start"] < 1:
        if worker.proc.poll() is not None:
            worker.exit_code()
            pytest.fail(f"the worker exited ({worker.proc.returncode}): {worker.log[-10:]}")
        assert time.monotonic() < deadline, f"no held step within {DEADLINE}s"
        time.sleep(0.01)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_sigterm__the_step_in_flight_finishes_and_another_worker_takes_the_run_at_once(
    store_url: str, tmp_path: Path, procs: list[Worker], kind: str
) -> None:
    effects = tmp_path / "effects.txt"
    run_id = _start(store_url, kind)
    first = Worker(store_url, effects, "--grace", "1m")
    procs.append(first)
    _held(effects, first)
    first.signal()
    first.wait_for("stopping: 1 run(s) in flight")
    (tmp_path / "release").touch()  # the step finishes within the grace
    assert first.exit_code() == 0
    assert any(f"run {run_id} handed back" in line for line in first.log), first.log

    status, owner, recoveries, journal = _stored_now(store_url, run_id)
    assert (status, owner, journal) == ("PENDING", None, ["held_" + kind + "#1"])

    second = Worker(store_url, effects)
    procs.append(second)
    second.wait_for(f"run {run_id} COMPLETED")
    status, _, recoveries, journal = _stored_now(store_url, run_id)
    # Claimed as a run handed back, not recovered from a worker presumed dead.
    assert (status, recoveries) == ("COMPLETED", 0)
    assert _effects(effects) == Counter({"held start": 1, "held end": 1, "after": 1})


def test_sigterm__a_step_outlasting_the_grace_is_cut_off_and_its_run_handed_back(
    store_url: str, tmp_path: Path, procs: list[Worker]
) -> None:
    effects = tmp_path / "effects.txt"
    run_id = _start(store_url, "sync")
    first = Worker(store_url, effects, "--grace", "200ms")
    procs.append(first)
    _held(effects, first)
    first.signal()
    # Its sync step's thread cannot be stopped: the process exits without it.
    assert first.exit_code() == 0
    assert any("'held_sync#1' cut off" in line for line in first.log), first.log
    assert _stored_now(store_url, run_id)[:3] == ("PENDING", None, 0)

    (tmp_path / "release").touch()
    second = Worker(store_url, effects)
    procs.append(second)
    second.wait_for(f"run {run_id} COMPLETED")
    # The cut-off step ran again; the first execution never recorded anything.
    assert _effects(effects) == Counter({"held start": 2, "held end": 1, "after": 1})


def test_sigterm_twice__the_second_signal_stops_at_once(
    store_url: str, tmp_path: Path, procs: list[Worker]
) -> None:
    effects = tmp_path / "effects.txt"
    run_id = _start(store_url, "async")
    first = Worker(store_url, effects, "--grace", "1h")
    procs.append(first)
    _held(effects, first)
    first.signal()
    first.wait_for("stopping: 1 run(s) in flight")
    first.signal()
    assert first.exit_code() == 0  # within the test's deadline, not the hour of grace
    assert any("stopping at once" in line for line in first.log), first.log
    assert _stored_now(store_url, run_id)[:3] == ("PENDING", None, 0)


def test_worker__a_bad_grace_is_refused_naming_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cairn.db'}"
    proc = subprocess.run(
        [sys.executable, "-m", "cairn", "worker", "--db", url, "--grace", "soon"],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "grace" in last and "'soon'" in last, last
    assert not (tmp_path / "cairn.db").exists()  # refused before anything started
