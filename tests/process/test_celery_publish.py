"""What the dispatcher publishes is what `Task.apply_async(args=[id], queue=...)` sends.

cairn.celery.publishing builds the messages of a batch with Celery's own parts but skips
what `apply_async` repeats per message; a worker (cairn's, or a plain `celery worker` of
the app) must not see a difference. Against the real brokers (RabbitMQ, Redis).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.process import celery_procs

pytestmark = pytest.mark.process

broker = celery_procs.broker

# Differ between any two messages (ids, and where and when they were sent from).
_UNIQUE_HEADERS = {"id", "root_id", "origin"}
_UNIQUE_PROPERTIES = {"correlation_id", "delivery_tag", "body_encoding", "delivery_info"}
# RabbitMQ repeats the headers among the properties (compared as headers above).
_UNIQUE_PROPERTIES |= {"application_headers"}


def _drain(app: Any, queue: str, count: int) -> list[Any]:
    """The next `count` messages of `queue`, acknowledged."""
    from kombu import Queue

    got: list[Any] = []
    with app.connection_for_read() as connection:
        bound = Queue(queue)(connection.default_channel)
        for _ in range(200):
            message = bound.get(no_ack=True)
            if message is not None:
                got.append(message)
                if len(got) == count:
                    return got
            else:
                import time

                time.sleep(0.05)
    raise AssertionError(f"only {len(got)} of {count} messages arrived on {queue}")


def _shape(message: Any) -> dict[str, Any]:
    headers = {k: v for k, v in message.headers.items() if k not in _UNIQUE_HEADERS}
    properties = {k: v for k, v in message.properties.items() if k not in _UNIQUE_PROPERTIES}
    return {
        "headers": headers,
        "properties": properties,
        "content_type": message.content_type,
        "content_encoding": message.content_encoding,
        "body": message.decode(),
        "id_is_correlation": message.headers["id"] == message.properties["correlation_id"],
        "root_is_id": message.headers["root_id"] == message.headers["id"],
    }


def test_celery__a_batch_publishes_what_apply_async_would(broker: str, tmp_path: Path) -> None:
    from cairn import celery as cairn_celery
    from cairn.celery import publishing

    app = cairn_celery.app(broker, f"sqlite:///{tmp_path / 'cairn.db'}")
    queue = f"cairn.test-{uuid.uuid4().hex[:8]}"  # not declared yet: the batch declares it
    try:
        confirms = broker.startswith("amqp")
        batch = ["run-3", "run-4"]
        publishing.publish(
            app,
            [("run", "run-1", queue), ("step", "task-2", queue), ("runs", batch, queue)],
            confirms=confirms,
        )
        app.tasks["cairn.run"].apply_async(args=["run-1"], queue=queue)
        app.tasks["cairn.step"].apply_async(args=["task-2"], queue=queue)
        app.tasks["cairn.runs"].apply_async(args=[batch], queue=queue)
        batch_run, batch_step, batch_runs, own_run, own_step, own_runs = _drain(app, queue, 6)
        assert _shape(batch_run) == _shape(own_run)
        assert _shape(batch_step) == _shape(own_step)
        assert _shape(batch_runs) == _shape(own_runs)
        assert batch_runs.decode()[0] == [batch]
        assert batch_run.decode()[0] == ["run-1"]
        assert batch_step.headers["task"] == "cairn.step"
        assert batch_run.headers["id"] != own_run.headers["id"]
    finally:
        with app.connection_for_write() as connection:
            try:
                connection.default_channel.queue_delete(queue)
            except Exception:
                pass


def test_celery__redis_channels_share_one_client_per_pool(tmp_path: Path) -> None:
    # kombu makes a redis.Redis per command (publish, unacknowledged entry, ack): cairn's
    # transport makes one per channel and pool (cairn/celery/redis_transport.py).
    from cairn import celery as cairn_celery

    url, port = celery_procs.BROKERS["redis"]
    celery_procs.reachable_or_skip("redis", port)
    app = cairn_celery.app(url, f"sqlite:///{tmp_path / 'cairn.db'}")
    queue = f"cairn.test-{uuid.uuid4().hex[:8]}"
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        try:
            assert type(channel).__module__ == "cairn.celery.redis_transport"
            with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
                assert first is second
            mine = object()
            with channel.conn_or_acquire(mine) as given:
                assert given is mine  # a caller's own client (a pipeline's) is kept
            channel._disconnect_pools()  # what kombu does after a connection error
            with channel.conn_or_acquire() as after:
                assert after is not first
                assert after.connection_pool is channel.pool
            from cairn.celery import publishing

            publishing.publish(app, [("run", "run-1", queue)], confirms=False)
            (message,) = _drain(app, queue, 1)
            assert message.decode()[0] == ["run-1"]
        finally:
            channel.queue_delete(queue)
