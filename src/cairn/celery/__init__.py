"""cairn on Celery: runs handed to Celery workers (RabbitMQ or Redis) instead of polling.

```python
app = cairn.celery.app("amqp://guest:guest@127.0.0.1:5672//", db="postgresql://...",
                       modules=["myapp.flows"])
```

then `celery -A myproject.tasks worker` (or `cairn worker --transport celery`). The database
stays the source of truth: a message carries only run ids (one, or a batch), and the task
it starts claims those runs with cairn's own lease and fencing (see host.py), so a message
delivered twice, or redelivered after its worker died, takes nothing that another worker
holds or that has finished. Messages are acknowledged as their task starts (the database
keeps the run, however long it takes); one the worker cannot use is dropped (messages.py).
Needs `pip install 'cairn-workflows[celery]'`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from cairn import config, durations
from cairn.celery import broker, consuming, publishing, stopping
from cairn.celery.batching import DEFAULT_QUEUE, Message, celery_queue, step_celery_queue
from cairn.celery.host import Host, log
from cairn.errors import ConfigError
from cairn.store import locations

__all__ = ["BROKER_ENV", "HEALTH_ENV", "app", "consumed_queues", "find_broker"]

BROKER_ENV = "CAIRN_BROKER_URL"
HEALTH_ENV = "CAIRN_HEALTH_FILE"
_SCHEMES = ("amqp://", "pyamqp://", "amqps://", "redis://", "rediss://")


def find_broker(explicit: str | None = None) -> str:
    """The broker: `explicit`, else CAIRN_BROKER_URL, else [tool.cairn] broker_url.

    ConfigError if there is none, or it is not a RabbitMQ or Redis URL.
    """
    url = config.broker_url(explicit) or ""
    if not url:
        raise ConfigError(
            f"no Celery broker: pass --broker URL (or broker_url=) or set {BROKER_ENV} "
            "(amqp://... for RabbitMQ, redis://... for Redis)"
        )
    if not url.startswith(_SCHEMES):
        raise ConfigError(
            f"unsupported Celery broker URL {url!r}: use amqp://... (RabbitMQ) or "
            "redis://... (Redis)"
        )
    return url


def consumed_queues(
    queues: Sequence[str] | None, step_queues: Sequence[str] | None = None
) -> list[str]:
    """The Celery queues a worker consumes.

    "cairn" (or "cairn.Q" for each workflow queue Q instead), and "cairn.step.S" for each
    step queue S.
    """
    runs = [celery_queue(q) for q in queues] if queues else [DEFAULT_QUEUE]
    return runs + [step_celery_queue(s) for s in step_queues or ()]


def app(
    broker_url: str | None = None,
    db: str | None = None,
    *,
    modules: Sequence[str] = (),
    concurrency: int = 8,
    lease: Any = "10s",
    grace: Any = "25s",
    queues: Sequence[str] | None = None,
    step_queues: Sequence[str] | None = None,
    dispatch_interval: float = 0.2,
    broker_timeout: float | None = None,
    health_file: str | None = None,
) -> Any:
    """A Celery app whose workers execute cairn runs.

    Args:
        broker_url: `amqp://...` (RabbitMQ) or `redis://...` (Redis); default:
            CAIRN_BROKER_URL, else [tool.cairn] broker_url.
        db: cairn's database URL (default: CAIRN_DATABASE_URL, else sqlite:///cairn.db).
        modules: Modules to import so their workflows register (default: [tool.cairn]).
        concurrency: Runs a worker process executes at once (Celery's thread pool size).
        lease: How long a silent worker keeps its runs before others take them over.
        grace: On shutdown, how long steps in flight may finish before runs are handed back.
        queues: Workflow queues whose runs this worker takes (its Celery queues are
            "cairn.QUEUE"); default: every run, queued or not (Celery queue "cairn",
            and each workflow queue's as its dispatcher publishes there: consuming.py).
        step_queues: Step queues whose attempts this worker executes (their messages
            come on Celery queues "cairn.step.QUEUE").
        dispatch_interval: Seconds between the dispatcher's looks for runs to publish
            (PostgreSQL notifications cut it short).
        broker_timeout: Seconds any call to the broker may take, and between AMQP
            heartbeats (default: CAIRN_BROKER_TIMEOUT, else 10); see broker.py.
        health_file: A file the worker keeps up to date with whether its broker answers
            (JSON, see broker.BrokerState); default: CAIRN_HEALTH_FILE, else none.

    Returns:
        A `celery.Celery` app with the tasks `cairn.run` (its message: one run id),
        `cairn.runs` (a batch of run ids) and `cairn.step` (one step attempt's id).
        `app.cairn_queues` are the Celery queues its workers consume (`-Q` of `celery
        worker`).
    """
    try:
        from celery import Celery, signals
        from celery.exceptions import WorkerShutdown
        from kombu.entity import Queue
    except ImportError:  # pragma: no cover - the extra is missing
        raise ConfigError(
            "cairn.celery needs Celery: pip install 'cairn-workflows[celery]'"
        ) from None
    url = find_broker(broker_url)
    database = config.database_url(db)
    locations.refuse_memory(database, "cairn.celery (its workers are other processes)")
    durations.parse(lease, what="lease")
    durations.parse(grace, what="grace")
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise ValueError(f"concurrency must be a positive integer, got {concurrency!r}")
    timeout = broker.broker_timeout(broker_timeout)
    confirms = not url.startswith(("redis://", "rediss://"))  # Redis answers each LPUSH
    application = Celery("cairn", broker=url, set_as_current=False)
    application.conf.update(broker.settings(url, timeout))
    if not confirms:
        # One Redis client per channel, not per command (redis_transport.py); a string,
        # so that kombu imports it (and redis-py) only here.
        transport = "cairn.celery.redis_transport:Transport"
    else:
        # A frame larger than the connection allows is junk: reconnect (amqp_transport.py).
        tls = url.startswith("amqps://")
        transport = f"cairn.celery.amqp_transport:{'SSLTransport' if tls else 'Transport'}"
    application.conf.broker_transport = transport
    application.amqp.Connection = broker.named_connection(transport, url.split("://", 1)[0])
    broker.one_line_per_problem()
    application.conf.update(
        # A message is acknowledged as its task starts, before the claim: the database,
        # not the message, holds the run, so an attempt may outlast the broker's limit
        # on unacknowledged messages (RabbitMQ's consumer_timeout, 30 minutes). A worker
        # killed before its claim leaves the run to the dispatchers (published again).
        task_acks_late=False,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        # cairn's engine runs many runs on one event loop: Celery's threads only wait on it.
        worker_pool="threads",
        worker_concurrency=concurrency,
        task_default_queue=DEFAULT_QUEUE,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        # No remote control: cairn does not use it, and its pidbox queue, exclusive to a
        # connection, made a worker's reconnection fail (RESOURCE_LOCKED, while the broker
        # still held the old connection) and the worker stop.
        worker_enable_remote_control=False,
        # After a reconnect Celery lowers the prefetch count, and raises it again from
        # the pool thread that acknowledges a message: a blocking basic.qos on the
        # consumer's connection, whose reply the consumer's own loop may read first (the
        # thread, and its run, then hung for ever). Prefetch is 1 per thread anyway.
        worker_enable_prefetch_count_reduction=False,
        # Cancels only late-acknowledged tasks on a connection loss (none here: a cairn task
        # is acknowledged as it starts); set, Celery 5 no longer prints a long warning
        # about its coming default at every reconnection.
        worker_cancel_long_running_tasks_on_connection_loss=True,
        # A message the worker cannot use is logged and dropped, never fatal (messages.py).
        worker_consumer="cairn.celery.messages:Consumer",
    )

    def make_engine() -> Any:
        from cairn.runtime.engine import Engine

        return Engine(
            database,
            workers=host.concurrency,
            lease=lease,
            grace=grace,
            modules=tuple(modules),
            polls=False,
            step_queues=list(step_queues or ()),
        )

    every_queue = None if queues else consuming.EveryQueue(consumed_queues(queues, step_queues))

    def publish(messages: list[Message]) -> None:
        if every_queue is not None:
            every_queue.published(messages)
        publishing.publish(application, messages, confirms=confirms)

    def depth(queue: str) -> int:
        with application.pool.acquire(block=True, timeout=timeout) as connection:
            # A channel of its own: asking about a queue that does not exist closes it.
            with connection.channel() as channel:
                try:
                    declared = channel.queue_declare(queue=queue, passive=True)
                except connection.channel_errors:
                    return 0  # no such queue (yet): nothing waits there
                return int(declared.message_count)

    def connect() -> None:
        try:
            publishing.connect(application)
        except Exception as exc:  # the first publish connects instead
            host.broker.failed(exc, 0)

    host = Host(
        make_engine,
        publish,
        dispatch=dispatch_interval,
        depth=depth,
        connect=connect,
        probe_every=timeout,
        health_file=health_file or os.environ.get(HEALTH_ENV) or None,
    )
    host.concurrency = concurrency

    @application.task(name="cairn.run", acks_late=False, bind=True, shared=False)  # type: ignore[untyped-decorator]
    def run(self: Any, run_id: str) -> bool:
        """Claim run `run_id` and execute it until it finishes or parks (False: not taken)."""
        delivered = self.request.delivery_info or {}
        return host.take(run_id, delivered.get("routing_key"))

    @application.task(name="cairn.runs", acks_late=False, bind=True, shared=False)  # type: ignore[untyped-decorator]
    def runs(self: Any, run_ids: list[str]) -> int:
        """Claim runs `run_ids` (a batch) and execute them until each ends; how many were taken."""
        delivered = self.request.delivery_info or {}
        return host.take_batch(run_ids, delivered.get("routing_key"))

    @application.task(name="cairn.step", acks_late=False, shared=False)  # type: ignore[untyped-decorator]
    def step(task_id: str) -> bool:
        """Claim step attempt `task_id` and execute it until it is reported (False: not taken)."""
        return host.take_step(task_id)

    def on_ready(sender: Any = None, **_: Any) -> None:
        if getattr(sender, "app", None) is application:
            # As many runs at once as Celery has threads (`-c N` overrides `concurrency`).
            pool = getattr(getattr(sender, "controller", None), "concurrency", None)
            if isinstance(pool, int) and pool > 0:
                host.concurrency = pool
            if every_queue is not None:
                every_queue.attach(sender)
            try:
                host.start()
            except Exception as exc:
                # Celery logs a signal handler's error and goes on: a worker whose engine
                # cannot open must stop instead, and say it failed.
                log.error("cairn engine failed to open: %s", exc)
                raise WorkerShutdown(1) from exc

    watching: list[threading.Thread] = []

    def on_shutting_down(**_: Any) -> None:
        # A signal to a worker process: its exit is bounded once the engine has closed.
        stopper = host.stop()
        if not watching:
            watching.append(stopping.bound_exit(stopper))

    def on_shutdown(**_: Any) -> None:
        # The end of Celery's stop, on its main thread: the interpreter exits next, and
        # must not while the engine still hands runs back (stopping.py).
        host.stop().join()

    signals.worker_ready.connect(on_ready, weak=False)
    signals.worker_shutting_down.connect(on_shutting_down, weak=False)
    signals.worker_shutdown.connect(on_shutdown, weak=False)
    application.cairn_host = host
    application.cairn_queues = consumed_queues(queues, step_queues)
    # What `celery worker` consumes without -Q (messages to other queues create them).
    application.conf.task_queues = [
        Queue(name)  # type: ignore[no-untyped-call]
        for name in application.cairn_queues
    ]
    return application
