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
from tests.process.celery_procs import (
    CeleryWorker,
    broker_port,
    proxied,
    purge,
    results,
    until,
)

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
        assert results(handles, [worker]) == list(range(12))
    worker.alive()


def test_celery__the_exit_status_says_whether_the_worker_failed(
    broker: str, tmp_path: Path, procs: list[CeleryWorker]
) -> None:
    unopenable = f"sqlite:///{tmp_path / 'no-such-folder' / 'cairn.db'}"
    failed = CeleryWorker(unopenable, broker, tmp_path, "failed")
    procs.append(failed)
    assert failed.exit_code() == 1, failed.log.read_text()[-2000:]
    assert "cairn engine failed to open: cannot open database" in failed.log.read_text()
    stopped = CeleryWorker(f"sqlite:///{tmp_path / 'cairn.db'}", broker, tmp_path, "stopped")
    procs.append(stopped)
    stopped.ready()
    stopped.proc.terminate()  # a warm shutdown: a success
    assert stopped.exit_code() == 0, stopped.log.read_text()[-2000:]


def _publish_raw(broker: str, messages: list[tuple[dict[str, object], str]]) -> None:
    """Put (headers, JSON body text) messages on Celery queue "cairn", as any client could."""
    from kombu import Connection, Queue

    with Connection(broker) as connection:
        producer = connection.Producer()
        for headers, body in messages:
            producer.publish(
                body,
                exchange="",
                routing_key="cairn",
                declare=[Queue("cairn")],  # type: ignore[no-untyped-call]
                headers=headers,
                content_type="application/json",
                content_encoding="utf-8",
            )


def test_celery__messages_the_worker_cannot_use_are_dropped_not_fatal(
    sqlite_url: str, broker: str, tmp_path: Path, procs: list[CeleryWorker]
) -> None:
    purge(broker, "cairn")
    worker = CeleryWorker(sqlite_url, broker, tmp_path, "worker", "--concurrency", "2")
    procs.append(worker)
    worker.ready()
    run = {"task": "cairn.run", "lang": "py"}
    bad = [
        ({**run, "id": "null-body"}, "null"),
        ({**run, "id": "integer-body"}, "5"),
        ({**run, "id": "object-body"}, '{"run_id": "x"}'),
        (run, '[["some-run"], {}, {}]'),  # no id
        ({**run, "id": "integer-run-id"}, "[[5], {}, {}]"),
        ({**run, "id": "no-run-id"}, "[[], {}, {}]"),
        ({**run, "id": "not-json"}, '[["x"'),
        ({"task": "cairn.step", "id": "step-null"}, "null"),
    ]
    _publish_raw(broker, bad)
    with cairn.Client(sqlite_url) as client:
        handle = client.start("celery.math", 3, allow_unknown=True)
        assert results([handle], [worker]) == [[9, 81]]
    until("every bad message logged", lambda: worker.log.read_text().count("dropped") >= len(bad))
    time.sleep(0.5)  # none comes back
    worker.alive()
    assert worker.log.read_text().count("dropped") == len(bad), worker.log.read_text()[-3000:]
