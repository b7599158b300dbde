"""LiveAttempt: one executing attempt of a run, its lifecycle (what runs, parks, closes).

The base of LiveRun (core/live_run.py), which is built in layers, each on the one before:
this module (the attempt: its threads, steps in flight, waits deciding, closing),
core/live_steps.py (the journal cursor, step calls and checkpoint commits),
core/live_waits.py (sleeps, events, hooks, human tasks, receive); children, emits,
continue_as_new and the run's columns and progress are the hub's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cairn import config
from cairn.authoring.context import RunContext
from cairn.core import journal, scheduled_starts
from cairn.core.interrupts import Interrupts
from cairn.core.run_env import RunEnv
from cairn.core.run_meta import MetaWriter
from cairn.core.signals import Suspend, Unwind
from cairn.errors import StoreUnavailable
from cairn.models import RunInfo, RunStatus
from cairn.observability.hooks import RunScope
from cairn.store.programs import runs as run_ops
from cairn.store.records import AttemptRecord, Lease, RunRecord, StepRecord

if TYPE_CHECKING:
    from cairn.authoring.workflow import WorkflowDef
    from cairn.core.streams import StreamWriters


def as_datetime(ts: float | None) -> datetime | None:
    """A stored timestamp as an aware UTC datetime."""
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


def run_info(run: RunRecord) -> RunInfo:
    """What `cairn.current_run()` says of `run`, wherever its code executes."""
    return RunInfo(
        run_id=run.run_id,
        workflow=run.workflow,
        attempt=max(run.attempt, 1),
        started_at=as_datetime(run.started_at or run.created_at) or datetime.now(UTC),
        parent_id=run.parent_id,
        scheduled_at=as_datetime(run.scheduled_at),
        version=run.version,
        continued_from=run.continued_from,
    )


class LiveAttempt(RunContext):
    """One attempt of one run: what it has running, what it waits on, and its end."""

    def __init__(
        self,
        env: RunEnv,
        run: RunRecord,
        workflow: WorkflowDef[Any, Any],
        records: list[StepRecord],
        prior_attempts: dict[str, list[AttemptRecord]],
        *,
        epoch: int = 0,
    ) -> None:
        self.env = env
        self.run = run
        # This attempt's right to write: checked by the database with every write.
        self.lease = Lease(env.owner, run.fence)
        # The tenure epoch the attempt began in (see core/tenure.py).
        self.epoch = epoch
        self.workflow = workflow
        # Told of each new step attempt when the engine observes (see executor.execute).
        self.observed: RunScope | None = None
        self.journal = journal.Journal(
            records,
            warn_history=env.limits.warn_history,
            max_history=env.limits.max_history,
            run_name=(run.run_id, run.workflow),
            cache_keys=workflow.names_are_cache_keys,
        )
        self.prior_attempts = prior_attempts
        self._loop_thread = threading.get_ident()
        # Column values (JSON text) already stored, so replays write nothing new.
        self._columns: dict[str, str] = {}
        if run.columns:
            self._columns = {
                name: json.dumps(value, sort_keys=True)
                for name, value in json.loads(run.columns).items()
            }
        self._meta: MetaWriter | None = None  # made on the first columns/progress write
        self._step_threads: set[concurrent.futures.Future[Any]] = set()
        # The thread of a sync step attempt that timed out, by step key: it runs on, and
        # the step's next attempt waits until it has returned (core/attempts.py).
        self.overrunning: dict[str, concurrent.futures.Future[Any]] = {}
        self.spawned = False  # started a child run or a human task in this attempt
        # Runs scheduled and not yet written (core/scheduled_starts.py): awaited at the end.
        self.scheduled = scheduled_starts.PendingStarts()
        self.streams: StreamWriters | None = None  # made on the first cairn.stream()
        self.marks: list[StepRecord] = []  # patch markers to store before the next write
        # Calls a sync workflow's thread is blocked on; cancelled by close().
        self._blocked: set[concurrent.futures.Future[Any]] = set()
        self._closed = False
        # Steps executing now (done-future -> the task running it). A run parks only once
        # the steps its other gather branches started have committed (see settle), and an
        # attempt that ends otherwise cancels them (see close): nothing of it runs on.
        self._running_steps: dict[asyncio.Future[None], tuple[asyncio.Task[Any] | None, str]] = {}
        # Steps waiting out a short retry backoff in memory, on the engine's clock.
        self.backing_off = 0
        # Step attempts executing now: key -> (step name, attempt, started at). The worker's
        # heartbeat publishes them (runtime/in_flight.py), from its own thread.
        self.flying: dict[str, tuple[str, int, float]] = {}
        # The tokens of the hooks this attempt handed out: kept out of stored step inputs.
        self.hook_tokens: set[str] = set()
        # What this attempt's branches park on (key -> message channel or None for a
        # sleep, deadline or wake time, what `waiting_for` calls it): when the run parks,
        # the messages that wake it and when it wakes (see executor's _parking).
        self.waits: dict[str, tuple[str | None, float | None, str]] = {}
        # Waits deciding now whether to take a message, time out or park (see settle).
        self._deciding: set[asyncio.Future[None]] = set()
        # Whether the attempt recorded anything (see `progressed`).
        self.journaled = False
        self._first_seq = self.journal.next_seq
        self.interrupts = Interrupts(env.loop, run.control)
        if self.journal.cancelled is not None:
            # An earlier attempt delivered a cancellation: this replay delivers it at the
            # same point, whatever the clock says now (a sleep then due, say).
            facts = json.loads(self.journal.cancelled.result or "{}")
            self.interrupts.recorded(str(facts.get("at", "")), str(facts.get("reason", "")))
            self.journal.at_take = self.interrupts.at_recorded_point
        self._cancel_recorded = self.journal.cancelled is not None
        self._checks = 0  # check_cancelled() calls in workflow code: durable points too
        # The workflow timeout: a cancellation requested when it expires.
        self.deadline: float | None = None
        self._deadline_timer: asyncio.TimerHandle | None = None
        if workflow.timeout is not None:
            self.deadline = (run.started_at or run.created_at) + workflow.timeout
            left = self.deadline - env.clock.now()
            reason = f"workflow timeout ({workflow.timeout:g}s) expired"
            if left <= 0:
                self.interrupts.request("cancel", reason)
            else:
                self._deadline_timer = env.loop.call_later(
                    left, self.interrupts.request, "cancel", reason
                )

    def alone(self) -> bool:
        """True if the run has no parent and never started a child or a human task.

        Finishing such a run need not look for either.
        """
        if self.run.parent_id is not None or self.spawned:
            return False
        return not any(r.kind in ("child", "task") for r in self.journal.recorded.values())

    def progressed(self) -> bool:
        """True if this attempt recorded anything.

        A new journal entry, the outcome of a wait, or a failed step attempt: a woken run
        that parks again without any woke for nothing (see core/futile_wakes.py).
        """
        return self.journaled or self.journal.next_seq != self._first_seq

    def parked_waits(self) -> tuple[list[str], float | None, str | None]:
        """What the run parks on: channels (once each), first wake time, first wait.

        The first wait for a message as `waiting_for` names it ("event:approval"). A run
        may wait on several things at once (asyncio.gather).
        """
        waits = list(self.waits.values())
        channels = list(dict.fromkeys(channel for channel, _, _ in waits if channel is not None))
        times = [when for _, when, _ in waits if when is not None]
        first = next((label for channel, _, label in waits if channel is not None), None)
        return channels, min(times, default=None), first

    def timer(self, key: str, wake_at: float, waiting_for: str | None = None) -> BaseException:
        """The signal that parks the run until `wake_at` (a sleep, a retry backoff) at `key`.

        Noted among the waits, so that a gather's other branches parking it first still
        wake it on time.
        """
        self.waits[key] = (None, wake_at, waiting_for or "")
        return self.leave(Suspend(RunStatus.SLEEPING, wake_at, waiting_for))

    def waits_for_time(self) -> bool:
        """True if every step executing now waits out a retry backoff on the clock.

        The attempt then makes no progress until the clock moves (cairn.testing asks).
        """
        return self.backing_off > 0 and self.backing_off >= len(self._running_steps)

    def step_of(self, task: asyncio.Task[Any]) -> str | None:
        """The key of the step `task` is running for this attempt, if any (any thread)."""
        try:
            running = list(self._running_steps.values())
        except RuntimeError:  # changed while we looked: the loop is not blocked after all
            return None
        return next((key for owner, key in running if owner is task), None)

    def running_step(self) -> str | None:
        """The key of a step this attempt is executing now, if any."""
        return next((key for _, key in self._running_steps.values()), None)

    def track_thread(self, running: concurrent.futures.Future[Any]) -> None:
        """Count a sync step's thread: the attempt is over only once it has returned."""
        self._step_threads.add(running)
        running.add_done_callback(self._step_threads.discard)

    async def quiesced(self, timeout: float | None = None) -> bool:
        """Wait until no step thread of this attempt runs; False if `timeout` passed first.

        A cancelled attempt's async code stops at its next await, but a sync step's thread
        cannot be stopped: no other attempt of the run may start before it has returned.
        """
        pending = [asyncio.wrap_future(f) for f in list(self._step_threads) if not f.done()]
        if not pending:
            return True
        done, _ = await asyncio.wait(pending, timeout=timeout)
        return len(done) == len(pending)

    def leave(self, signal: BaseException) -> BaseException:
        """Note that the workflow unwinds with `signal`; returns it (see Journal.leaving)."""
        return self.journal.leaving(signal, by_task=self.workflow.is_async)

    @property
    def closed(self) -> bool:
        """True once the attempt is over: nothing of it may write any more."""
        return self._closed

    async def hold_lease(self) -> None:
        """Before a step body starts: make sure this attempt still holds its run.

        Free while the worker's heartbeat is fresh (see core/tenure.py). After a gap (a
        frozen process, an outage), wait for a heartbeat to commit and, once per epoch,
        read the run's owner and fence; Unwind if another attempt holds it now.
        """
        tenure = self.env.tenure
        if tenure is None or tenure.trusts(self.epoch):
            return
        while True:
            if self._closed:
                raise Unwind()
            if not tenure.fresh():
                await tenure.renewal(timeout=max(0.1, tenure.lease / 3))
                continue
            epoch = tenure.epoch
            try:
                stored = await self.env.store.read(run_ops.get_run(self.run.run_id))
            except StoreUnavailable:
                await asyncio.sleep(0.1)
                continue
            if stored is None or (stored.owner, stored.fence) != (
                self.lease.owner,
                self.lease.fence,
            ):
                raise Unwind()  # taken over (or claimed again) while this worker was away
            self.epoch = epoch
            if tenure.trusts(epoch):
                return

    def close(self) -> None:
        """Release timers once the attempt is over; abandon a sync workflow's pending call."""
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
        # An attempt abandoned while a sync workflow's thread waits (the engine closing):
        # cancel what the thread waits for, and refuse it anything more.
        self._closed = True
        self.journal.closed = True
        for future in list(self._blocked):
            future.cancel()
        try:
            current = asyncio.current_task()
        except RuntimeError:  # no running loop
            current = None
        for task, _ in list(self._running_steps.values()):
            if task is not None and task is not current:
                task.cancel()

    async def settle(self) -> None:
        """Before parking: refuse new durable work and let steps already running commit.

        A branch of an `asyncio.gather` that parks the run leaves its sibling branches
        running; their steps finish here rather than run again on the next replay, and
        their waits decide (take a message or park too).
        """
        self.journal.closed = True
        while self._running_steps or self._deciding:
            await asyncio.wait({*self._running_steps, *self._deciding})

    def deciding(self) -> asyncio.Future[None]:
        """A wait begins to decide (take a message, time out or park): the run parks after.

        So that the channels it records are those of the waits still open, and a message
        a sibling branch is taking does not count as one that just arrived.
        """
        decided: asyncio.Future[None] = self.env.loop.create_future()
        self._deciding.add(decided)
        return decided

    def decided(self, deciding: asyncio.Future[None]) -> None:
        """The wait has decided (see `deciding`)."""
        self._deciding.discard(deciding)
        if not deciding.done():
            deciding.set_result(None)

    def park_time(self, wake_at: float | None) -> float | None:
        """When a parked run must wake: its own time, or the workflow deadline if sooner."""
        if self.deadline is None:
            return wake_at
        return self.deadline if wake_at is None else min(wake_at, self.deadline)

    def resources(self) -> config.Resources:
        """The engine's databases and tag provider (see `cairn.config.resources`)."""
        return self.env.resources

    def info(self) -> RunInfo:
        """Facts about this run."""
        return run_info(self.run)

    def deliver(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Hand `coro` to the caller.

        Async workflows get it to await; a sync workflow's thread blocks until it is done.
        """
        if threading.get_ident() == self._loop_thread:
            return coro
        if self._closed:
            coro.close()
            raise Unwind()
        future = asyncio.run_coroutine_threadsafe(coro, self.env.loop)
        self._blocked.add(future)
        if self._closed:  # closed between the check and the add
            future.cancel()
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            if self._closed:  # Unwind is a BaseException: `except Exception` cannot swallow it
                raise Unwind() from None
            raise
        finally:
            self._blocked.discard(future)
