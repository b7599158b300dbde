"""How a cairn worker talks to its broker: every call bounded, and what it says when it cannot.

A broker that keeps TCP open but answers nothing must not freeze a worker: every broker
call has a timeout (`timeout` seconds: connecting, reading, writing, each publish waiting
for the broker's confirmation on RabbitMQ), AMQP heartbeats run every `timeout` seconds
(a connection silent for two is dropped), Redis' long polls are checked as often, and a
lost connection is retried for ever (Celery says so at each try). `BrokerState` is what
the dispatcher knows: whether its last publish reached the broker, said once per change.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from cairn.observability import logcontext

log = logcontext.logger("cairn.celery")

TIMEOUT_ENV = "CAIRN_BROKER_TIMEOUT"
DEFAULT_TIMEOUT = 10.0


def broker_timeout(explicit: float | None = None) -> float:
    """Seconds a broker call may take: `explicit`, else CAIRN_BROKER_TIMEOUT, else 10."""
    if explicit is None:
        text = os.environ.get(TIMEOUT_ENV, "").strip()
        try:
            explicit = float(text) if text else DEFAULT_TIMEOUT
        except ValueError:
            raise ValueError(f"{TIMEOUT_ENV} must be a number of seconds, got {text!r}") from None
    if not explicit > 0:
        raise ValueError(f"the broker timeout must be positive, got {explicit!r}")
    return float(explicit)


def settings(url: str, timeout: float) -> dict[str, Any]:
    """Celery settings that bound every call to the broker at `url` by `timeout`."""
    if url.startswith(("redis://", "rediss://")):
        transport: dict[str, Any] = {
            "socket_timeout": timeout,
            "socket_connect_timeout": timeout,
            "socket_keepalive": True,
            # kombu drops a long poll (BRPOP) whose reply is this much overdue.
            "health_check_interval": max(1, round(timeout)),
        }
    else:
        transport = {
            "read_timeout": timeout,
            "write_timeout": timeout,
            # A publish waits for the broker's word: one into a hung connection fails
            # (and is tried again) instead of vanishing.
            "confirm_publish": True,
        }
    return {
        "broker_connection_timeout": timeout,
        "broker_heartbeat": timeout,
        "broker_connection_max_retries": None,  # a worker waits out an outage
        "broker_transport_options": transport,
        "broker_pool_limit": 4,
        # A publish is tried twice at most before the dispatcher hears it failed.
        "task_publish_retry_policy": {
            "max_retries": 1,
            "interval_start": 0,
            "interval_step": 0.5,
            "interval_max": 0.5,
        },
    }


class BrokerState:
    """Whether the broker took this worker's last publish; logged once per change."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.problem: str | None = None
        self.since = time.time()

    def failed(self, exc: BaseException, waiting: int) -> None:
        """A publish failed with `exc`; `waiting` messages are yet to go."""
        with self._lock:
            first = self.problem is None
            self.problem = f"{type(exc).__name__}: {exc}"
            if first:
                self.since = time.time()
        if first:
            log.error(
                "cairn: cannot reach the broker (%s): %d message(s) wait to be published; "
                "trying again",
                self.problem,
                waiting,
            )

    def succeeded(self) -> None:
        """Publishing works (again)."""
        with self._lock:
            problem, self.problem = self.problem, None
            down = time.time() - self.since
            self.since = time.time()
        if problem is not None:
            log.warning("cairn: the broker answers again (unreachable for %.1fs)", down)
