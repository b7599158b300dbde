"""How a cairn worker talks to its broker: every call bounded, and what it says when it cannot.

A broker that keeps TCP open but answers nothing must not freeze a worker: every broker
call has a timeout (`timeout` seconds: connecting, reading, writing, and on RabbitMQ a
round trip after each batch of publishes), AMQP heartbeats run every `timeout` seconds
(a connection silent for two is dropped), Redis' long polls are checked as often, and a
lost connection is retried for ever (Celery says so at each try). `BrokerState` is what
the dispatcher knows: whether its last call (a publish, or a probe when it has nothing to
publish) reached the broker, logged once per change and written to a health file.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
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
        # A batch of publishes ends with a round trip (see cairn.celery.app): one into a
        # hung connection fails (and is tried again) instead of vanishing.
        transport = {"read_timeout": timeout, "write_timeout": timeout}
    return {
        "broker_connection_timeout": timeout,
        "broker_heartbeat": timeout,
        "broker_connection_max_retries": None,  # a worker waits out an outage
        # A reply the client cannot parse (junk from a middlebox; redis-py's InvalidResponse
        # is a kombu "channel error") reconnects like a reset: without it Celery stopped
        # the worker ("Unrecoverable error").
        "broker_channel_error_retry": True,
        "broker_transport_options": transport,
        # A publish is tried twice at most before the dispatcher hears it failed.
        "task_publish_retry_policy": {
            "max_retries": 1,
            "interval_start": 0,
            "interval_step": 0.5,
            "interval_max": 0.5,
        },
    }


class OneLine(logging.Filter):
    """One line per problem in Celery's log of a lost broker connection.

    Celery's consumer says "Cannot connect to URL: ERROR." then "Trying again in 2.00
    seconds... (1/None)" and an empty line, at every try: made one line, "consumer:
    Cannot connect to URL: ERROR; trying again in 2.00 seconds (try 1)". A lost connection
    also fails the acknowledgement of each message in flight ("Couldn't ack 22, reason:
    ...") and the clean-up of Celery's event loop ("Error cleaning up after event loop:
    ..."), each logged with a traceback: the line names the error, the traceback of a
    connection reset says nothing more, and is left out. Other tracebacks are kept.
    """

    _WITHOUT_TRACEBACK = ("Couldn't ack", "Error cleaning up after event loop")

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite `record` in place (one line, or no traceback); never drops one."""
        text = record.getMessage()
        if record.exc_info is not None:
            if text.startswith(self._WITHOUT_TRACEBACK):
                record.exc_info, record.exc_text = None, None
        elif "\n" in text:
            parts = [part.strip().rstrip(".") for part in text.splitlines() if part.strip()]
            if parts[-1].startswith("Trying again"):  # "Trying again in 2.00 seconds... (1/None)"
                step = parts[-1].replace("Trying", "trying", 1).replace("... (", " (try ")
                parts[-1] = step.replace("/None)", ")")
            record.msg, record.args = "; ".join(parts), ()
        return True


_CELERY_LOGGERS = (
    "celery.worker.consumer.consumer",
    "celery.worker.request",
    "celery.worker.loops",
)


def one_line_per_problem() -> None:
    """Make Celery's log of a lost broker connection one line per problem (`OneLine`)."""
    for name in _CELERY_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, OneLine) for f in logger.filters):
            logger.addFilter(OneLine())


def named_connection(transport: str, scheme: str) -> Any:
    """The kombu Connection naming transport `transport` (an import path) after `scheme`.

    What Celery logs ("Cannot connect to redis://...", its banner) then shows the broker
    URL's scheme instead of "cairn.celery.redis_transport:Transport://...".
    """
    from kombu.connection import Connection

    class Named(Connection):
        resolve_aliases = {**Connection.resolve_aliases, transport: scheme}

    return Named


class BrokerState:
    """Whether the broker answered this worker's last call; logged once per change.

    With a `health_file`, each change and at least one call a second are written there
    as one JSON object: {"status": "ok" or "broker unreachable", "problem", "since",
    "checked_at", "pid"}, replaced whole (a probe reads a complete one). A `checked_at`
    that stops moving says the worker itself is stuck.
    """

    def __init__(self, health_file: str | os.PathLike[str] | None = None) -> None:
        self._lock = threading.Lock()
        self.problem: str | None = None
        self.since = time.time()
        self.health_file = Path(health_file) if health_file is not None else None
        self._written = 0.0

    def failed(self, exc: BaseException, waiting: int) -> None:
        """A call failed with `exc`; `waiting` messages are yet to be published."""
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
        self._write(changed=first)

    def succeeded(self) -> None:
        """A call reached the broker (again)."""
        with self._lock:
            problem, self.problem = self.problem, None
            down = time.time() - self.since
            if problem is not None:
                self.since = time.time()
        if problem is not None:
            log.warning("cairn: the broker answers again (%.1fs after a call first failed)", down)
        self._write(changed=problem is not None)

    def _write(self, *, changed: bool) -> None:
        if self.health_file is None or not (changed or time.monotonic() - self._written >= 1):
            return
        self._written = time.monotonic()
        with self._lock:
            state = {
                "status": "ok" if self.problem is None else "broker unreachable",
                "problem": self.problem,
                "since": self.since,
                "checked_at": time.time(),
                "pid": os.getpid(),
            }
        partial = self.health_file.with_name(f".{self.health_file.name}.{os.getpid()}")
        try:
            partial.write_text(json.dumps(state) + "\n", encoding="utf-8")
            partial.replace(self.health_file)
        except OSError as exc:
            log.warning("cairn: cannot write the health file %s: %s", self.health_file, exc)
