"""A worker serving every workflow queue consumes each run queue's Celery queue once.

Celery's consumer is stood in for by a recorder of what would run on its own loop; the
whole path, with real brokers: test_celery.py (..._serves_runs_of_every_workflow_queue).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from cairn.celery.consuming import EveryQueue


class Consumer:
    def __init__(self, selected: list[str]) -> None:
        self.app = SimpleNamespace(
            amqp=SimpleNamespace(queues=SimpleNamespace(consume_from=selected))
        )
        self.soon: list[tuple[Any, str]] = []

    def add_task_queue(self, queue: str) -> None:  # pragma: no cover - only scheduled
        raise AssertionError("must run on the consumer's loop, through call_soon")

    def call_soon(self, fn: Any, queue: str) -> None:
        self.soon.append((fn, queue))


def test_every_queue__adds_each_run_queue_once_and_never_a_step_queue() -> None:
    every = EveryQueue(["cairn"])
    consumer = Consumer(["cairn"])
    every.attach(consumer)
    every.published([("run", "r1", "cairn"), ("runs", ["r2", "r3"], "cairn.pay")])
    every.published([("run", "r4", "cairn.pay"), ("step", "t1", "cairn.step.gpu")])
    assert [queue for _, queue in consumer.soon] == ["cairn.pay"]
    assert consumer.soon[0][0] == consumer.add_task_queue


def test_every_queue__a_worker_given_its_queues_keeps_to_them() -> None:
    every = EveryQueue(["cairn"])
    consumer = Consumer(["cairn.limited"])  # celery worker -Q cairn.limited
    every.attach(consumer)
    every.published([("run", "r1", "cairn.pay")])
    assert consumer.soon == []


def test_every_queue__nothing_is_added_before_the_worker_is_ready() -> None:
    every = EveryQueue(["cairn"])
    every.published([("run", "r1", "cairn.pay")])  # no consumer yet: nothing to add to
    consumer = Consumer(["cairn"])
    every.attach(consumer)
    every.published([("run", "r1", "cairn.pay")])
    assert [queue for _, queue in consumer.soon] == ["cairn.pay"]
