"""Real brokers and `cairn worker --transport celery` processes for the Celery tests.

RabbitMQ on 5672 and Redis on 6379. Locally a broker that is down skips its tests (with
the reason); with CI=true they fail. A worker may reach its broker through a TCP proxy
(tests/chaos/proxy.py) that freezes or resets its connections.
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 60.0
IN_CI = os.environ.get("CI", "").lower() == "true"
BROKERS = {
    "rabbitmq": ("amqp://guest:guest@127.0.0.1:5672//", 5672),
    "redis": ("redis://127.0.0.1:6379/11", 6379),
}
# The workers' Celery queues ("cairn", "cairn.lonely", "cairn.step.gpu") are fixed names on
# the shared brokers: a worker of one test would take another test's messages (runs its
# own database does not hold), and a test's purge would empty another's queue. Under
# xdist (make test, --dist loadgroup) these tests run one after another in one process;
# test sessions side by side (other worktrees) still share them, so a test that can
# takes a workflow queue of its own (`own_queue`).
ONE_AT_A_TIME = pytest.mark.xdist_group("celery-brokers")
OWN_PREFIX = "test-"


def reachable_or_skip(name: str, port: int) -> None:
    """Skip (locally) or fail (in CI) when `name` does not answer on `port`."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError as exc:
        problem = f"{name} is not reachable on 127.0.0.1:{port} ({exc})"
        if IN_CI:
            pytest.fail(problem)
        pytest.skip(problem)


@pytest.fixture(params=sorted(BROKERS))
def broker(request: pytest.FixtureRequest) -> str:
    """A reachable broker's URL (skipped locally, failed in CI, when it is down)."""
    url, port = BROKERS[request.param]
    reachable_or_skip(request.param, port)
    return url


@pytest.fixture
def own_queue() -> str:
    """A workflow queue name used by this test alone (Celery queue "cairn.<name>").

    Its workers get `--queue <name>` and its runs `queue=<name>`, so no message of another
    test or test session reaches them, nor theirs it. `procs` deletes its Celery queues
    once the workers are gone (`delete_own`, for workers started otherwise).
    """
    return f"{OWN_PREFIX}{uuid.uuid4().hex[:8]}"


def proxied(url: str, port: int) -> str:
    """`url` with its broker's port replaced by `port` (a proxy's)."""
    for _, (known, known_port) in BROKERS.items():
        if url == known:
            return url.replace(f":{known_port}/", f":{port}/")
    raise ValueError(f"not a test broker: {url}")


def broker_port(url: str) -> int:
    return next(port for known, port in BROKERS.values() if known == url)


class CeleryWorker:
    """A `cairn worker --transport celery` process."""

    def __init__(
        self,
        url: str,
        broker: str,
        root: Path,
        name: str,
        *args: str,
        env: dict[str, str] | None = None,
    ) -> None:
        environ = {
            **{k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")},
            "CAIRN_EFFECTS": str(root / "effects.txt"),
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")]),
            **(env or {}),
        }
        self.queues = [value for flag, value in itertools.pairwise(args) if flag == "--queue"]
        self.log = root / f"{name}.log"
        self.out = self.log.open("w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cairn",
                "worker",
                "--transport",
                "celery",
                "--broker",
                broker,
                "--db",
                url,
                *(() if "-m" in args else ("-m", "tests.process.celery_flow")),
                "--lease",
                "2s",
                *args,
            ],
            env=environ,
            stdout=subprocess.DEVNULL,
            stderr=self.out,
            text=True,
        )

    def ready(self) -> str:
        """The cairn worker id, once its engine is ready."""
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            for line in self.log.read_text().splitlines():
                if "cairn engine " in line and " ready" in line:
                    return line.split("cairn engine ", 1)[1].split()[0]
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            time.sleep(0.05)
        pytest.fail(f"celery worker not ready within {DEADLINE}s: {self.log.read_text()}")

    def alive(self) -> None:
        """Assert the process still runs (with the end of its log if not)."""
        assert self.proc.poll() is None, (self.proc.returncode, self.log.read_text()[-3000:])

    def exit_code(self, timeout: float = DEADLINE) -> int:
        """Its exit status, once it has exited (fails, with its log, after `timeout`)."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGUSR1)  # Celery's: every thread's stack, to the log
            time.sleep(1.0)
            pytest.fail(f"still running after {timeout}s: {self.log.read_text()[-8000:]}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.out.close()


@pytest.fixture
def procs() -> Iterator[list[CeleryWorker]]:
    started: list[CeleryWorker] = []
    yield started
    for worker in started:
        worker.close()
    # Once no worker consumes them (a consumer would declare them again).
    delete_own({q for w in started for q in w.queues if q.startswith(OWN_PREFIX)})


def delete_own(queues: set[str]) -> None:
    """Delete `own_queue`s, for runs and (every --queue is a step queue too) for step
    attempts, on the brokers themselves (a worker's URL may be a proxy's, closed by now)."""
    for url, port in BROKERS.values() if queues else ():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        except OSError:
            continue
        for queue in queues:
            delete(url, f"cairn.{queue}")
            delete(url, f"cairn.step.{queue}")


def effects(root: Path) -> list[tuple[str, int]]:
    path = root / "effects.txt"
    if not path.exists():
        return []
    return [
        (what, int(pid))
        for what, pid in (line.rsplit(" pid=", 1) for line in path.read_text().splitlines())
    ]


def until(what: str, ready: Callable[[], object], deadline: float = DEADLINE) -> None:
    end = time.monotonic() + deadline
    while not ready():
        assert time.monotonic() < end, f"no {what} within {deadline}s"
        time.sleep(0.02)


def results(
    handles: list[Any], workers: list[CeleryWorker], deadline: float = DEADLINE
) -> list[Any]:
    """The handles' results, failing as soon as a worker has stopped."""
    end = time.monotonic() + deadline
    found = []
    for handle in handles:
        while True:
            for worker in workers:
                worker.alive()
            try:
                found.append(handle.result(timeout=0.5))
                break
            except TimeoutError:
                if time.monotonic() > end:
                    for worker in workers:  # Celery's SIGUSR1: every thread's stack, to the log
                        worker.proc.send_signal(signal.SIGUSR1)
                    time.sleep(1.0)
                    logs = "\n".join(worker.log.read_text()[-6000:] for worker in workers)
                    pytest.fail(f"run {handle.run_id} unfinished after {deadline}s: {logs}")
    return found


def purge(broker: str, queue: str) -> None:
    """Empty Celery queue `queue` (left over by other tests: they share the broker)."""
    from kombu import Connection, Queue

    with Connection(broker) as connection:
        bound = Queue(queue, channel=connection.default_channel)  # type: ignore[no-untyped-call]
        bound.queue_declare()
        bound.purge()


def delete(broker: str, queue: str) -> None:
    """Remove Celery queue `queue` and its exchange (Celery names it after the queue) from
    `broker`; nothing when they do not exist."""
    from kombu import Connection, Exchange, Queue

    with Connection(broker) as connection:
        channel = connection.default_channel
        Queue(queue, channel=channel).delete()  # type: ignore[no-untyped-call]
        Exchange(queue, channel=channel).delete()  # type: ignore[no-untyped-call]


def depth(broker: str, queue: str) -> int:
    """How many messages wait in Celery queue `queue` (0 when it does not exist)."""
    from kombu import Connection

    with Connection(broker) as connection:
        try:
            declared = connection.default_channel.queue_declare(queue=queue, passive=True)
        except connection.channel_errors:
            return 0
        return int(declared.message_count)
