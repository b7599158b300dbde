"""How a worker finds work: claims (by polling, or by run id), and operator requests.

One of the parts a Worker (runtime/worker.py) holds: made with the worker's Executions
(runtime/executing.py), whose free slots it fills and whose runs it passes requests to.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time

from cairn.core import executor
from cairn.core.live_run import LiveRun
from cairn.errors import StoreUnavailable
from cairn.models import RunStatus
from cairn.observability import logcontext
from cairn.runtime import leases
from cairn.runtime.executing import Executions
from cairn.store.programs import claims as claim_ops
from cairn.store.programs import control as control_ops
from cairn.store.programs import workers

log = logcontext.logger("cairn.worker")


class Claimer:
    """Claims runs into free slots; passes requests from other processes to its runs."""

    def __init__(self, executions: Executions) -> None:
        self.executions = executions
        self.env = executions.env
        self.lease = executions.lease
        self.poll_interval = executions.poll_interval
        # The clock's time of the last claim: what was due by then, that claim saw.
        self._looked_at = float("-inf")
        self._orphans_due = 0.0  # when a claim next takes orphans before pending runs
        # After letting runs go, no claim before then (time.monotonic(); the Reconciler
        # sets it from the heartbeat's thread: one float).
        self.resume_at = 0.0
        # Runs `take` was asked for and not yet claimed, how many (they hold slots), and
        # the task claiming them.
        self._asked: list[tuple[str, asyncio.Future[bool]]] = []
        self._asking = 0
        self._taker: asyncio.Future[None] | None = None
        # Takes with `wait` in line for a slot, first come first served.
        self._waiting: collections.deque[asyncio.Future[None]] = collections.deque()
        self._woken = 0  # of them, woken and not yet asking
        executions.on_slot_freed = self._slot_freed
        executions.on_stopping = self._stopping

    async def _poll_controls(self) -> None:
        # Requests made by other processes reach the runs we execute here.
        if not self.executions.live:
            return
        controls = dict(await self.env.store.read(control_ops.controlled_runs(self.env.owner)))
        for run_id, live in list(self.executions.live.items()):
            control = controls.get(run_id)
            if control is not None:
                if not _already(live, control):
                    live.interrupts.request(control)
            elif live.interrupts.pause:
                # A resume withdrew the pause before the run met it: its control is
                # cleared, so it is no longer listed, and it must not park PAUSED.
                live.interrupts.request(None)

    async def claim_once(self) -> int:
        """Claim and launch as many runs as there are free slots; returns how many."""
        executions = self.executions
        if executions.free <= 0 or executions.stopping or time.monotonic() < self.resume_at:
            return 0
        limit = executions.free
        epoch = executions.tenure.epoch  # a claim answered late must not skip the lease check
        # Now and then a dead worker's runs go before new ones: under a backlog they would
        # otherwise wait until the queue drains. Not every claim, to keep claims cheap.
        orphans_first = time.monotonic() >= self._orphans_due
        if orphans_first:
            self._orphans_due = time.monotonic() + self.lease / 3
        now = self.env.clock.now()
        self._looked_at = now
        claimed = await self.env.store.write(
            claim_ops.claim(
                self.env.owner,
                limit,
                now=now,
                # Judged as the claim's transaction starts, again if it is retried: a claim
                # sent before an outage and retried after it must not judge by then.
                stale=self.judges_heartbeats,
                queues=self.executions.queues,
                workflows=self.executions.executes(),
                versions={
                    name: wf.version
                    for name, wf in self.env.registry.workflows.items()
                    if wf.version is not None
                },
                orphans_first=orphans_first,
                skip=self.executions.keyless.left_out(now),
            )
        )
        for run_id, workflow in claimed.poisoned.items():
            log.error("run %s given up after too many recoveries (PoisonRun)", run_id)
            if self.env.observer is not None:
                self.env.observer.poisoned(workflow)
            self.executions.on_finished(run_id, executor.Outcome(RunStatus.FAILED))
        if self.env.observer is not None and claimed.runs:
            self.env.observer.claimed(claimed.runs, claimed.due, now)
        for run in claimed.runs:
            self.executions.start(run, fresh=False, epoch=epoch)
        self.executions.backlog = len(claimed.runs) >= limit
        return len(claimed.runs)

    def judges_heartbeats(self) -> bool:
        """Whether this worker may take a run whose owner's heartbeat is only old (leases.py).

        Never while its own heartbeat is overdue (its beats hang, unanswered, and no error
        says so yet): whatever holds up its beats may hold up the others' too.
        """
        return self.executions.tenure.fresh() and leases.may_judge_heartbeats(
            since=self.executions.started,
            trouble_at=self.env.store.health.trouble_at(),
            lease=self.lease,
        )

    async def take(self, run_id: str, *, wait: bool = False) -> bool:
        """Claim `run_id` and execute it here; wait until this attempt of it ends.

        What a transport's message leads to (cairn.celery): the claim applies the lease,
        queue and liveness rules of any claim, so a message delivered twice, or for a run
        another worker holds or that has finished, takes nothing. Takes that arrive while
        a claim by id is in flight share the next one (one statement for many messages).
        Returns whether it took the run; False at once when no slot is left for it, or
        with `wait` (a transport's acknowledged message: its run is this worker's to
        take) once a slot frees, first come first served (False if the worker stops
        first). Takes pending a claim hold their slots. False at once, too, for a run this
        worker handed back for a key it lacks while its back-off lasts (runtime/keyless.py):
        a refusal, so the dispatcher publishes it again for others.
        """
        if self.executions.keyless.backing_off(run_id, self.env.clock.now()):
            return False
        while wait and not self.executions.stopping and self.room <= 0:
            # In line for a slot, woken one per slot freed (`_slot_freed`), or all at once
            # as the worker stops (`_stopping`). No timer: a batch message may leave
            # hundreds in line, and each waking up to look again cost as much as a run.
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            try:
                await waiter
            finally:
                if waiter.done() and not waiter.cancelled():
                    self._woken -= 1  # woken: it asks now (or waits again)
                else:
                    with contextlib.suppress(ValueError):
                        self._waiting.remove(waiter)
        if self.executions.stopping or self.room <= 0:
            return False
        asked: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._asked.append((run_id, asked))
        self._asking += 1
        if self._taker is None or self._taker.done():
            self._taker = asyncio.ensure_future(self._take_asked())
        if not await asked:
            return False
        attempt = self.executions.active.get(run_id)
        if attempt is not None and attempt.task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(attempt.task)
        return True

    @property
    def room(self) -> int:
        """Slots neither in use nor held by takes pending a claim."""
        return self.executions.free - self._asking

    def _slot_freed(self) -> None:
        # Wake as many takes in line as there is room, less those woken that have not
        # asked yet (they will fill it). None in line (the common case): nothing to count.
        if not self._waiting:
            return
        room = self.room - self._woken
        while room > 0 and self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self._woken += 1
                room -= 1

    def _stopping(self) -> None:
        # Every take in line answers now (False: the worker claims nothing more).
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self._woken += 1

    async def _take_asked(self) -> None:
        """Claim the runs `take` was asked for, in one claim per batch, until none is left."""
        while self._asked:
            batch, self._asked = self._asked, []
            try:
                taken = await self._claim_by_id([run_id for run_id, _ in batch])
            except BaseException as exc:
                for _, asked in batch:
                    if asked.done():
                        pass
                    elif isinstance(exc, asyncio.CancelledError):
                        asked.cancel()
                    else:
                        asked.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise
                continue
            finally:
                self._asking -= len(batch)
                self._slot_freed()  # the slots of runs not taken are free again
            for run_id, asked in batch:
                # A run asked for twice is taken once: the first ask answers for it.
                first = run_id in taken
                taken.discard(run_id)
                if not asked.done():
                    asked.set_result(first)

    async def _claim_by_id(self, run_ids: list[str]) -> set[str]:
        """Claim of `run_ids` those a claim may take now and launch them; their ids."""
        if self.executions.stopping:
            return set()
        unique = list(dict.fromkeys(run_ids))
        epoch = self.executions.tenure.epoch
        now = self.env.clock.now()
        claimed = await self.env.store.write(
            claim_ops.claim(
                self.env.owner,
                len(unique),
                now=now,
                stale=self.judges_heartbeats,  # judged as it starts (see claim_once)
                workflows=self.executions.executes(),
                versions={
                    name: wf.version
                    for name, wf in self.env.registry.workflows.items()
                    if wf.version is not None
                },
                only=unique,
            )
        )
        for poisoned, workflow in claimed.poisoned.items():
            log.error("run %s given up after too many recoveries (PoisonRun)", poisoned)
            if self.env.observer is not None:
                self.env.observer.poisoned(workflow)
            self.executions.on_finished(poisoned, executor.Outcome(RunStatus.FAILED))
        if not claimed.runs:
            return set()
        if self.env.observer is not None:
            self.env.observer.claimed(claimed.runs, claimed.due, now)
        for run in claimed.runs:
            self.executions.start(run, fresh=False, epoch=epoch)
        return {run.run_id for run in claimed.runs}

    async def claim_loop(self) -> None:
        """Claim whenever there may be work, until the store can never be written."""
        while self.executions.writable():
            await self._wait_for_work(await self._idle_time())
            self.executions.woken.clear()
            try:
                while await self.claim_once() and self.executions.free > 0:
                    pass
                await self._poll_controls()
            except StoreUnavailable as exc:  # the database is away: one line, no traceback
                if self.executions.writable():
                    log.warning("claiming runs failed (%s); retrying", exc)
            except Exception:
                if self.executions.writable():
                    log.exception("claiming runs failed; retrying")

    async def control_loop(self) -> None:
        """Without a claim loop: pass on operator requests, until the store is unwritable.

        Without polling (`polls=False`), the transport's loop (cairn.celery's dispatcher)
        is the one that waits on the store's hints, and passes them on (`wake`): a hint
        is taken by one waiter, so two waiting on the store would take turns at them.
        """
        while self.executions.writable():
            await self._wait_for_work(self.poll_interval, hints=self.executions.polls)
            self.executions.woken.clear()
            try:
                await self._poll_controls()
            except StoreUnavailable as exc:
                log.warning("reading operator requests failed (%s); retrying", exc)
            except Exception:
                log.exception("reading operator requests failed; retrying")

    async def _wait_for_work(self, timeout: float, *, hints: bool = True) -> None:
        # Until this process has new work, the store hints that others made some (NOTIFY
        # on PostgreSQL, data_version on SQLite), or `timeout` passes: polling is the
        # fallback for what no hint reports (a dead worker's lease running out).
        waiters: set[asyncio.Future[object]] = {asyncio.ensure_future(self.executions.woken.wait())}
        if hints:
            waiters.add(asyncio.ensure_future(self.env.store.wait_for_work(timeout)))
        try:
            await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                if not waiter.done():
                    waiter.cancel()
                elif not waiter.cancelled() and waiter.exception() is not None:
                    log.warning("waiting for work failed: %s", waiter.exception())

    async def _idle_time(self) -> float:
        # Sleep until the next timer is due (so timers fire on time), at most a poll interval.
        if self.env.store.wakes_for_timers:
            return self.poll_interval  # the store's wait ends at each timer by itself
        if self.executions.free <= 0:
            # What comes due meanwhile waits for a slot: the first one freed wakes the loop.
            self.executions.backlog = True
            return self.poll_interval
        if time.monotonic() < self.resume_at:
            return self.poll_interval  # no claim before then
        try:
            due = await self.env.store.read(workers.next_wake())
        except Exception:
            return self.poll_interval
        if due is None or due <= self._looked_at:
            # The last claim saw it due and left it: its queue is full (a freed place wakes
            # the loop), or it is not ours to take. Timing it again would claim in a loop.
            return self.poll_interval
        return max(0.0, min(self.poll_interval, due - self.env.clock.now()))


def _already(live: LiveRun, control: str) -> bool:
    interrupts = live.interrupts
    return (control == "cancel" and interrupts.cancel) or (control == "pause" and interrupts.pause)
