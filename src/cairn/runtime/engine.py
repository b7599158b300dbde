"""Engine: wires a store, a worker and run control together for one process."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any

from cairn import codecs, config, durations
from cairn.authoring.registry import Registry, default_registry
from cairn.blobs import store_of
from cairn.clock import Clock, SystemClock
from cairn.core.run_env import RunEnv
from cairn.errors import ConfigError, InvalidArguments, InvalidValue
from cairn.names import check_queue_name
from cairn.observability import Metrics, Tracing, hooks, logcontext
from cairn.runtime import gc_tuning, leases, triggers, value_layers
from cairn.runtime.control import RunControl
from cairn.runtime.engine_verbs import EngineVerbs
from cairn.runtime.retention import Retention
from cairn.runtime.scheduler import Scheduler
from cairn.runtime.step_worker import StepWorker
from cairn.runtime.transient import PrivateEngine
from cairn.runtime.worker import Worker
from cairn.store import Store, open_store

log = logcontext.logger("cairn.engine")

MEMORY_URL = "sqlite:///:memory:"  # where transient runs are kept (runtime/transient.py)


def import_modules(modules: tuple[str, ...] | list[str]) -> None:
    """Import workflow modules so their decorators register; ConfigError names a bad one."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ConfigError(f"cannot import workflow module {name!r}: {exc}") from exc


