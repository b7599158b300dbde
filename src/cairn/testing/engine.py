"""TestEngine: the real engine on SQLite `:memory:` with a virtual clock.

Nothing is re-implemented: runs go through the same store, replay and workers as in
production. Time only moves when the test says so, and crashes are injected at commits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import date, datetime
from types import TracebackType
from typing import Any

from cairn import durations
from cairn.authoring.definitions import StepDef, WorkflowDef
from cairn.authoring.registry import Registry, default_registry
from cairn.clock import VirtualClock
from cairn.core.signals import Unwind
from cairn.models import EventDelivery, History, RunPage, RunStatus
from cairn.runtime.engine import Engine
from cairn.runtime.handle import RunHandle
from cairn.runtime.tasks import TaskControl
from cairn.store.programs import runs as run_ops
from cairn.store.programs import schedules
from cairn.store.programs import workers as worker_ops
from cairn.store.records import RunQuery, StepRecord
from cairn.store.sqlite.store import SqliteStore


class SimulatedCrash(Exception):
    """Raised by TestEngine methods used while the engine is "dead" after a crash."""


class TestEngine:
    """An engine for tests: in-memory SQLite, a virtual clock, crash injection.

    `async with TestEngine() as env:` then `env.start(...)`, `await env.advance("1h")`
    (sleeps and timeouts due within that time complete now), `env.crash_after_step(name)`
    and `await env.recover()` (a fresh engine on the same store takes over).
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        *,
        registry: Registry | None = None,
        workers: int = 100,
        start: float | None = None,
        databases: Mapping[str, Any] | None = None,
        tags: Any = None,
    ) -> None:
        self.clock = VirtualClock(start)
        self.store = SqliteStore(":memory:")
        self.registry = registry or default_registry
        self.workers = workers
        # The step library's databases and tag provider (as Engine's `databases`, `tags`).
        self.databases = databases
        self.tags = tags
        self.engine = self._new_engine()
        self._crash_step: str | None = None
        self._crashed = False
        self._committed: dict[str, None] = {}  # step names committed while a crash is armed

    def _new_engine(self) -> Engine:
        return Engine(
            "sqlite:///:memory:",
            store=self.store,
            clock=self.clock,
            registry=self.registry,
            workers=self.workers,
            poll_interval=0.02,
            databases=self.databases,
            tags=self.tags,
        )

    async def __aenter__(self) -> TestEngine:
        await self.store.open()
        await self._open_engine()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._crashed:
            await self.engine.close()
        await self.store.close()

    async def _open_engine(self) -> None:
        await self.engine.open()
        if self.engine.worker is not None:
            self.engine.worker.env.commit_hook = self._after_commit

    # time

    async def advance(self, duration: Any) -> None:
        """Move the clock forward; what falls due in that time runs now, in order.

        The clock stops at each due time on the way (a sleep's end, a retry backoff, a
        timeout, a schedule tick) and the engine settles there, so work that falls due
        because earlier work ran (a second backoff after a failed retry) runs too, at its
        own time. Returns once no run can make progress without more time passing.
        """
        seconds = durations.parse(duration, what="advance").total_seconds()
        target = self.clock.now() + seconds
        await self.settle()  # runs started just now reach their sleeps first
        while (due := await self.next_due()) is not None and due <= target:
            if due <= self.clock.now():
                break  # due, yet still not done (held back by a queue limit?): just go on
            self.clock.advance(due - self.clock.now())
            await self.settle()
        self.clock.advance(max(0.0, target - self.clock.now()))
        await self.settle()

    async def next_due(self) -> float | None:
        """When something next falls due: a parked run, a schedule's tick, a clock sleeper.

        Clock sleepers are short retry backoffs waited out in memory, among others.
        """
        dues = [self.clock.next_due()]
        for engine in self._engines():
            dues.append(await engine.store.read(worker_ops.next_wake()))
        if self.engine.scheduler is not None:
            dues.append(await self.store.read(schedules.next_schedule_tick()))
        return min((due for due in dues if due is not None), default=None)

    def _engines(self) -> list[Engine]:
        """The engine, and the one its transient runs execute on once there is one."""
        runs = self.engine.transient_runs
        private = None if runs is None else runs.engine
        return [self.engine] if private is None else [self.engine, private]

    async def settle(self, timeout: float = 10.0) -> None:
        """Wait (in real time, at most `timeout`) until every run is parked or finished."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        quiet = 0
        while quiet < 3 and loop.time() < deadline:
            engines = self._engines()
            for engine in engines:
                if engine.worker is not None:
                    engine.worker.wake()
            await asyncio.sleep(0.01)
            # A run waiting out a short retry backoff in memory waits for the clock.
            busy = any(
                attempt.live is None or not attempt.live.attempt.waits_for_time()
                for engine in engines
                if engine.worker is not None
                for attempt in engine.worker.active.values()
            )
            due = await self.next_due()  # a wake-up or tick due now: work about to start
            now = self.clock.now()
            pending = [
                run
                for engine in engines
                for run in await engine.store.read(
                    run_ops.list_runs(RunQuery(status=RunStatus.PENDING.value, limit=100))
                )
                if run.waiting_for is None and (run.wake_at is None or run.wake_at <= now)
            ]
            if busy or pending or (due is not None and due <= now):
                quiet = 0
            else:
                quiet += 1

    # crashes

    def crash_after_step(self, name: str | StepDef[..., Any]) -> None:
        """The next commit of step `name` "kills" the engine right after it commits.

        `name` is the step's name (`@cairn.step(name=...)`) or the decorated function.
        `recover()` raises ValueError if no step of that name has committed by then: the
        crash the test meant to simulate never happened.
        """
        if isinstance(name, StepDef):
            name = name.name
        if not isinstance(name, str) or not name:
            raise TypeError(
                f"crash_after_step: expected a step name or a @cairn.step function, got {name!r}"
            )
        self._crash_step = name
        self._committed = {}

    def _after_commit(self, record: StepRecord) -> None:
        if self._crash_step is not None and record.kind == "step":
            self._committed[record.name] = None
        if self._crashed or (self._crash_step is not None and record.name == self._crash_step):
            self._crash_step = None
            if not self._crashed:
                self._crashed = True
                if self.engine.worker is not None:
                    self.engine.worker.halt()  # from this commit on, as good as killed
                asyncio.get_running_loop().create_task(self.engine._die())
            raise Unwind()

    async def recover(self) -> None:
        """Start a fresh engine on the same store; it recovers the dead engine's runs.

        Raises:
            ValueError: a crash armed by `crash_after_step` never fired.
        """
        if self._crash_step is not None and not self._crashed:
            committed = ", ".join(repr(name) for name in self._committed) or "none"
            raise ValueError(
                f"crash_after_step({self._crash_step!r}) never fired: no step of that name "
                f"committed (steps committed: {committed})"
            )
        await self.engine._die()
        dead = [w.worker_id for w in await self.store.read(worker_ops.list_workers())]
        await self.store.write(worker_ops.expire_workers(dead))
        self._crashed = False
        self.engine = self._new_engine()
        await self._open_engine()
        await self.settle()

    # the engine's surface

    def __getattr__(self, name: str) -> Any:
        """The rest of the engine's surface, from the engine running now.

        emit, schedules, queues, check...: whatever `Engine` has and this
        class does not define, taken from `env.engine` (a new engine after `recover()`).
        """
        if name.startswith("_") or name == "engine":  # not set yet: no engine to ask
            raise AttributeError(name)
        try:
            return getattr(self.engine, name)
        except AttributeError:
            raise AttributeError(
                f"TestEngine has no attribute {name!r} (nor has cairn.Engine)"
            ) from None

    async def start(
        self,
        workflow: WorkflowDef[Any, Any] | str | Any,
        *args: Any,
        delay: Any = None,
        run_at: datetime | date | str | None = None,
        **options: Any,
    ) -> RunHandle:
        """Start a run (see Engine.start)."""
        return await self.engine.start(workflow, *args, delay=delay, run_at=run_at, **options)

    async def get(self, run_id: str) -> RunHandle:
        """A handle on an existing run."""
        return await self.engine.get(run_id)

    async def list_runs(self, **filters: Any) -> RunPage:
        """A page of runs (see Engine.list_runs)."""
        return await self.engine.list_runs(**filters)

    async def history(self, run_id: str) -> History:
        """The run's history."""
        return await self.engine.history(run_id)

    async def send_event(
        self, run_id: str, name: str, payload: Any = None, *, idempotency_key: str | None = None
    ) -> EventDelivery:
        """Send an event to a run; it is kept until a wait of the run takes it."""
        return await self.engine.send_event(run_id, name, payload, idempotency_key=idempotency_key)

    async def resume_hook(self, token: str, payload: Any = None) -> str:
        """Call a hook once with its token and a payload."""
        return await self.engine.resume_hook(token, payload)

    @property
    def tasks(self) -> TaskControl:
        """The human-task inbox."""
        return self.engine.tasks

    async def cancel(self, run_id: str) -> RunStatus:
        """Cancel a run: it ends CANCELLED at its current or next durable point."""
        return await self.engine.cancel(run_id)

    async def pause(self, run_id: str) -> RunStatus:
        """Pause a run at its next durable point (at once if it sleeps, waits or is queued)."""
        return await self.engine.pause(run_id)

    async def resume(self, run_id: str) -> RunStatus:
        """Resume a paused run; timers and events that came meanwhile are honoured."""
        return await self.engine.resume(run_id)

    async def retry(self, run_id: str, *, by: str | None = None) -> RunHandle:
        """Continue a FAILED run from its failed step (completed steps do not run again)."""
        return await self.engine.retry(run_id, by=by)

    async def restart(self, run_id: str, *, by: str | None = None) -> RunHandle:
        """Start a new run of the same workflow with the same input."""
        return await self.engine.restart(run_id, by=by)

    async def fork(self, run_id: str, from_step: int, *, by: str | None = None) -> RunHandle:
        """Start a new run reusing the recorded steps before a chosen history entry.

        That entry is `from_step` (see `Engine.fork`).
        """
        return await self.engine.fork(run_id, from_step, by=by)
