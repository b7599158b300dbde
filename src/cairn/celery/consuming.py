"""A worker that serves every workflow queue consumes each one's Celery queue as runs appear.

`cairn worker` without `--queue` executes every run, queued or not. Through Celery, the
runs of workflow queue Q travel on Celery queue "cairn.Q", which a worker consumes only
if it was told to: a worker started without `--queue` would leave them waiting for ever.
So such a worker starts consuming a run queue's Celery queue the first time its
dispatcher publishes there, whether the queue is declared in code, stored with limits, or
named only by the start (`queue="adhoc"`). A worker given its queues (`--queue`, or `-Q`
of `celery worker`) keeps to them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from cairn.celery.batching import STEP, Message
from cairn.observability import logcontext

log = logcontext.logger("cairn.celery")


class EveryQueue:
    """Adds the Celery queue of each workflow queue to a worker's consumer (`published`)."""

    def __init__(self, consumed: Iterable[str]) -> None:
        self._consumed = set(consumed)
        self._consumer: Any = None
        self._lock = threading.Lock()

    def attach(self, consumer: Any) -> None:
        """Serve through `consumer` (Celery's, at worker_ready), unless its queues were chosen.

        A worker whose selected queues are more than the default ones was given them
        (`celery worker -Q cairn.payments`): it keeps to them.
        """
        selected = set(consumer.app.amqp.queues.consume_from or ())
        if selected - self._consumed:
            return
        with self._lock:
            self._consumed |= selected
            self._consumer = consumer

    def published(self, messages: list[Message]) -> None:
        """Consume the Celery queues of the runs in `messages` (from any thread)."""
        consumer = self._consumer
        if consumer is None:
            return
        for kind, _, queue in messages:
            if kind == STEP:
                continue  # step queues are served only when named (--step-queue)
            with self._lock:
                if queue in self._consumed:
                    continue
                self._consumed.add(queue)
            # Celery's consumer is not thread-safe: its own loop adds the queue, soon.
            consumer.call_soon(consumer.add_task_queue, queue)
            log.info("cairn: consuming Celery queue %r (this worker serves every queue)", queue)
