"""Publishing a batch of cairn messages: what `Task.apply_async` sends, for less per message.

The dispatcher publishes what it finds claimable (runs, several to a `cairn.runs`
message, and step attempts, one a message) in batches of up to hundreds of messages.
`apply_async` spends most of its time on what is the same for every message of a batch
(routing, options, a result object, declaring the queue again), so a batch builds each
message with Celery's own `as_task_v2` and sends it with Celery's own `send_task_message`
(its exchange, routing key, delivery mode, serializer and retry policy), declaring each
Celery queue once per batch. What a worker receives is the same message
`apply_async(args=[id], queue=...)` (`args=[[id, ...]]` for a batch of runs) sends
(tests/process/test_celery_publish.py).
"""

from __future__ import annotations

from typing import Any

from kombu.utils.uuid import uuid

from cairn.celery.batching import RUN, RUNS, Message

RUN_TASK = "cairn.run"
RUNS_TASK = "cairn.runs"
STEP_TASK = "cairn.step"
_TASKS = {RUN: RUN_TASK, RUNS: RUNS_TASK}


def publish(application: Any, messages: list[Message], *, confirms: bool) -> None:
    """Send `messages` ((RUN, RUNS or STEP, its id or ids, Celery queue), in order) on one producer.

    `confirms`: end with one round trip (RabbitMQ), whose answer comes once the broker
    has taken every message sent before it on this channel. A hung connection times out
    there (read_timeout) and the caller publishes the batch again (a duplicate claims
    nothing). Raises on any error: the broker may not have them all.
    """
    amqp = application.amqp
    reply_to = application.thread_oid
    with application.producer_or_acquire() as producer:
        declared: set[str] = set()
        for kind, ident, queue in messages:
            name = _TASKS.get(kind, STEP_TASK)
            task_id = uuid()
            args = [ident]
            message = amqp.as_task_v2(
                task_id,
                name,
                args=args,
                kwargs={},
                reply_to=reply_to,
                ignore_result=True,
                argsrepr=repr(args),
                kwargsrepr="{}",
            )
            # Declared (once per batch, and kombu remembers it per connection) before its
            # first message: a message to a queue RabbitMQ does not know is dropped.
            declare: list[Any] | None = None if queue not in declared else []
            declared.add(queue)
            # priority=None as apply_async passes it (kombu would send 0 otherwise).
            amqp.send_task_message(
                producer, name, message, queue=queue, declare=declare, priority=None
            )
        if confirms:
            producer.channel.basic_qos(0, 0, False)


def connect(application: Any) -> None:
    """Open the publishing connection and its channel, as a worker's first publish would.

    In a fresh worker that publish took 25-40 ms on Redis and 10 on RabbitMQ, where a
    warm one takes 1 to 2, under the worker's first runs. Raises if the broker does not
    answer (tried twice, each bounded by the broker timeout): the first publish then
    connects, as before.
    """
    with application.producer_or_acquire() as producer:
        producer.connection.ensure_connection(max_retries=1)
        _ = producer.channel  # a property: opens the channel
