"""cairn on Celery when the broker misbehaves: resets, frozen connections, bad messages.

Each fault is driven through a TCP proxy (tests/chaos/proxy.py) between the worker and a
real broker (RabbitMQ on 5672, Redis on 6379).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.chaos.proxy import FreezingProxy
from tests.process import celery_procs
from tests.process.celery_procs import DEADLINE, CeleryWorker, broker_port, proxied, until

import cairn

pytestmark = pytest.mark.process

broker = celery_procs.broker
procs = celery_procs.procs


@pytest.fixture
def proxy(broker: str) -> Iterator[FreezingProxy]:
    between = FreezingProxy(("127.0.0.1", broker_port(broker)))
    try:
        yield between
    finally:
        between.close()


def test_celery__connection_resets_do_not_stop_the_worker(
    sqlite_url: str, broker: str, proxy: FreezingProxy, tmp_path: Path, procs: list[CeleryWorker]
) -> None:
    worker = CeleryWorker(
        sqlite_url, proxied(broker, proxy.port), tmp_path, "worker", "--concurrency", "4"
    )
    procs.append(worker)
    worker.ready()
    with cairn.Client(sqlite_url) as client:
        handles = [client.start("celery.steady", n, allow_unknown=True) for n in range(12)]
        for _ in range(3):
            time.sleep(1.0)
            until("a reconnection", lambda: worker.alive() or proxy.open_links())
            proxy.reset()
        assert [handle.result(timeout=DEADLINE) for handle in handles] == list(range(12))
    worker.alive()


def test_celery__the_exit_status_says_whether_the_worker_failed(
    broker: str, tmp_path: Path, procs: list[CeleryWorker]
) -> None:
    unopenable = f"sqlite:///{tmp_path / 'no-such-folder' / 'cairn.db'}"
    failed = CeleryWorker(unopenable, broker, tmp_path, "failed")
    procs.append(failed)
    assert failed.proc.wait(timeout=DEADLINE) == 1, failed.log.read_text()[-2000:]
    assert "cairn engine failed to open: cannot open database" in failed.log.read_text()
    stopped = CeleryWorker(f"sqlite:///{tmp_path / 'cairn.db'}", broker, tmp_path, "stopped")
    procs.append(stopped)
    stopped.ready()
    stopped.proc.terminate()  # a warm shutdown: a success
    assert stopped.proc.wait(timeout=DEADLINE) == 0, stopped.log.read_text()[-2000:]
