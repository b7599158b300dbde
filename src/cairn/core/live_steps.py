"""LiveSteps: the journal cursor of a live run, its step calls and checkpoint commits.

One of the parts LiveRun (core/live_run.py) holds, made with the run's LiveAttempt
(core/live_attempt.py). It is what the helpers that run steps, waits, children and emits
are handed (core/attempts.py, core/waits.py, ...; they see it as a `LiveView`,
core/live_view.py). A step call is per step on the hot path: LiveRun serves `call_step`
from here, and it goes straight to core/attempts.py, no layer between.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from cairn import durations, step_failures
from cairn.authoring import context
from cairn.authoring.context import RunContext
from cairn.authoring.definitions import StepDef
from cairn.authoring.retry import coerce
from cairn.blobs.offloaded import Offloaded
from cairn.blobs.reference import MARK, BlobError
from cairn.core import attempts, blob_reads, common_steps, durable, journal, patches, remote_steps
from cairn.core.live_attempt import LiveAttempt
from cairn.core.run_values import RunValues
from cairn.core.signals import HandBack, Suspend, Unwind
from cairn.errors import Cancelled, SerializationError, StoreError
from cairn.names import check_name
from cairn.observability.hooks import RunScope
from cairn.store.programs import journal as journal_ops
from cairn.store.protocol import LeaseLost, Store
from cairn.store.records import AttemptRecord, Lease, StepRecord


def _upsert(store: Store, lease: Lease, record: StepRecord) -> Callable[[], Awaitable[None]]:
    return lambda: store.write(journal_ops.upsert_step(lease, record))


class LiveSteps:
    """Replays recorded outcomes and commits new ones; durable points act on interrupts."""

    def __init__(
        self,
        ctx: RunContext,
        attempt: LiveAttempt,
        prior_attempts: dict[str, list[AttemptRecord]],
    ) -> None:
        self.ctx = ctx  # the run's RunContext (its LiveRun): active while a step runs
        self.attempt = attempt
        # The attempt's own, held here too: read on every step.
        self.env = attempt.env
        self.run = attempt.run
        self.lease = attempt.lease
        self.journal = attempt.journal
        self._counters = self.journal.counters
        self.interrupts = attempt.interrupts
        self.deliver = attempt.deliver
        self._loop_thread = threading.get_ident()  # made on the loop's thread, as the attempt
        self.leave = attempt.leave
        # Every stored value the attempt reads: a missing key hands the run back.
        # A blob store that does not answer a read is waited out (core/blob_reads.py).
        # Made on the first read: its waiting-out points back here (a cycle a run needs not).
        self._values: RunValues | None = None
        # A small result is encoded by the JSON serializer alone, without a coroutine.
        # The JSON serializer's own `dumps`, when nothing but it and the blob store's length
        # check make the stored text (core/common_steps.py); and the texts that are short.
        serializer = self.env.serializer
        self.dumps_plain: Callable[..., str] | None = None
        self.surely_inline = -1
        if isinstance(serializer, Offloaded) and serializer.plain_json:
            self.dumps_plain = serializer.inner_dumps
            self.surely_inline = serializer.surely_inline
        self.flying = attempt.flying
        self._running_steps = attempt.running_steps
        # The failed attempts of each step in earlier executions, by key.
        self.prior_attempts = prior_attempts
        # Told of each new step attempt when the engine observes (see executor.execute).
        self.observed: RunScope | None = None
        self.marks: list[StepRecord] = []  # patch markers to store before the next write
        self.spawned = False  # started a child run, a human task or a remote step here
        # The tokens of the hooks this attempt handed out: kept out of stored step inputs.
        self.hook_tokens: set[str] = set()
        # Whether the attempt recorded anything (see `progressed`).
        self.journaled = False
        self._first_seq = self.journal.next_seq
        self._cancel_recorded = self.journal.cancelled is not None
        self._checks = 0  # check_cancelled() calls in workflow code: durable points too

    @property
    def values(self) -> RunValues:
        """Every stored value the attempt reads (see `_values`)."""
        values = self._values
        if values is None:
            values = self._values = RunValues(
                self.env.serializer,
                self.leave,
                lambda read, first, at: blob_reads.fetched(self, self.env, read, first, at),
            )
        return values

    @property
    def closed(self) -> bool:
        """True once the attempt is over: nothing of it may write any more."""
        return self.attempt.closed

    def alone(self) -> bool:
        """True if the run has no parent and never started a child, task or remote step.

        Finishing such a run need not look for any of them (a remote step: its attempt
        on a step queue, which the run's end closes if it is still open).
        """
        if self.run.parent_id is not None or self.spawned:
            return False
        if self._first_seq == 1:
            # No record from before this attempt: what it started set `spawned`.
            return True
        return not any(
            r.kind in ("child", "task", "remote") for r in self.journal.recorded.values()
        )

    def progressed(self) -> bool:
        """True if this attempt recorded anything.

        A new journal entry, the outcome of a wait, or a failed step attempt: a woken run
        that parks again without any woke for nothing (see core/futile_wakes.py).
        """
        return self.journaled or self.journal.next_seq != self._first_seq

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
            self.journal.diverge(patches.predates(change_id))

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
        await durable.write(
            self,
            lambda: store.write(journal_ops.upsert_step(lease, record)),
            what="the cancel",
        )

    def check_cancelled(self) -> None:
        """Raise Cancelled if the run was cancelled.

        In a step's code it raises at once; in workflow code only once replay has caught up
        with the history, so a replay takes the same path as the original execution.
        """
        interrupts = self.interrupts
        if context.in_step():
            interrupts.stop_step()  # a step's own code: it stops
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

    def call_step(
        self, step: StepDef[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Run a declared step durably."""
        name = step.name
        counters = self._counters  # Journal.next_key, inlined: this runs for every step
        n = counters[name] = counters.get(name, 0) + 1
        key = f"{name}#{n}"
        if threading.get_ident() == self._loop_thread:
            # An async workflow awaits it (`deliver`, without its call).
            return common_steps.step(self, key, step, args, kwargs)
        return self.deliver(self.full_step(key, step, args, kwargs))

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
        return self.deliver(self.full_step(key, step, args, kwargs, target))

    async def full_step(
        self,
        key: str,
        step: StepDef[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        target: str | None = None,
    ) -> Any:
        """Run step `key` (core/common_steps.py runs the common case without this)."""
        # A queued step's attempts were reported in entries of their own, replayed first.
        reports = [] if step.queue is None else remote_steps.take_reports(self.journal, key)
        record = self.journal.take(key, "step")
        if record is not None:
            result = record.result
            if result is None or MARK not in result or record.status == "failed":
                return self.outcome(record)  # the common case: no coroutine more per step
            return await self.replayed(record)
        if not self.journal.open_for_new_work():
            await self.journal.check_new_work(journal.started("step", key))
        if step.queue is None and not attempts.trusted(self):
            # After a gap (the database away, the process frozen) the step may start only
            # once a heartbeat commits: wait for it before the durable point, so that a
            # cancel or pause the worker learns of meanwhile is met there, not after.
            await self.attempt.hold_lease()
        interrupts = self.interrupts
        if (
            interrupts.cancel
            or interrupts.pause
            or interrupts.handing_back
            or (interrupts.delivered_at is not None and not self._cancel_recorded)
        ):
            try:
                await self.point(key)  # tested here first: a coroutine per step otherwise
            except Cancelled:
                if step.queue is not None:  # its attempt executing on a worker is cut off
                    await remote_steps.cut_off_awaited(self, key, step.name, reports)
                raise
        # A sync workflow's steps run in a loop task of their own, without the run's context.
        ctx = self.ctx
        token = None if context.in_run() is ctx else context.enter(ctx)
        running = self._running_steps
        running[key] = asyncio.current_task(self.env.loop)
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
            running.pop(key, None)
            self.flying.pop(key, None)  # no attempt of it is in flight any more
            if self.attempt.step_waiter is not None:
                self.attempt.step_ended()

    async def replayed(self, record: StepRecord) -> Any:
        """`outcome`, the blobs an offloaded result names read in a thread (not on the loop).

        A reference anywhere in it (a step's result, a receive's list of messages): the
        read waits for a blob store that does not answer (RunValues), rather than
        raising StoreUnavailable into the workflow's code.
        """
        result = record.result
        if record.status == "failed" or result is None or MARK not in result:
            return self.outcome(record)
        try:
            return await self.values.loads_async(result, record.key)
        except BlobError as exc:
            raise exc.of_step(record.key) from exc

    def outcome(self, record: StepRecord) -> Any:
        """The recorded result of a completed operation, or its recorded failure raised."""
        if record.status == "failed":
            data = self.values.unseal_json(record.error) or {}
            unserializable = data.get("serialization")
            if isinstance(unserializable, dict):  # its result could not be stored
                raise SerializationError(
                    str(data.get("message", "")),
                    what=str(unserializable.get("what", "")),
                    type_name=str(unserializable.get("type_name", "")),
                )
            raise step_failures.from_dict(data)
        if record.result is None:
            return None
        try:
            return self.values.loads(record.result)
        except BlobError as exc:  # an offloaded result whose blob is missing or corrupt
            raise exc.of_step(record.key) from exc

    async def commit_step(self, record: StepRecord) -> None:
        """Commit a new outcome (see core/durable.py); Unwind if the run is not held.

        StoreRefused (the database will never take it) is raised to the caller. Its path
        with nothing to do first is inlined in `attempts.run_new_step`: change both.
        """
        if self.attempt.closed:  # a stray branch of an attempt already over must not write
            raise Unwind()
        if self.marks:
            await self.store_marks()
        self.journaled = True
        try:
            await self.env.store.write(journal_ops.record_step(self.lease, record))
        except (LeaseLost, StoreError) as first:
            await durable.record_step(self, record, first)  # what it meant, and what next
        if self.env.commit_hook is not None:
            self.env.commit_hook(record)

    async def commit_attempt(self, record: AttemptRecord) -> None:
        """Commit a failed attempt; Unwind if the run is not held."""
        store, lease = self.env.store, self.lease
        self.journaled = True
        what = f"attempt {record.attempt} of {record.key!r}"
        await durable.write(
            self, lambda: store.write(journal_ops.record_attempt(lease, record)), what=what
        )
