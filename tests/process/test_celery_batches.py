"""cairn on Celery: batch messages ("cairn.runs", several run ids in one message).

A look of the dispatcher that finds several runs for one Celery queue publishes them in
batches (cairn/celery/host.py); a batch's ids beyond a worker's free slots wait there for
one. Real brokers (RabbitMQ on 5672, Redis on 6379) and real processes.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from tests.process import celery_procs
from tests.process.celery_procs import CeleryWorker, results

import cairn

pytestmark = pytest.mark.process

broker = celery_procs.broker
procs = celery_procs.procs
own_queue = celery_procs.own_queue
_effects = celery_procs.effects
_until = celery_procs.until


def test_celery__a_batch_s_runs_execute_once_each_across_two_workers(
    sqlite_url: str, broker: str, tmp_path: Path, procs: list[CeleryWorker], own_queue: str
) -> None:
    from cairn import celery as cairn_celery

    with cairn.Client(sqlite_url) as client:
        # Stored before any worker looks: each dispatcher's first look finds all 40 and
        # publishes them in batches (two dispatchers: every run is published twice).
        handles = [
            client.start("celery.once", n, queue=own_queue, allow_unknown=True) for n in range(40)
        ]
        ids = [handle.run_id for handle in handles]
        app = cairn_celery.app(broker, sqlite_url)
        for _ in range(2):  # and whole batches delivered twice more, by hand
            app.send_task("cairn.runs", args=[ids], queue=f"cairn.{own_queue}")
        workers = [
            CeleryWorker(
                sqlite_url,
                broker,
                tmp_path,
                f"worker{i}",
                "--concurrency",
                "3",
                "--queue",
                own_queue,
            )
            for i in range(2)
        ]
        procs.extend(workers)
        for worker in workers:
            worker.ready()
        assert results(handles, workers) == list(range(40))
    counts = Counter(what for what, _ in _effects(tmp_path))
    assert counts == Counter({f"once {n}": 1 for n in range(40)})
    for worker in workers:
        worker.alive()


def test_celery__runs_of_a_batch_held_by_a_killed_worker_finish_elsewhere(
    store_url: str, broker: str, tmp_path: Path, procs: list[CeleryWorker], own_queue: str
) -> None:
    with cairn.Client(store_url) as client:
        handles = [
            client.start("celery.held", queue=own_queue, allow_unknown=True) for _ in range(8)
        ]
        # One slot, one Celery thread: the first batch message's first run holds the
        # slot, its other ids wait in the worker (their message acknowledged).
        first = CeleryWorker(
            store_url, broker, tmp_path, "first", "--concurrency", "1", "--queue", own_queue
        )
        procs.append(first)
        first.ready()
        _until("hold start", lambda: ("hold start", first.proc.pid) in _effects(tmp_path))
        first.proc.kill()  # SIGKILL with a batch in hand
        first.proc.wait()
        second = CeleryWorker(
            store_url, broker, tmp_path, "second", "--concurrency", "8", "--queue", own_queue
        )
        procs.append(second)
        second.ready()
        (tmp_path / "release").touch()
        assert results(handles, [second]) == [["first", "held", "last"]] * 8
    counts = Counter(what for what, _ in _effects(tmp_path))
    # Only the step the kill cut off ran twice.
    assert counts == Counter({"first": 8, "hold start": 9, "hold end": 8, "last": 8})
