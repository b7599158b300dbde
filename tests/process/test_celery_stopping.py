"""Stopping `cairn worker --transport celery` (SIGTERM) while its broker or database hangs.

docs/howto/celery.md promises a warm shutdown bounded like cairn's own worker's: steps in
flight finish within `--grace`, runs are handed back (or, the database silent, left to
their lease with a warning line), and the process exits a few seconds after that even
when Celery's own goodbye to the broker gets no answer. No run is lost, and no completed
step runs again (the effects file counts each step's ends).
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.chaos.proxy import FreezingProxy
from tests.process import celery_procs
from tests.process.celery_procs import (
    CeleryWorker,
    broker_port,
    effects,
    proxied,
    results,
    until,
)

import cairn
from cairn.celery.stopping import LINGER
from cairn.runtime.worker import HAND_BACK

pytestmark = [pytest.mark.process, celery_procs.ONE_AT_A_TIME, pytest.mark.timeout(240)]

broker = celery_procs.broker
procs = celery_procs.procs
own_queue = celery_procs.own_queue

GRACE = 2.0
# Besides the grace, the hand-back window and the linger: Celery's own stop and the
# interpreter's exit on a loaded machine. Without the linger a frozen broker held the exit
# for a broker timeout per call of Celery's goodbye (3 of them on RabbitMQ).
SLACK = 5.0
BROKER_TIMEOUT = "30"


@pytest.fixture
def proxy(broker: str) -> Iterator[FreezingProxy]:
    between = FreezingProxy(("127.0.0.1", broker_port(broker)))
    try:
        yield between
    finally:
        between.thaw()
        between.close()


@pytest.fixture
def freezing(pg_url: str) -> Iterator[FreezingProxy]:
    """A FreezingProxy in front of the shared PostgreSQL, thawed and closed afterwards."""
    between = FreezingProxy(("127.0.0.1", 5432))
    try:
        yield between
    finally:
        between.thaw()
        between.close()


def _stopped(worker: CeleryWorker) -> float:
    """SIGTERM; seconds until the process exited (fails with its log after 90 s)."""
    started = time.monotonic()
    worker.proc.send_signal(signal.SIGTERM)
    try:
        worker.proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        worker.proc.kill()
        worker.proc.wait()
        pytest.fail(f"still running 90 s after SIGTERM: {worker.log.read_text()[-6000:]}")
    return time.monotonic() - started


def _in_flight(root: Path, count: int) -> None:
    until(
        f"{count} steps in flight",
        lambda: sum(1 for what, _ in effects(root) if what.startswith("start")) >= count,
    )


def _finish_elsewhere(
    url: str,
    broker: str,
    root: Path,
    procs: list[CeleryWorker],
    run_ids: list[str],
    queue: str,
    fault: int | None = None,
) -> None:
    """A second worker completes every run; no step completed twice.

    `fault`: how many effects were written when the database froze. A step in flight
    then (started before, ended after) could not commit its outcome: it runs again.
    """
    second = CeleryWorker(url, broker, root, "second", "--concurrency", "4", "--queue", queue)
    procs.append(second)
    second.ready()
    with cairn.Client(url) as client:
        handles = [client.get(run_id) for run_id in run_ids]
        assert results(handles, [second], deadline=90) == [10] * len(run_ids)
    done = [what for what, _ in effects(root)]
    ends = Counter(what for what in done if what.startswith("end"))
    cut = set()
    if fault is not None:
        cut = {f"end {what[6:]}" for what in done[:fault] if what.startswith("start")}
        cut -= set(done[:fault])  # started before the fault and not ended by then
    assert len(ends) == 5 * len(run_ids), ends
    assert {what for what, n in ends.items() if n > 1} <= cut, (ends, cut)


def _start(url: str, runs: int, queue: str) -> list[str]:
    with cairn.Client(url) as client:
        return [
            client.start("celery.counted", n, 5, 0.6, queue=queue, allow_unknown=True).run_id
            for n in range(runs)
        ]


def test_celery_stop__a_frozen_broker_holds_the_exit_no_longer_than_a_linger(
    store_url: str,
    broker: str,
    proxy: FreezingProxy,
    tmp_path: Path,
    procs: list[CeleryWorker],
    own_queue: str,
) -> None:
    run_ids = _start(store_url, 4, own_queue)
    worker = CeleryWorker(
        store_url,
        proxied(broker, proxy.port),
        tmp_path,
        "first",
        *("--concurrency", "4", "--grace", f"{GRACE:g}s", "--queue", own_queue),
        env={"CAIRN_BROKER_TIMEOUT": BROKER_TIMEOUT},
    )
    procs.append(worker)
    worker.ready()
    _in_flight(tmp_path, 4)
    proxy.freeze(new=True)  # TCP up, not a byte through: Celery's goodbye hangs
    took = _stopped(worker)
    log = worker.log.read_text()
    assert worker.proc.returncode == 0, log[-4000:]
    assert took < GRACE + HAND_BACK + LINGER + SLACK, f"{took:.1f} s\n{log[-4000:]}"
    assert "handed back" in log, log[-4000:]
    assert "cairn: Celery's shutdown still waits on the broker" in log, log[-4000:]
    assert "Traceback" not in log, log[-6000:]
    proxy.thaw()
    _finish_elsewhere(store_url, broker, tmp_path, procs, run_ids, own_queue)


def test_celery_stop__a_frozen_database_leaves_runs_to_their_lease_in_one_line(
    pg_url: str,
    broker: str,
    freezing: FreezingProxy,
    tmp_path: Path,
    procs: list[CeleryWorker],
    own_queue: str,
) -> None:
    run_ids = _start(pg_url, 4, own_queue)
    worker = CeleryWorker(
        freezing.url(pg_url.rsplit("/", 1)[1]),
        broker,
        tmp_path,
        "first",
        *("--concurrency", "4", "--grace", f"{GRACE:g}s", "--queue", own_queue),
    )
    procs.append(worker)
    worker.ready()
    _in_flight(tmp_path, 4)
    fault = len(effects(tmp_path))
    freezing.freeze(new=True)  # a hung middlebox: nothing answers, nothing fails
    took = _stopped(worker)
    log = worker.log.read_text()
    assert worker.proc.returncode == 0, log[-4000:]
    assert took < GRACE + HAND_BACK + LINGER + SLACK, f"{took:.1f} s\n{log[-4000:]}"
    assert "stopped without handing its runs back" in log, log[-4000:]
    assert "Traceback" not in log, log[-6000:]
    freezing.thaw()
    _finish_elsewhere(pg_url, broker, tmp_path, procs, run_ids, own_queue, fault)
