"""cairn on Celery when the broker misbehaves: resets, frozen connections, bad messages.

Each fault is driven through a TCP proxy (tests/chaos/proxy.py) between the worker and a
real broker (RabbitMQ on 5672, Redis on 6379).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.chaos.proxy import FreezingProxy
from tests.process import celery_procs
from tests.process.celery_procs import (
    BROKERS,
    IN_CI,
    CeleryWorker,
    broker_port,
    depth,
    proxied,
    purge,
    reachable_or_skip,
    results,
    until,
)

import cairn

pytestmark = [pytest.mark.process, celery_procs.ONE_AT_A_TIME]

broker = celery_procs.broker
procs = celery_procs.procs
own_queue = celery_procs.own_queue


@pytest.fixture
def proxy(broker: str) -> Iterator[FreezingProxy]:
    between = FreezingProxy(("127.0.0.1", broker_port(broker)))
    try:
        yield between
    finally:
        between.close()


def test_celery__connection_resets_do_not_stop_the_worker(
    sqlite_url: str,
    broker: str,
    proxy: FreezingProxy,
    tmp_path: Path,
    procs: list[CeleryWorker],
    own_queue: str,
) -> None:
    worker = CeleryWorker(
        sqlite_url,
        proxied(broker, proxy.port),
        tmp_path,
        "worker",
        *("--concurrency", "4", "--queue", own_queue),
    )
    procs.append(worker)
    worker.ready()
    with cairn.Client(sqlite_url) as client:
        handles = [
            client.start("celery.steady", n, queue=own_queue, allow_unknown=True) for n in range(12)
        ]
        for _ in range(3):
            time.sleep(1.0)
            until("a reconnection", lambda: worker.alive() or proxy.open_links())
            proxy.reset()
        assert results(handles, [worker]) == list(range(12))
    worker.alive()
    # Celery's multi-line warning about a setting that cancels late-acknowledged tasks (a
    # cairn task is acknowledged as it starts) is not repeated at every reconnection.
    assert "CPendingDeprecationWarning" not in worker.log.read_text()


def test_celery__junk_from_the_broker_does_not_stop_the_worker(
    sqlite_url: str,
    broker: str,
    proxy: FreezingProxy,
    tmp_path: Path,
    procs: list[CeleryWorker],
    own_queue: str,
) -> None:
    # Redis answers with a protocol error (a kombu "channel error"): Celery stopped the
    # worker ("Unrecoverable error: InvalidResponse") unless told to reconnect. RabbitMQ's
    # client read a header of a frame of 1.7 GB, and waited for it.
    worker = _through_junk(sqlite_url, broker, proxy, tmp_path, procs, own_queue)
    assert "Unrecoverable error" not in worker.log.read_text()


@pytest.mark.parametrize("broker", ["rabbitmq"], indirect=True)
def test_celery__junk_that_reads_as_a_small_frame_header_is_a_lost_connection(
    sqlite_url: str,
    broker: str,
    proxy: FreezingProxy,
    tmp_path: Path,
    procs: list[CeleryWorker],
    own_queue: str,
) -> None:
    # A frame header of 4096 bytes, then 4: py-amqp waited for the rest in a loop, the
    # dispatcher's publishing thread spinning there (about half a core), and published
    # nothing more: the runs started after the junk never ran.
    junk = b"\x01\x00\x01\x00\x00\x10\x00junk"
    worker = _through_junk(sqlite_url, broker, proxy, tmp_path, procs, own_queue, junk)
    assert "began a frame and sent nothing more for 5 s: not AMQP" in worker.log.read_text()


def _through_junk(
    sqlite_url: str,
    broker: str,
    proxy: FreezingProxy,
    tmp_path: Path,
    procs: list[CeleryWorker],
    own_queue: str,
    junk: bytes | None = None,
) -> CeleryWorker:
    """A worker behind `proxy` that is sent `junk` (the proxy's own by default) while it
    executes 8 runs; it finishes them and 4 started after (asserted), and lives on."""
    worker = CeleryWorker(
        sqlite_url,
        proxied(broker, proxy.port),
        tmp_path,
        "worker",
        *("--concurrency", "4", "--queue", own_queue),
    )
    procs.append(worker)
    worker.ready()
    with cairn.Client(sqlite_url) as client:
        handles = [
            client.start("celery.steady", n, queue=own_queue, allow_unknown=True) for n in range(8)
        ]
        time.sleep(0.5)
        assert (proxy.garble() if junk is None else proxy.garble(junk)) > 0
        more = [
            client.start("celery.steady", n, queue=own_queue, allow_unknown=True)
            for n in range(8, 12)
        ]
        assert results(handles + more, [worker]) == list(range(12))
    worker.alive()
    return worker


@pytest.mark.parametrize(
    ("url", "logged"),
    [
        ("amqp://guest:guest@127.0.0.1:{port}//", "amqp://guest:**@127.0.0.1:{port}//"),
        ("redis://127.0.0.1:{port}/11", "redis://:**@127.0.0.1:{port}/11"),
    ],
)
def test_celery__an_unreachable_broker_is_one_log_line_per_try(
    tmp_path: Path, procs: list[CeleryWorker], own_queue: str, url: str, logged: str
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]  # nothing listens there once closed
    db = f"sqlite:///{tmp_path / 'cairn.db'}"
    unreachable = url.format(port=port)
    worker = CeleryWorker(db, unreachable, tmp_path, "worker", "--queue", own_queue)
    procs.append(worker)
    until("two tries", lambda: worker.log.read_text().count("Cannot connect") >= 2)
    worker.alive()
    log = worker.log.read_text()
    first = log.rindex("\n", 0, log.index("consumer: Cannot connect")) + 1
    tries = log[first:].splitlines()[:-1]  # the last may be partial
    # Celery's message was three lines a try: the error, "Trying again in 2.00 seconds...
    # (1/None)", and an empty line.
    assert all(line.startswith("20") and "consumer: Cannot connect" in line for line in tries), (
        tries
    )
    # The broker's URL as given, not cairn's transport ("cairn.celery.redis_transport:...").
    assert f"Cannot connect to {logged.format(port=port)}: " in tries[0], tries
    assert "trying again in" in tries[0], tries


def test_celery__the_exit_status_says_whether_the_worker_failed(
    broker: str, tmp_path: Path, procs: list[CeleryWorker], own_queue: str
) -> None:
    unopenable = f"sqlite:///{tmp_path / 'no-such-folder' / 'cairn.db'}"
    failed = CeleryWorker(unopenable, broker, tmp_path, "failed")
    procs.append(failed)
    assert failed.exit_code() == 1, failed.log.read_text()[-2000:]
    assert "cairn engine failed to open: cannot open database" in failed.log.read_text()
    # Its own queue: ready, it would consume (and drop) other tests' runs' messages.
    db = f"sqlite:///{tmp_path / 'cairn.db'}"
    stopped = CeleryWorker(db, broker, tmp_path, "stopped", "--queue", own_queue)
    procs.append(stopped)
    stopped.ready()
    stopped.proc.terminate()  # a warm shutdown: a success
    assert stopped.exit_code() == 0, stopped.log.read_text()[-2000:]


def _publish_raw(broker: str, queue: str, messages: list[tuple[dict[str, object], str]]) -> None:
    """Put (headers, JSON body text) messages on Celery queue `queue`, as any client could."""
    from kombu import Connection, Queue

    with Connection(broker) as connection:
        producer = connection.Producer()
        for headers, body in messages:
            producer.publish(
                body,
                exchange="",
                routing_key=queue,
                declare=[Queue(queue)],  # type: ignore[no-untyped-call]
                headers=headers,
                content_type="application/json",
                content_encoding="utf-8",
            )


def test_celery__messages_the_worker_cannot_use_are_dropped_not_fatal(
    sqlite_url: str, broker: str, tmp_path: Path, procs: list[CeleryWorker], own_queue: str
) -> None:
    worker = CeleryWorker(
        sqlite_url, broker, tmp_path, "worker", "--concurrency", "2", "--queue", own_queue
    )
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
        ({"task": "cairn.runs", "id": "batch-of-a-string"}, '[["some-run"], {}, {}]'),
        ({"task": "cairn.runs", "id": "batch-of-integers"}, "[[[5, 6]], {}, {}]"),
        ({"task": "cairn.runs", "id": "empty-batch"}, "[[[]], {}, {}]"),
    ]
    _publish_raw(broker, f"cairn.{own_queue}", bad)
    with cairn.Client(sqlite_url) as client:
        handle = client.start("celery.math", 3, queue=own_queue, allow_unknown=True)
        assert results([handle], [worker]) == [[9, 81]]
    until("every bad message logged", lambda: worker.log.read_text().count("dropped") >= len(bad))
    time.sleep(0.5)  # none comes back
    worker.alive()
    assert worker.log.read_text().count("dropped") == len(bad), worker.log.read_text()[-3000:]


def _rabbitmq_env(key: str, value: str | None = None) -> str:
    """RabbitMQ's setting `key` (Erlang term text); set to `value` first if given."""
    if value is not None:
        term = f"application:set_env(rabbit, {key}, {value})."
        subprocess.run(["rabbitmqctl", "eval", term], check=True, capture_output=True, timeout=30)
    done = subprocess.run(
        ["rabbitmqctl", "eval", f"application:get_env(rabbit, {key})."],
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done.stdout.strip().removeprefix("{ok,").removesuffix("}")


@pytest.fixture
def short_consumer_timeout() -> Iterator[None]:
    """RabbitMQ's consumer_timeout at 2 s (checked every 0.5 s) while the test runs.

    RabbitMQ 3.10 has no per-queue timeout (x-consumer-timeout came in 3.12), and its
    channels read the broker's setting as they go: it is changed at run time (no restart)
    and put back when the test ends. Meanwhile any consumer of this broker that holds a
    message unacknowledged over 2 s loses its channel: tests run one at a time.
    """
    if shutil.which("rabbitmqctl") is None:
        problem = "rabbitmqctl is not installed (it sets RabbitMQ's consumer_timeout)"
        if IN_CI:
            pytest.fail(problem)
        pytest.skip(problem)
    before = {key: _rabbitmq_env(key) for key in ("consumer_timeout", "channel_tick_interval")}
    try:
        _rabbitmq_env("consumer_timeout", "2000")
        _rabbitmq_env("channel_tick_interval", "500")
        yield
    finally:
        for key, value in before.items():
            _rabbitmq_env(key, value)


def test_celery__an_attempt_longer_than_rabbitmq_s_consumer_timeout_finishes(
    sqlite_url: str,
    tmp_path: Path,
    procs: list[CeleryWorker],
    short_consumer_timeout: None,
    own_queue: str,
) -> None:
    url, port = BROKERS["rabbitmq"]
    reachable_or_skip("rabbitmq", port)
    worker = CeleryWorker(
        sqlite_url, url, tmp_path, "worker", "--concurrency", "2", "--queue", own_queue
    )
    procs.append(worker)
    worker.ready()
    with cairn.Client(sqlite_url) as client:
        # Two steps of 3 s: each outlasts the 2 s the broker allows an unacknowledged message.
        handle = client.start("celery.steady", 7, 2, 3.0, queue=own_queue, allow_unknown=True)
        assert results([handle], [worker]) == [7]
    log = worker.log.read_text()
    assert "PRECONDITION_FAILED" not in log, log[-3000:]
    worker.alive()


def test_celery__a_frozen_broker_is_reported_and_the_worker_catches_up(
    sqlite_url: str,
    broker: str,
    proxy: FreezingProxy,
    tmp_path: Path,
    procs: list[CeleryWorker],
    own_queue: str,
) -> None:
    health = tmp_path / "health.json"
    worker = CeleryWorker(
        sqlite_url,
        proxied(broker, proxy.port),
        tmp_path,
        "worker",
        *("--concurrency", "4", "--queue", own_queue),
        env={"CAIRN_BROKER_TIMEOUT": "2", "CAIRN_HEALTH_FILE": str(health)},
    )
    procs.append(worker)
    worker.ready()

    def status() -> str | None:
        return json.loads(health.read_text())["status"] if health.exists() else None

    with cairn.Client(sqlite_url) as client:
        before = [
            client.start("celery.steady", n, 2, 0.1, queue=own_queue, allow_unknown=True)
            for n in range(4)
        ]
        assert results(before, [worker]) == list(range(4))
        until("a healthy worker", lambda: worker.alive() or status() == "ok")
        proxy.freeze(new=True)  # open and new connections: TCP up, not a byte through
        during = [
            client.start("celery.steady", n, 2, 0.1, queue=own_queue, allow_unknown=True)
            for n in range(6)
        ]
        until(
            "the health file to tell",
            lambda: worker.alive() or status() == "broker unreachable",
            deadline=30,
        )
        assert "cairn: cannot reach the broker" in worker.log.read_text()  # logged first
        proxy.restore()  # new connections pass; those it froze stay hung
        assert results(during, [worker], deadline=45) == list(range(6))
        until("the health file to say so", lambda: worker.alive() or status() == "ok")
    assert "the broker answers again" in worker.log.read_text()
    worker.alive()


def test_celery__a_run_is_not_published_again_while_its_message_waits(
    sqlite_url: str, broker: str, tmp_path: Path, procs: list[CeleryWorker]
) -> None:
    purge(broker, "cairn.lonely")
    # A worker given its queue: one serving every queue would consume "cairn.lonely" too.
    worker = CeleryWorker(
        sqlite_url, broker, tmp_path, "worker", "--queue", "busy", "--lease", "1s"
    )
    procs.append(worker)
    worker.ready()
    with cairn.Client(sqlite_url) as client:
        for n in range(3):  # runs of a queue no worker consumes: their messages wait
            client.start("celery.lonely", queue="lonely", allow_unknown=True)
            # One at a time: runs a look finds together may share a message.
            until(f"message {n + 1}", lambda n=n: depth(broker, "cairn.lonely") >= n + 1)
        time.sleep(4.0)  # four leases
    assert depth(broker, "cairn.lonely") == 3
    worker.alive()
    purge(broker, "cairn.lonely")


def test_celery__a_run_held_back_by_its_queue_s_limit_is_published_when_a_slot_frees(
    sqlite_url: str, broker: str, tmp_path: Path, procs: list[CeleryWorker]
) -> None:
    # A lease far longer than the ten runs' work: publishing again after a lease is no help.
    worker = CeleryWorker(
        sqlite_url, broker, tmp_path, "worker", "--queue", "limited", "--lease", "60s"
    )
    procs.append(worker)
    worker.ready()
    with cairn.Client(sqlite_url) as client:
        handles = [
            client.start("celery.limited", n, queue="limited", allow_unknown=True)
            for n in range(10)
        ]
        assert results(handles, [worker], deadline=30) == list(range(10))