class Engine(EngineVerbs):
    """Runs workflows in this process against one database.

    `async with Engine(url)` opens the database (applying migrations), recovers runs left
    by dead processes, and executes runs until the block exits.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        workers: int = 256,
        lease: Any = "10s",
        serializer: str = "json",
        modules: tuple[str, ...] | list[str] = (),
        registry: Registry | None = None,
        clock: Clock | None = None,
        store: Store | None = None,
        poll_interval: float = 0.5,
        claim: bool = True,
        queues: list[str] | tuple[str, ...] | None = None,
        step_queues: list[str] | tuple[str, ...] | None = None,
        polls: bool = True,
        metrics: Metrics | bool = False,
        tracing: Tracing | bool = False,
        known_workers_window: Any = None,
        grace: Any = 0,
        ephemeral: bool = False,
        databases: Mapping[str, Any] | None = None,
        tags: Any = None,
        retention: Any = None,
        warn_value_size: Any = None,
        max_value_size: Any = None,
        inline_limit: Any = None,
        blobs: Any = None,
        warn_history: int | None = None,
        max_history: int | None = None,
        tune_gc: bool = True,
        codec: codecs.Codec | None = None,
    ) -> None:
        """Configure an engine.

        Args:
            url: Database URL: sqlite:///file.db, file:///dir, memory://, postgresql://...
                (default: CAIRN_DATABASE_URL, else cairn.yaml or [tool.cairn] url, else
                sqlite:///cairn.db).
            workers: Runs this process executes at once (0: start and inspect only;
                default 256). A run started or due beyond them waits in the database
                until a slot frees. Slots are cheap (a task each; database connections do
                not grow with them); what bounds them is memory (each run's state while
                it executes) and threads (up to one per slot in a sync step).
            lease: How long a silent worker keeps its runs before others take them ("10s").
            serializer: "json" (default) or "pickle" (opt-in unpickling of other types).
            modules: Modules to import so their workflows register.
            registry: Workflow registry (default: the one the decorators fill).
            clock: Time source (default: the system clock; tests pass a VirtualClock).
            store: An already built store (overrides `url`).
            poll_interval: Seconds between checks for work started by other processes.
            queues: Only claim queued runs of these queues (default: every run).
            polls: False: claim a run (or a step queue's attempt) only when told its id
                (`engine.worker.take`, `engine.step_worker.take`: what cairn.celery's tasks
                do), never by polling the database for work.
            step_queues: Also execute the attempts of steps sent to these step queues
                (`@cairn.step(queue=...)`) by any run (default: none; such a step never
                executes on a worker that does not serve its queue).
            claim: Also execute runs started elsewhere (queued, due, orphaned); False
                executes only the runs this engine starts (what `cairn run` uses).
            metrics: Prometheus metrics (`cairn.observability.Metrics`; True makes one,
                on a registry of its own: see `engine.metrics`). Needs `cairn-workflows[metrics]`.
            tracing: OpenTelemetry spans of runs and steps, on the global tracer provider
                (`cairn.observability.Tracing`; True makes one). Needs `cairn-workflows[otel]`.
            known_workers_window: How long after a worker was last seen its workflows
                can still be started by name from a process that does not import them
                (default: CAIRN_KNOWN_WORKERS_WINDOW, else [tool.cairn], else "7d").
            grace: How long closing lets the steps executing then finish ("30s"; default
                0: they are cut off at once). Each run is then handed back for any
                engine to take at once; a step cut off runs again there.
            ephemeral: The engine transient runs execute on (see runtime/transient.py):
                it keeps them in its own store, imports no modules and declares no
                queues, schedules or event subscriptions. Not for durable work.
            databases: The application's databases by name, for `cairn.steps.db`: a
                SQLAlchemy URL (or Engine) each, over `[tool.cairn.databases]`.
            tags: The tag provider of `cairn.steps.tags`: a URL ("opcua://host:4840") or
                a provider object (default: `[tool.cairn.tags] provider`).
            retention: Delete finished runs this long after they finished ("30d"), with
                their history, every minute while the engine is open (default:
                CAIRN_RETENTION, else `[tool.cairn] retention`, else keep every run).
                Runs an unfinished run depends on are kept. Only an engine with
                workers that claims prunes.
            warn_value_size: A stored value (arguments, step result, event payload)
                larger than this is logged ("256KiB", the default, or bytes).
            max_value_size: A stored value larger than this is refused with
                SerializationError before anything is written ("100MiB", the default).
            inline_limit: A stored value larger than this is written to the blob store
                and the history keeps a reference to it ("256KiB", the default).
            blobs: Their blob store, "file:///dir" or "s3://bucket/prefix" (default:
                CAIRN_BLOBS, else [tool.cairn], else `<sqlite file>.blobs`; PostgreSQL has
                none and refuses such values). See docs/howto/large-values.md.
            warn_history: A run whose history passes this many entries is logged
                (default 10,000).
            max_history: A run whose history would pass this many entries fails,
                pointing at continue_as_new (default 50,000). Each of the four limits
                defaults to CAIRN_<NAME>, else `[tool.cairn] <name>`.
            tune_gc: While the engine executes runs, freeze the objects alive when it
                opened and let the garbage collector's young passes wait for 10,000 new
                objects instead of 700 (default True; False leaves the collector alone).
                See runtime/gc_tuning.py.
            codec: What every stored value passes through: `cairn.codecs.Encrypted(...)`
                encrypts them at rest (default: the keys of CAIRN_KEYS or CAIRN_KEYS_FILE,
                if set; else none). See docs/howto/encryption.md.

        Raises:
            ConfigError: A bad `databases`, `tags`, `retention` or limit setting, here or
                in pyproject.toml.
        """
        if not isinstance(workers, int) or workers < 0:
            raise InvalidValue(f"workers must be a non-negative integer, got {workers!r}")
        self.url = url or config.database_url()
        self.store = store if store is not None else open_store(self.url)
        self._owns_store = store is None  # a store passed in is closed by its owner
        self.lease = durations.parse(lease, what="lease").total_seconds()
        if self.lease <= 0:
            raise InvalidValue(f"lease must be positive, got {lease!r}")
        self.grace = durations.parse(grace, what="grace").total_seconds()
        self.serializer_name = serializer  # for the engine of its transient runs
        self.ephemeral = ephemeral
        self.modules = () if ephemeral else (tuple(modules) or config.modules())
        # What the ready steps of cairn.steps reach by name (read here, opened by them).
        self.resources = config.resources(databases, tags)
        # Seconds finished runs are kept (None: for ever), and the size and length limits.
        self.retention = None if ephemeral else config.retention(retention)
        self.limits = config.limits(
            warn_value_size=warn_value_size,
            max_value_size=max_value_size,
            warn_history=warn_history,
            max_history=max_history,
        )
        self.pruner: Retention | None = None
        self.serializer = value_layers.stack(
            serializer, self.limits, codec, self.store, inline_limit=inline_limit, blobs=blobs
        )
        self.registry = registry or default_registry
        self.clock = clock or SystemClock()
        self.workers = workers
        self.poll_interval = poll_interval
        self.claim = claim
        self.serve_queues = [check_queue_name(name, "queue") for name in queues] if queues else None
        self.polls = polls
        self.step_queues = [check_queue_name(name, "step queue") for name in (step_queues or ())]
        # Executes the attempts of step_queues once open (None: serves none).
        self.step_worker: StepWorker | None = None
        # The engine's Prometheus metrics and OpenTelemetry spans (True: new ones), or None.
        self.metrics: Metrics | None = Metrics() if metrics is True else metrics or None
        self.tracing: Tracing | None = Tracing() if tracing is True else tracing or None
        self.worker: Worker | None = None
        # The workers `close` is stopping (for `hurry`).
        self.stopping: list[Worker | StepWorker] = []
        self.scheduler: Scheduler | None = None
        self.control = RunControl(
            self.store,
            clock=self.clock,
            serializer=self.serializer,
            registry=self.registry,
            known_window=config.known_workers_window(known_workers_window),
            ephemeral=ephemeral,
        )
        # Where this engine's transient runs execute (none of them, if it is that engine).
        self.transient_runs: PrivateEngine[Engine] | None = (
            None if ephemeral else PrivateEngine(self.memory_twin, workers)
        )
        self._threads: list[ThreadPoolExecutor] = []
        if not isinstance(tune_gc, bool):
            raise InvalidArguments(f"tune_gc must be True or False, got {tune_gc!r}")
        self.tune_gc = tune_gc
        self._gc_held = False  # this engine holds the collector's tuning
        self._open = False

    def memory_twin(self) -> Engine:
        """A new engine for this one's transient runs, on SQLite `:memory:`.

        It has this engine's registry, clock, serializer, tracing and resources
        (cairn.steps' databases and tags).
        """
        return Engine(
            MEMORY_URL,
            workers=self.workers,
            serializer=self.serializer_name,
            registry=self.registry,
            clock=self.clock,
            poll_interval=self.poll_interval,
            tracing=self.tracing or False,
            ephemeral=True,
            databases=self.resources.databases,
            tags=self.resources.tags,
        )

    async def __aenter__(self) -> Engine:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def open(self) -> None:
        """Open the database, register as a worker and recover orphaned runs."""
        if self._open:
            return
        import_modules(self.modules)
        await self.store.open()
        observer = hooks.combine(self._observers())
        declares = not self.ephemeral  # the code's queues, triggers and schedules
        if self.registry.queues and declares:
            await self.control.queues.declare(list(self.registry.queues.values()))
        if self.workers > 0:
            # What the code declares for event triggers and schedules goes to the database.
            if declares:
                await triggers.declare(self.control)
                await self.control.names.declare()  # queues of runs started by name
            if self.claim and declares:
                self.scheduler = Scheduler(
                    self.control, poll_interval=self.poll_interval, observer=observer
                )
                await self.scheduler.declare()
            step_threads = ThreadPoolExecutor(max(8, self.workers), "cairn-step")
            self._threads = [step_threads]
            env = RunEnv(
                store=self.store,
                clock=self.clock,
                serializer=self.serializer,
                registry=self.registry,
                owner=leases.new_worker_id(),
                loop=asyncio.get_running_loop(),
                threads=step_threads,
                workflow_threads=ThreadPoolExecutor(self.workers, "cairn-workflow"),
                observer=observer,
                ephemeral=self.ephemeral,
                resources=self.resources,
                limits=self.limits,
            )
            self._threads.append(env.workflow_threads)
            self.worker = Worker(
                env,
                concurrency=self.workers,
                lease=self.lease,
                # Straight to the waiters: a frame less on every run's end.
                on_finished=self.control.notify_finished,
                poll_interval=self.poll_interval,
                claim=self.claim,
                queues=self.serve_queues,
                transient=self.ephemeral,
                polls=self.polls,
                step_queues=self.step_queues,
            )
            self.control.local = self.worker
            await self.worker.start()
            if self.step_queues:
                self.step_worker = StepWorker(
                    env,
                    self.step_queues,
                    lease=self.lease,
                    concurrency=self.workers,
                    poll_interval=min(self.poll_interval, 0.25),
                    polls=self.polls,
                )
                await self.step_worker.start()
            if self.scheduler is not None:
                self.scheduler.start()
            if self.retention is not None and self.claim:
                kept = store_of(self.serializer)
                self.pruner = Retention(self.store, self.clock, keep=self.retention, blobs=kept)
                self.pruner.start()
            if self.tune_gc:
                gc_tuning.hold()
                self._gc_held = True
        self._open = True

    def _observers(self) -> list[hooks.Observer]:
        """The engine's observers; its metrics read gauges from its store from now on."""
        observers: list[hooks.Observer] = []
        if self.tracing is not None:
            observers.append(self.tracing)
        if self.metrics is not None:
            self.metrics.bind(self.store, asyncio.get_running_loop(), self.clock)
            observers.append(self.metrics)
        return observers

    def hurry(self) -> None:
        """End the grace of a `close` in progress: cut steps off, hand back within HURRIED."""
        for worker in self.stopping:
            worker.hurry()

    async def close(self) -> None:
        """Stop executing: steps in flight finish within the grace, then runs are handed back."""
        if not self._open:
            return
        self._open = False
        if self.transient_runs is not None:
            await self.transient_runs.close()
        if self.metrics is not None:
            self.metrics.unbind()
        if self.pruner is not None:
            await self.pruner.stop()
            self.pruner = None
        if self.scheduler is not None:
            await self.scheduler.stop()
            self.scheduler = None
        self.control.local = None
        # One grace and one hand-back window for both: they stop side by side.
        self.stopping = [w for w in (self.step_worker, self.worker) if w is not None]
        try:
            await asyncio.gather(*(w.stop(grace=self.grace) for w in self.stopping))
        finally:
            self.stopping = []
        self.step_worker = self.worker = None
        for pool in self._threads:
            pool.shutdown(wait=False, cancel_futures=True)
        self._release_gc()
        if self._owns_store:
            await self.store.close()

    async def _die(self) -> None:
        """Stop at once, as if the process were killed (for testing).

        Nothing is handed back: its runs stay RUNNING under its now silent worker id.
        Transient runs are lost with it, as with a real crash.
        """
        self._open = False
        if self.transient_runs is not None:
            await self.transient_runs.close()
        if self.pruner is not None:
            await self.pruner.stop()
            self.pruner = None
        if self.scheduler is not None:
            await self.scheduler.stop()
            self.scheduler = None
        if self.step_worker is not None:
            await self.step_worker.abandon()
            self.step_worker = None
        if self.worker is not None:
            worker, self.worker = self.worker, None
            self.control.local = None
            await worker.abandon()
        for pool in self._threads:
            pool.shutdown(wait=False, cancel_futures=True)
        self._release_gc()

    def _release_gc(self) -> None:
        if self._gc_held:
            self._gc_held = False
            gc_tuning.release()
