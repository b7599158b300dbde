"""LiveAttempt: one executing attempt of a run, its lifecycle (what runs, parks, closes).

One of the parts LiveRun (core/live_run.py) holds: this one owns the attempt's threads,
its steps in flight, the waits deciding, its interrupts and its end. It is made first and
knows none of the others; LiveSteps (core/live_steps.py) and LiveWaits
(core/live_waits.py) are given it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from cairn.core import pending_starts
from cairn.core.interrupts import Interrupts
from cairn.core.journal import Journal
from cairn.core.run_env import RunEnv
from cairn.core.signals import Suspend, Unwind
from cairn.errors import StoreUnavailable
from cairn.models import RunInfo, RunStatus
from cairn.store.programs import runs as run_ops
from cairn.store.records import Lease, RunRecord

if TYPE_CHECKING:
    from cairn.authoring.definitions import WorkflowDef


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


class AttemptStreams(Protocol):
    """What an attempt asks of its stream writers (core/streams.py StreamWriters)."""

    def open(self, name: str) -> Any:
        """A writer of stream `name` for the code running now."""
        ...

    async def finish(self, key: str, attempt: int) -> None:
        """Store what the attempt buffered (it succeeded)."""
        ...

    async def fail(self, key: str, attempt: int) -> None:
        """Void what the attempt wrote (it failed)."""
        ...

    def discard(self, key: str, attempt: int) -> None:
        """Forget the attempt's buffers (it unwinds)."""
        ...


class LiveAttempt:
    """One attempt of one run: what it has running, what it waits on, and its end."""

    def __init__(
        self,
        env: RunEnv,
        run: RunRecord,
        workflow: WorkflowDef[Any, Any],
        journal: Journal,
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
        # The run's journal (core/journal.py): closed to new work when the attempt parks.
        self.journal = journal
        self._loop_thread = threading.get_ident()
        self._step_threads: set[concurrent.futures.Future[Any]] = set()
        # The thread of a sync step attempt that timed out, by step key: it runs on, and
        # the step's next attempt waits until it has returned (core/attempts.py).
        self.overrunning: dict[str, concurrent.futures.Future[Any]] = {}
        # Runs scheduled and not yet written (core/pending_starts.py): awaited at the end.
        self.scheduled = pending_starts.PendingStarts()
        self.streams: AttemptStreams | None = None  # made on the first cairn.stream()
        self._stream_writes: asyncio.Lock | None = None  # made on the first stream write
        # Calls a sync workflow's thread is blocked on; cancelled by close().
        self._blocked: set[concurrent.futures.Future[Any]] = set()
        self.closed = False  # once True, nothing of the attempt may write any more
        # Steps executing now (key -> the task running it). A run parks only once the
        # steps its other gather branches started have committed (see settle), and an
        # attempt that ends otherwise cancels them (see close): nothing of it runs on.
        self.running_steps: dict[str, asyncio.Task[Any] | None] = {}
        # What settle waits on while steps run: set by the next step to end (`step_ended`).
        self.step_waiter: asyncio.Future[None] | None = None
        # Steps waiting out a short retry backoff in memory, on the engine's clock.
        self.backing_off = 0
        # Step attempts executing now: key -> (step name, attempt, started at). The worker's
        # heartbeat publishes them (runtime/in_flight.py), from its own thread.
        self.flying: dict[str, tuple[str, int, float]] = {}
        # What this attempt's branches park on (key -> message channel or None for a
        # sleep, deadline or wake time, what `waiting_for` calls it): when the run parks,
        # the messages that wake it and when it wakes (see core/parkings.py).
        self.waits: dict[str, tuple[str | None, float | None, str]] = {}
        # Waits deciding now whether to take a message, time out or park (see settle).
        self._deciding: set[asyncio.Future[None]] = set()
        self.interrupts = Interrupts(env.loop, run.control)
        if self.journal.cancelled is not None:
            # An earlier attempt delivered a cancellation: this replay delivers it at the
            # same point, whatever the clock says now (a sleep then due, say).
            facts = json.loads(self.journal.cancelled.result or "{}")
            self.interrupts.recorded(str(facts.get("at", "")), str(facts.get("reason", "")))
            self.journal.at_take = self.interrupts.at_recorded_point
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

    @property
    def stream_writes(self) -> asyncio.Lock:
        """The lock each write of the run's stream items holds (core/streams.py).

        Steps running at once that write one stream would otherwise number their items alike.
        """
        lock = self._stream_writes
        if lock is None:
            lock = self._stream_writes = asyncio.Lock()
        return lock

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
        return self.backing_off > 0 and self.backing_off >= len(self.running_steps)

    def step_of(self, task: asyncio.Task[Any]) -> str | None:
        """The key of the step `task` is running for this attempt, if any (any thread)."""
        try:
            running = list(self.running_steps.items())
        except RuntimeError:  # changed while we looked: the loop is not blocked after all
            return None
        return next((key for key, owner in running if owner is task), None)

    def running_step(self) -> str | None:
        """The key of a step this attempt is executing now, if any."""
        return next(iter(self.running_steps), None)

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
            if self.closed:
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
        self.closed = True
        self.journal.closed = True
        for future in list(self._blocked):
            future.cancel()
        try:
            current = asyncio.current_task()
        except RuntimeError:  # no running loop
            current = None
        for task in list(self.running_steps.values()):
            if task is not None and task is not current:
                task.cancel()

    async def settle(self) -> None:
        """Before parking: refuse new durable work and let steps already running commit.

        A branch of an `asyncio.gather` that parks the run leaves its sibling branches
        running; their steps finish here rather than run again on the next replay, and
        their waits decide (take a message or park too).
        """
        self.journal.closed = True
        while self.running_steps or self._deciding:
            waiting = set(self._deciding)
            if self.running_steps:
                if self.step_waiter is None or self.step_waiter.done():
                    self.step_waiter = self.env.loop.create_future()
                waiting.add(self.step_waiter)
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)

    def step_ended(self) -> None:
        """A step stopped running (LiveSteps.full_step, common_steps.step): wake settle."""
        waiter = self.step_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

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

    def deliver(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Hand `coro` to the caller.

        Async workflows get it to await; a sync workflow's thread blocks until it is done.
        """
        if threading.get_ident() == self._loop_thread:
            return coro
        if self.closed:
            coro.close()
            raise Unwind()
        future = asyncio.run_coroutine_threadsafe(coro, self.env.loop)
        self._blocked.add(future)
        if self.closed:  # closed between the check and the add
            future.cancel()
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            if self.closed:  # Unwind is a BaseException: `except Exception` cannot swallow it
                raise Unwind() from None
            raise
        finally:
            self._blocked.discard(future)
