"""Prometheus metrics of an engine (extra `cairn-workflows[metrics]`).

Counters and histograms are fed by the engine's hooks as runs and steps execute; the
gauges (unfinished runs per queue and status, live workers) are read from the database
when scraped. Labels are bounded: workflow, step name, queue and status, never a run id.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from cairn.clock import Clock
from cairn.errors import ConfigError
from cairn.models import RunStatus
from cairn.observability.hooks import RunScope, StepScope
from cairn.store.programs import workers as worker_ops
from cairn.store.protocol import Store
from cairn.store.records import Counts, RunRecord

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry, Counter, Histogram
    from prometheus_client.metrics_core import Metric

log = logging.getLogger("cairn.metrics")

# Statuses a run ends with, and those the gauges count (lowercase in labels).
FINAL = frozenset(status.value for status in RunStatus if status.finished)
UNFINISHED = tuple(status.value for status in RunStatus if not status.finished)
# A scrape reads the database at most this often; scrapes in between reuse the counts.
FRESH_FOR = 1.0
READ_TIMEOUT = 5.0

RUN_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 6 * 3600, 86400)
LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


def load_prometheus() -> Any:
    """The prometheus_client module; ConfigError naming the extra if it is missing."""
    try:
        import prometheus_client
    except ImportError as exc:
        raise ConfigError(
            "metrics need prometheus_client: pip install 'cairn-workflows[metrics]'"
        ) from exc
    return prometheus_client


class Metrics:
    """The Prometheus metrics of one engine: `Engine(url, metrics=Metrics())`.

    Metrics (names as scraped):

    - `cairn_runs_started_total{workflow}`: runs whose first attempt began here: each
      run once (at its first claim), not again when it goes on after a wake-up, a
      recovery, a hand-back or a retry.
    - `cairn_runs_finished_total{workflow,status}`: runs that ended here, by status
      (completed, failed, cancelled, continued).
    - `cairn_run_duration_seconds{workflow,status}`: from a run's first start to its end.
    - `cairn_step_attempts_total{step}`, `cairn_step_failures_total{step}`: step
      attempts begun here, and those that raised or timed out (each retry counts).
    - `cairn_step_duration_seconds{step}`: how long each step attempt's code ran.
    - `cairn_claim_lag_seconds{queue}`: from when a run became due to when a worker
      claimed it (queue "" for runs on no queue): a run's first claim and its wake-ups,
      not a recovery nor a run claimed again after a hand-back or a retry.
    - `cairn_schedule_lag_seconds{workflow}`: from a schedule tick's time to its firing.
    - `cairn_runs{queue,status}`: unfinished runs in the database by queue and status
      (pending, running, sleeping, waiting, paused), read at scrape time.
    - `cairn_workers_live`: workers whose heartbeat is within their lease, read then too.
    - `cairn_futile_wakes_total{workflow}`: times a run woke here and parked again
      without progress (nothing recorded): a message no wait took, say. Should stay 0.
    - `cairn_runs_spinning`: unfinished runs flagged as waking without progress (more
      than SPINNING_AFTER, 10, such wake-ups in a minute), read at scrape time.

    Counters count what this process did; sum them over processes. The gauges count
    the whole database, so every worker reports the same values.

    Args:
        registry: Where the metrics are registered (default: a registry of their own,
            so several engines in one process do not clash; pass
            `prometheus_client.REGISTRY` to serve them with your other metrics).

    Raises:
        ConfigError: prometheus_client is not installed.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        prometheus = load_prometheus()
        self.registry: CollectorRegistry = (
            registry if registry is not None else prometheus.CollectorRegistry()
        )

        def counter(name: str, doc: str, labels: list[str]) -> Counter:
            made: Counter = prometheus.Counter(name, doc, labels, registry=self.registry)
            return made

        def histogram(name: str, doc: str, labels: list[str], **extra: Any) -> Histogram:
            made: Histogram = prometheus.Histogram(
                name, doc, labels, registry=self.registry, **extra
            )
            return made

        self.runs_started = counter(
            "cairn_runs_started", "Runs whose first attempt began in this process.", ["workflow"]
        )
        self.runs_finished = counter(
            "cairn_runs_finished", "Runs that ended in this process, by status.",
            ["workflow", "status"],
        )  # fmt: skip
        self.run_duration = histogram(
            "cairn_run_duration_seconds", "Seconds from a run's first start to its end.",
            ["workflow", "status"], buckets=RUN_BUCKETS,
        )  # fmt: skip
        self.step_attempts = counter(
            "cairn_step_attempts", "Step attempts begun in this process.", ["step"]
        )
        self.step_failures = counter(
            "cairn_step_failures", "Step attempts that raised or timed out.", ["step"]
        )
        self.step_duration = histogram(
            "cairn_step_duration_seconds", "Seconds a step attempt's code ran.", ["step"]
        )
        self.claim_lag = histogram(
            "cairn_claim_lag_seconds", "Seconds from a run being due to its claim.",
            ["queue"], buckets=LAG_BUCKETS,
        )  # fmt: skip
        self.schedule_lag = histogram(
            "cairn_schedule_lag_seconds", "Seconds from a schedule tick's time to its firing.",
            ["workflow"], buckets=LAG_BUCKETS,
        )  # fmt: skip
        self.futile_wakes = counter(
            "cairn_futile_wakes",
            "Times a run woke in this process and parked again without progress.",
            ["workflow"],
        )
        self._steps: dict[str, _StepChildren] = {}
        self._gauges = _Gauges(self)
        self.registry.register(self._gauges)
        self._store: Store | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.clock: Clock | None = None

    # the engine's side

    def bind(self, store: Store, loop: asyncio.AbstractEventLoop, clock: Clock) -> None:
        """Read gauges from `store` (on `loop`) from now on; `clock` times runs."""
        self._store, self._loop, self.clock = store, loop, clock

    def unbind(self) -> None:
        """Stop reading gauges (the engine closed): they report nothing until bound again."""
        self._store = self._loop = None
        self._gauges.forget()

    def run(self, run: RunRecord, first: bool) -> RunScope:
        """Hook: an attempt of `run` begins."""
        if first:
            self.runs_started.labels(run.workflow).inc()
        return _RunMetrics(self, run)

    def queued_step(
        self,
        run: RunRecord,
        key: str,
        name: str,
        attempt: int,
        queue: str,
        *,
        sent_in: str | None = None,
    ) -> StepScope:
        """Hook: an attempt of a step sent to a step queue begins here (counted as any)."""
        children = self.step_children(name)
        children[0].inc()
        return _StepMetrics(children, time.perf_counter())

    def claimed(self, runs: list[RunRecord], due: dict[str, float], now: float) -> None:
        """Hook: runs claimed at `now`; the lag of each that was due."""
        for run in runs:
            since = due.get(run.run_id)
            if since is not None:
                self.claim_lag.labels(run.queue or "").observe(max(0.0, now - since))

    def fired(self, workflow: str, lag: float) -> None:
        """Hook: a schedule tick of `workflow` fired `lag` seconds late."""
        self.schedule_lag.labels(workflow).observe(lag)

    def poisoned(self, workflow: str) -> None:
        """Hook: a run of `workflow` was given up (PoisonRun): it finished failed."""
        self.runs_finished.labels(workflow, "failed").inc()

    def step_children(self, name: str) -> _StepChildren:
        """The labelled metrics of step `name` (made once: a step pays a dict lookup)."""
        children = self._steps.get(name)
        if children is None:
            children = self._steps[name] = (
                self.step_attempts.labels(name),
                self.step_failures.labels(name),
                self.step_duration.labels(name),
            )
        return children

    # serving

    async def counts(self) -> Counts | None:
        """Read the gauges' counts now (on any loop); None when unbound or unreadable."""
        store, loop = self._store, self._loop
        if store is None or loop is None:
            return None
        try:
            if asyncio.get_running_loop() is loop:
                counts = await asyncio.wait_for(store.read_aside(worker_ops.counts()), READ_TIMEOUT)
            else:
                future = _submit(store, loop)
                if future is None:
                    return None
                counts = await asyncio.wait_for(asyncio.wrap_future(future), READ_TIMEOUT)
        except Exception as exc:
            _cannot_read(exc)
            return None
        self._gauges.keep(counts)
        return counts

    def read_counts(self) -> Counts | None:
        """`counts()` from a thread other than the engine's loop (blocking, bounded)."""
        store, loop = self._store, self._loop
        if store is None or loop is None:
            return None
        future = _submit(store, loop)
        if future is None:
            return None
        try:
            counts = future.result(READ_TIMEOUT)
        except Exception as exc:
            future.cancel()
            _cannot_read(exc)
            return None
        self._gauges.keep(counts)
        return counts

    def on_loop(self) -> bool:
        """True when called on the engine's loop (where a blocking read would deadlock)."""
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    def serve(self, port: int, host: str = "0.0.0.0") -> None:
        """Serve `/metrics` over HTTP on `port` from a daemon thread, until the process exits.

        Raises:
            ConfigError: The address cannot be bound (in use, say).
        """
        try:
            load_prometheus().start_http_server(port, host, registry=self.registry)
        except OSError as exc:
            raise ConfigError(f"cannot serve metrics on {host}:{port}: {exc}") from exc


