"""LiveRun: the RunContext of one executing attempt of a run (journal, store, clock)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cairn import config, durations
from cairn.authoring import context
from cairn.authoring.context import RunContext
from cairn.authoring.hook import Hook
from cairn.authoring.registry import Registry
from cairn.authoring.retry import coerce
from cairn.authoring.step import StepDef
from cairn.clock import Clock
from cairn.core import (
    attempts,
    children,
    durable,
    emits,
    journal,
    mailbox,
    patches,
    remote_steps,
    waits,
)
from cairn.core.futile_wakes import FutileWakes
from cairn.core.interrupts import Interrupts
from cairn.core.run_meta import MetaWriter
from cairn.core.signals import ContinueAsNew, HandBack, Suspend, Unwind
from cairn.core.tenure import Tenure
from cairn.errors import (
    Cancelled,
    SerializationError,
    StepFailed,
    StoreError,
    StoreUnavailable,
)
from cairn.models import RunInfo
from cairn.names import check_name
from cairn.observability.hooks import Observer, RunScope
from cairn.serialization import Serializer
from cairn.store.protocol import LeaseLost, Store
from cairn.store.records import AttemptRecord, Lease, RunRecord, StepRecord

if TYPE_CHECKING:
    from cairn.authoring.workflow import WorkflowDef


@dataclass(slots=True)
class RunEnv:
    """What executing a run needs from the process around it."""

    store: Store
    clock: Clock
    serializer: Serializer
    registry: Registry
    owner: str
    loop: asyncio.AbstractEventLoop
    threads: ThreadPoolExecutor
    workflow_threads: ThreadPoolExecutor
    # Called when this run creates work for workers (a child run), to look for it now.
    on_new_work: Callable[[], None] | None = None
    # Called after each step outcome commits (cairn.testing's crash injection).
    commit_hook: Callable[[StepRecord], None] | None = None
    # Called just before a transaction step's checkpoint commits with the user's writes
    # (crash tests stop a process there: core/transaction_steps.py).
    before_commit: Callable[[StepRecord], None] | None = None
    # How long this worker may trust it still holds its runs (None: always; tests).
    tenure: Tenure | None = None
    # Metrics and traces (cairn.observability); None: nothing is observed, at no cost.
    observer: Observer | None = None
    # This process's count of each run's wake-ups without progress (None: not counted).
    futile: FutileWakes | None = None
    # True on the engine of transient runs, whose store lives in this process's memory:
    # only there may a run start a transient child (see runtime/transient.py).
    ephemeral: bool = False
    # The application's databases and tag provider, for the ready steps (cairn.steps).
    resources: config.Resources = field(default_factory=config.Resources)
    # How large a value and how long a history may grow (see cairn/limits.py).
    limits: config.Limits = field(default_factory=config.Limits)


# A column value's JSON text (ASCII: json.dumps escapes the rest) is indexed with its
# name; 1,000 keeps name + value inside PostgreSQL's index entry limit, on both stores.
MAX_COLUMN_JSON = 1000


def _upsert(store: Store, lease: Lease, record: StepRecord) -> Callable[[], Awaitable[None]]:
    return lambda: store.upsert_step(lease, record)


def _utc(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


class LiveRun(RunContext):
    """One attempt of one run: replays recorded outcomes and records new ones."""

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
        self.spawned = False  # started a child run or a human task in this attempt
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
        return self.leave(Suspend("SLEEPING", wake_at, waiting_for))

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

    async def point(self, key: str) -> None:
        """A durable point (new work at `key` starts here): act on a cancel, pause or hand back.

        Cancelled is raised here once, and where it was raised is recorded before the
        attempt writes anything else, so that a replay raises it at the same place.
        """
        interrupts = self.interrupts
        if interrupts.cancel or interrupts.pause or interrupts.handing_back:
            try:
                interrupts.checkpoint(key)
            except (Suspend, HandBack) as leaving:
                raise self.leave(leaving) from None
            except Cancelled:
                await self.record_cancel()
                raise
        if interrupts.delivered_at is not None and not self._cancel_recorded:
            await self.record_cancel()

    def patched(self, change_id: str) -> bool:
        """See core/patches.py: the marker of a new decision is stored before later writes."""
        key = patches.key_of(self.journal, change_id)
        new_path, record = patches.decide(self.journal, key)
        if record:
            now = self.env.clock.now()
            self.marks.append(
                StepRecord(
                    self.run.run_id,
                    self.journal.allocate_seq(),
                    key,
                    patches.PATCH,
                    change_id,
                    "completed",
                    1,
                    now,
                    now,
                )
            )
        return new_path

    def deprecate_patch(self, change_id: str) -> None:
        """See core/patches.py."""
        if not self.patched(change_id):
            error = patches.predates(change_id)
            self.journal.divergence = error  # the run fails even if the code catches it
            raise error

    async def store_marks(self) -> None:
        """Store the patch markers decided so far, in order, before anything after them."""
        marks, self.marks = self.marks, []
        store, lease = self.env.store, self.lease
        for record in marks:
            await durable.write(self, _upsert(store, lease, record), what=f"{record.key!r}")

    async def record_cancel(self) -> None:
        """Journal where the cancellation was delivered (once; a no-op before delivery)."""
        at = self.interrupts.delivered_at
        if at is None or self._cancel_recorded:
            return
        self._cancel_recorded = True
        now = self.env.clock.now()
        record = StepRecord(
            self.run.run_id,
            self.journal.allocate_seq(),
            journal.CANCEL,
            "cancel",
            "cancel",
            "completed",
            1,
            now,
            now,
            json.dumps({"at": at, "reason": self.interrupts.reason}),
        )
        store, lease = self.env.store, self.lease
        await durable.write(self, lambda: store.upsert_step(lease, record), what="the cancel")

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
                stored = await self.env.store.get_run(self.run.run_id)
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
        run = self.run
        return RunInfo(
            run_id=run.run_id,
            workflow=run.workflow,
            attempt=max(run.attempt, 1),
            started_at=_utc(run.started_at or run.created_at) or datetime.now(UTC),
            parent_id=run.parent_id,
            scheduled_at=_utc(run.scheduled_at),
            version=run.version,
            continued_from=run.continued_from,
        )

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

    def call_step(
        self, step: StepDef[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Run a declared step durably."""
        key = self.journal.next_key(step.name)
        return self.deliver(self._step(key, step, args, kwargs))

    def call_inline(
        self,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        retries: Any,
        timeout: Any,
        queue: str | None = None,
    ) -> Any:
        """Run `fn` as a durable step called `name` (on step queue `queue` if set)."""
        check_name(name, "cairn.run_step name")
        target = None if queue is None else remote_steps.target_of(fn, name)
        retry = coerce(retries)
        seconds = None
        if timeout is not None:
            seconds = durations.parse(timeout, what=f"timeout of step {name!r}").total_seconds()
        key = self.journal.next_key(name)
        step = StepDef(name, fn, retry, seconds, asyncio.iscoroutinefunction(fn), queue=queue)
        return self.deliver(self._step(key, step, args, kwargs, target))

    async def _step(
        self,
        key: str,
        step: StepDef[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        target: str | None = None,
    ) -> Any:
        # A queued step's attempts were reported in entries of their own, replayed first.
        reports = [] if step.queue is None else remote_steps.take_reports(self.journal, key)
        record = self.journal.take(key, "step")
        if record is not None:
            return self.outcome(record)
        if not self.journal.open_for_new_work():
            await self.journal.check_new_work(f"started step {key!r}")
        await self.point(key)
        # A sync workflow's steps run in a loop task of their own, without the run's context.
        token = None if context.in_run() is self else context.enter(self)
        loop = self.env.loop
        running: asyncio.Future[None] = loop.create_future()
        self._running_steps[running] = (asyncio.current_task(loop), key)
        try:
            if step.queue is not None:
                return await remote_steps.run_remote_step(
                    self, key, step, args, kwargs, reports, target
                )
            return await attempts.run_new_step(self, key, step, args, kwargs)
        except Cancelled:
            # check_cancelled() in the step's code: delivered into the workflow here.
            if self.interrupts.delivered_at is None:
                self.interrupts.delivered_at = key
            await self.record_cancel()
            raise
        finally:
            if token is not None:
                context.leave(token)
            self._running_steps.pop(running, None)
            self.flying.pop(key, None)  # no attempt of it is in flight any more
            running.set_result(None)

    def outcome(self, record: StepRecord) -> Any:
        """The recorded result of a completed operation, or its recorded failure raised."""
        if record.status == "failed":
            data = json.loads(record.error or "{}")
            unserializable = data.get("serialization")
            if isinstance(unserializable, dict):  # its result could not be stored
                raise SerializationError(
                    str(data.get("message", "")),
                    what=str(unserializable.get("what", "")),
                    type_name=str(unserializable.get("type_name", "")),
                )
            raise StepFailed.from_dict(data)
        return None if record.result is None else self.env.serializer.loads(record.result)

    async def commit_step(self, record: StepRecord) -> None:
        """Commit a new outcome (see core/durable.py); Unwind if the run is not held.

        StoreRefused (the database will never take it) is raised to the caller.
        """
        if self._closed:  # a stray branch of an attempt already over must not write
            raise Unwind()
        if self.marks:
            await self.store_marks()
        self.journaled = True
        try:
            await self.env.store.record_step(self.lease, record)
        except (LeaseLost, StoreError) as first:
            await durable.record_step(self, record, first)  # what it meant, and what next
        if self.env.commit_hook is not None:
            self.env.commit_hook(record)

    async def commit_attempt(self, record: AttemptRecord) -> None:
        """Commit a failed attempt; Unwind if the run is not held."""
        store, lease = self.env.store, self.lease
        self.journaled = True
        what = f"attempt {record.attempt} of {record.key!r}"
        await durable.write(self, lambda: store.record_attempt(lease, record), what=what)

    async def _sleep_until_ts(self, wake_at: float, name: str | None) -> None:
        key = self.journal.next_key(journal.sleep_name(name))
        record = self.journal.take(key, "sleep")
        if record is None:
            await self.journal.check_new_work(f"started sleep {key!r}")
            await self.point(key)
            now = self.env.clock.now()
            decided = self.deciding()  # the run parks once this sleep has its wake time
            try:
                await self._commit_sleep(key, now, wake_at, name)
            finally:
                self.decided(decided)
        else:
            wake_at = float(json.loads(record.result or "0"))
        if wake_at - self.env.clock.now() <= 0:
            return
        await self.point(key)
        # Every sleep parks the run, however short: it is SLEEPING for everyone to see,
        # holds no slot, and a pause or cancel meets it where the database says it is.
        raise self.timer(key, wake_at)

    async def _commit_sleep(self, key: str, now: float, wake_at: float, name: str | None) -> None:
        await self.commit_step(
            StepRecord(
                run_id=self.run.run_id,
                seq=self.journal.allocate_seq(),
                key=key,
                kind="sleep",
                name=name or "sleep",
                status="completed",
                attempts=1,
                started_at=now,
                finished_at=now,
                result=json.dumps(wake_at),
            )
        )

    def sleep(self, seconds: float, name: str | None = None) -> Any:
        """Durable sleep for `seconds`."""
        return self.deliver(self._sleep_until_ts(self.env.clock.now() + seconds, name))

    def sleep_until(self, when: datetime, name: str | None = None) -> Any:
        """Durable sleep until `when` (naive datetimes are taken as UTC)."""
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return self.deliver(self._sleep_until_ts(when.timestamp(), name))

    def call_child(
        self, workflow: WorkflowDef[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Start `workflow` as a child run and wait for its result."""

        async def run_child() -> Any:
            handle = await children.start_child(
                self, workflow, args, kwargs, run_id=None, detached=False
            )
            return await children.child_result(self, handle)

        return self.deliver(run_child())

    def start_child(
        self,
        workflow: WorkflowDef[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str | None,
        detached: bool,
    ) -> Any:
        """Start a child run; a ChildHandle (awaitable in async workflows)."""
        coro = children.start_child(self, workflow, args, kwargs, run_id=run_id, detached=detached)
        return self.deliver(coro)

    def continue_as_new(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """End this run as CONTINUED; a fresh run takes `args` and `kwargs`."""
        self.journal.raise_if_leaving()  # in a `finally:` of a run that parks: not now
        raise ContinueAsNew(args, kwargs)

    def check_cancelled(self) -> None:
        """Raise Cancelled if the run was cancelled.

        In a step's code it raises at once; in workflow code only once replay has caught up
        with the history, so a replay takes the same path as the original execution.
        """
        interrupts = self.interrupts
        if context.in_step():
            # A step's own code: it stops, and Cancelled reaches the workflow at its call.
            if interrupts.cancel and interrupts.delivered_at is None and not interrupts.shielded():
                raise Cancelled(interrupts.reason)
            return
        self._checks += 1
        key = f"{journal.CHECK}#{self._checks}"
        if interrupts.recorded_at is not None:
            interrupts.at_recorded_point(key)  # a replay: only where it was delivered
            return
        if not interrupts.cancel or interrupts.shielded() or interrupts.delivered_at is not None:
            return
        if self.journal.caught_up():
            interrupts.deliver(key)  # recorded before the attempt writes anything else

    def wait_for_event(self, name: str, timeout: float | None, default: Any) -> Any:
        """The payload of the next event `name` sent to this run."""
        return self.deliver(waits.wait_for_event(self, name, timeout, default))

    def receive(self, topic: str, max_messages: int, timeout: float | None) -> Any:
        """Up to `max_messages` queued events `topic` (see core/mailbox.py)."""
        return self.deliver(mailbox.receive(self, topic, max_messages, timeout))

    def create_hook(self, name: str, timeout: float | None, schema: Any) -> Any:
        """A new single-use Hook (an awaitable in async workflows, the Hook in sync ones)."""
        return self.deliver(self._create_hook(name, timeout, schema))

    async def _create_hook(self, name: str, timeout: float | None, schema: Any) -> Hook:
        token, deadline, record = await waits.open_hook(self, name, timeout, schema)
        if token:
            self.hook_tokens.add(token)
        expires = _utc(deadline)
        return Hook(
            name,
            token,
            expires,
            lambda: self.deliver(waits.await_hook(self, name, record, schema)),
        )

    def human_task(
        self,
        name: str,
        title: str,
        data: Any,
        form: Any,
        assignee: str | None,
        timeout: float | None,
    ) -> Any:
        """Create a task for a person and wait for the submitted values."""
        coro = waits.human_task(self, name, title, data, form, assignee, timeout)
        return self.deliver(coro)

    def emit(self, event_type: str, payload: Any, key: str | None) -> Any:
        """Start the subscribers of `event_type` once; their run ids (replay returns them)."""
        emits.check(event_type, key)
        return self.deliver(emits.emit(self, event_type, payload, key))

    def set_columns(self, values: dict[str, Any]) -> None:
        """Store searchable facts about this run (written in the background, batched)."""
        changed: dict[str, str] = {}
        for name, value in values.items():
            check_name(name, "column name")
            try:
                text = json.dumps(value, sort_keys=True)
            except (TypeError, ValueError):
                raise ValueError(
                    f"column {name!r} must be a JSON value (str, number, bool, null, list, "
                    f"dict), got {type(value).__qualname__}"
                ) from None
            if len(text) > MAX_COLUMN_JSON:
                raise ValueError(
                    f"column {name!r} is {len(text)} characters of JSON; the limit is "
                    f"{MAX_COLUMN_JSON} (columns are for searching: keep long data in a step "
                    "result)"
                )
            if self._columns.get(name) != text:
                changed[name] = text
        if changed:
            self._columns.update(changed)
            self._write_meta(changed, None)

    def progress(self, message: str, current: float | None, total: float | None) -> None:
        """Store this run's progress (written in the background, batched)."""
        data = {"message": message, "current": current, "total": total, "at": self.env.clock.now()}
        self._write_meta(None, json.dumps(data))

    def _write_meta(self, columns: dict[str, str] | None, progress: str | None) -> None:
        if self._meta is None:
            self._meta = MetaWriter(self.env.store, self.run.run_id, self.env.clock.now)
        if threading.get_ident() == self._loop_thread:
            self._meta.add(columns, progress)
        else:  # a sync step's thread
            self.env.loop.call_soon_threadsafe(self._meta.add, columns, progress)

    async def flush_meta(self) -> None:
        """Wait for background column/progress writes (before the run finishes)."""
        if self._meta is not None:
            await self._meta.flush()