def _cannot_read(exc: Exception) -> None:
    # A frozen database is a TimeoutError, whose own text is empty.
    why = f"no answer within {READ_TIMEOUT:g} s" if isinstance(exc, TimeoutError) else exc
    log.warning("metrics: cannot read run counts from the database: %s", why)


def _submit(store: Store, loop: asyncio.AbstractEventLoop) -> Future[Counts] | None:
    """The read of `counts` sent to `loop` from another thread; None if the loop has closed."""
    read = store.read_aside(worker_ops.counts())
    try:
        return asyncio.run_coroutine_threadsafe(read, loop)
    except RuntimeError:  # the engine closed meanwhile
        read.close()
        return None


_StepChildren = tuple[Any, Any, Any]  # attempts counter, failures counter, duration histogram


class _RunMetrics:
    __slots__ = ("metrics", "run")

    def __init__(self, metrics: Metrics, run: RunRecord) -> None:
        self.metrics = metrics
        self.run = run

    def step(self, key: str, name: str, attempt: int) -> StepScope:
        children = self.metrics.step_children(name)
        children[0].inc()
        return _StepMetrics(children, time.perf_counter())

    def parked(self, status: str, wake_at: float | None, waiting_for: str | None) -> None:
        pass

    def futile(self, wakes: int) -> None:
        self.metrics.futile_wakes.labels(self.run.workflow).inc()

    def ended(self, status: str | None, error: str | None) -> None:
        if status not in FINAL:
            return
        run, metrics = self.run, self.metrics
        label = status.lower()
        metrics.runs_finished.labels(run.workflow, label).inc()
        clock = metrics.clock
        now = clock.now() if clock is not None else time.time()
        began = run.started_at or run.created_at
        metrics.run_duration.labels(run.workflow, label).observe(max(0.0, now - began))


class _StepMetrics:
    __slots__ = ("began", "children")

    def __init__(self, children: _StepChildren, began: float) -> None:
        self.children = children
        self.began = began

    def succeeded(self) -> None:
        self.children[2].observe(time.perf_counter() - self.began)

    def failed(self, exc: BaseException, timed_out: bool) -> None:
        self.children[1].inc()
        self.children[2].observe(time.perf_counter() - self.began)

    def interrupted(self) -> None:
        pass  # abandoned mid-way: no outcome to count, and the next attempt counts anew


class _Gauges:
    """The collector of the gauges read from the database."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.last: tuple[float, Counts] | None = None
        # Queues seen since binding: a queue whose runs all finished reports 0, not nothing.
        self.queues: set[str] = {""}

    def keep(self, counts: Counts) -> None:
        self.last = (time.monotonic(), counts)

    def forget(self) -> None:
        self.last = None
        self.queues = {""}

    def describe(self) -> Iterator[Metric]:
        yield from self._families(None)

    def collect(self) -> Iterator[Metric]:
        counts = None
        last = self.last
        if last is not None and (time.monotonic() - last[0] < FRESH_FOR or self.metrics.on_loop()):
            counts = last[1]  # fresh enough, or read by metrics_app just before
        elif not self.metrics.on_loop():
            counts = self.metrics.read_counts()
        yield from self._families(counts)

    def _families(self, counts: Counts | None) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        runs = GaugeMetricFamily(
            "cairn_runs", "Unfinished runs in the database by queue and status.",
            labels=["queue", "status"],
        )  # fmt: skip
        workers = GaugeMetricFamily(
            "cairn_workers_live", "Workers whose heartbeat is within their lease."
        )
        spinning = GaugeMetricFamily(
            "cairn_runs_spinning",
            "Unfinished runs that keep waking without progress (flagged in the runs list).",
        )
        if counts is not None:
            self.queues.update(queue or "" for queue, _ in counts.runs)
            for queue in sorted(self.queues):
                for status in UNFINISHED:
                    value = counts.runs.get((queue or None, status), 0)
                    runs.add_metric([queue, status.lower()], value)
            workers.add_metric([], counts.live_workers)
            spinning.add_metric([], counts.spinning)
        yield runs
        yield workers
        yield spinning
