"""The claim -> execute -> release loop: bounded concurrency, one attempt per run.

Liveness lives beside it: heartbeats on their own thread (`heartbeat.py`), a watchdog
for a blocked event loop (`watchdog.py`), and a reconciler that compares, at every
heartbeat, the runs the database says this worker holds with the attempts it executes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cairn.authoring import schedules
from cairn.core import executor
from cairn.core.futile_wakes import FutileWakes
from cairn.core.live_run import LiveRun, RunEnv
from cairn.core.tenure import Tenure
from cairn.errors import StoreError
from cairn.observability import logcontext
from cairn.runtime import in_flight, leases
from cairn.runtime.control import Reservation
from cairn.runtime.heartbeat import Heartbeat
from cairn.runtime.in_flight import InFlight
from cairn.runtime.watchdog import LoopWatchdog
from cairn.store.records import AttemptRecord, Beat, Lease, RunRecord, WorkerRecord

log = logcontext.logger("cairn.worker")

Finished = Callable[[str, executor.Outcome], None]


@dataclass(eq=False, slots=True)
class Attempt:
    """One attempt executing in this process."""

    run: RunRecord
    epoch: int
    task: asyncio.Task[None] | None = None
    live: LiveRun | None = None  # once the executor has made it
    started: float = 0.0  # time.monotonic() when it was launched

    async def quiesced(self, timeout: float | None = None) -> bool:
        """Wait until no thread of this attempt runs a step (see LiveRun.quiesced)."""
        return True if self.live is None else await self.live.quiesced(timeout)


class Worker:
    """Executes runs in this process: those started here and those it claims."""

    def __init__(
        self,
        env: RunEnv,
        *,
        concurrency: int,
        lease: float,
        on_finished: Finished,
        poll_interval: float = 0.5,
        claim: bool = True,
        queues: list[str] | None = None,
        transient: bool = False,
        polls: bool = True,
    ) -> None:
        self.env = env
        # False: claim a run only when told its id (`take`: a transport's message, see
        # cairn.celery), never by polling the database for work.
        self.polls = polls
        self.queues = queues
        # True: the engine of transient runs, which executes transient workflows too. A
        # worker on a database never does: their runs are never stored there.
        self.transient = transient
        # False: execute only runs started in this process (`cairn run`), never claim others.
        self.claim = claim
        self.concurrency = concurrency
        self.lease = lease
        self.poll_interval = poll_interval
        self._on_finished = on_finished
        self.active: dict[str, Attempt] = {}
        # The live state of executing runs, for cancel/pause requests to reach them.
        self.live: dict[str, LiveRun] = {}
        # The step attempts in flight, as each heartbeat publishes them.
        self.in_flight = InFlight(self.live)
        self.tenure = Tenure(lease)
        env.tenure = self.tenure
        env.on_new_work = self.wake
        if env.futile is None:
            env.futile = FutileWakes()
        self.process = leases.this_process()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._handing_back: set[asyncio.Task[None]] = set()  # resumes, expiries
        self._releases: set[asyncio.Task[None]] = set()  # hand-backs in flight
        self._releasing: set[str] = set()  # runs being handed back: not to be resumed
        self._stopping = False
        self._halted = False  # as good as killed: nothing more is written
        self._hurry = asyncio.Event()  # the grace of a stop ends now
        # Why this worker stopped by itself (its database can never be written), or None.
        self.failure: str | None = None
        self.failed = asyncio.Event()  # set with `failure`
        self._grace_ends: float | None = None  # time.monotonic(), while stopping
        self._reserved = 0
        self._backlog = False  # the last claim may have left claimable runs behind
        self._started = time.monotonic()
        self._orphans_due = 0.0  # when a claim next takes orphans before pending runs
        self._claims_resume = 0.0  # after letting runs go, no claim before (monotonic)
        self._heartbeat: Heartbeat | None = None
        self._watchdog: LoopWatchdog | None = None
        # The reconciler's previous look: (when sent, runs held, attempts then).
        self._last_beat: tuple[float, dict[str, int], dict[str, int]] | None = None

    @property
    def free(self) -> int:
        """Slots left for new runs."""
        return self.concurrency - len(self.active) - self._reserved

    def record(self) -> WorkerRecord:
        """This worker's row (its times are written by the database)."""
        return WorkerRecord(
            worker_id=self.env.owner,
            host=leases.HOST,
            pid=os.getpid(),
            started_at=0.0,
            heartbeat_at=0.0,
            concurrency=self.concurrency,
            # What it takes from the queue: a run of any other workflow is reported as
            # one no worker can execute (nothing, for an engine that never claims).
            workflows=json.dumps(self.executes() if self.claim else []),
            lease=self.lease,
            process=None if self.process is None else str(self.process),
            executing=self.in_flight.snapshot(),
        )

    def executes(self) -> list[str]:
        """The workflows whose runs it claims, by name."""
        return sorted(
            name
            for name, workflow in self.env.registry.workflows.items()
            if workflow.durable or self.transient
        )

    async def start(self) -> None:
        """Register, recover what dead neighbours left, and start the loops."""
        sent_at = time.monotonic()
        await self.env.store.register_worker(self.record())
        self.tenure.renewed(sent_at)  # registering proves this worker alive, like a beat
        self._started = time.monotonic()
        await self._expire_dead_neighbours(await self.env.store.list_workers())
        loop = asyncio.get_running_loop()
        self._heartbeat = Heartbeat(
            self.env.store,
            self.record,
            self.tenure,
            interval=self.lease / 3,
            on_beat=self._on_beat,
            loop=loop,
            let_go=self._stalled,
        )
        self._heartbeat.start()
        watch = self.in_flight.watch(self._heartbeat.beat_now)
        self._tasks.append(asyncio.create_task(watch, name="cairn-in-flight"))
        self._watchdog = LoopWatchdog(loop, limit=self.lease / 3, describe=self._running)
        self._watchdog.start()
        # A blocked loop is not a stalled database: age waits only while the loop answers.
        self.env.store.health.watch_loop(self._watchdog.responsive_since)
        if self.claim and self.polls:
            await self.claim_once()
            self._tasks.append(asyncio.create_task(self._claim_loop(), name="cairn-claim"))
        else:
            # No claim loop to carry them: requests from other processes (`cairn runs
            # pause|cancel`) still have to reach the runs this engine executes.
            self._tasks.append(asyncio.create_task(self._control_loop(), name="cairn-control"))

    @property
    def stopping(self) -> bool:
        """True once `stop` (or `halt`) was called: this worker claims nothing more."""
        return self._stopping

    async def stop(self, *, grace: float = 0.0) -> None:
        """Stop claiming; let steps in flight finish for up to `grace` seconds; hand back.

        Each attempt is asked to leave at its next durable point: a step executing now
        finishes and commits, and the run is handed back (PENDING, no owner) at once, for
        any worker to take without waiting for a lease. An attempt still inside a step
        when the grace ends (or at once, after `hurry`) is cut off: its run is handed back
        all the same, and that step runs again wherever the run goes next. A sync step's
        thread cannot be stopped: it runs on in this process until it returns (`cairn
        worker` exits instead), its result unrecorded.
        """
        self._stopping = True
        self._grace_ends = time.monotonic() + grace
        for task in [*self._tasks, *self._handing_back]:
            task.cancel()
        for task in [*self._tasks, *self._handing_back]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        attempts = list(self.active.values())
        cut: list[Attempt] = []
        if attempts:
            if grace > 0:
                log.info(
                    "stopping: %d run(s) in flight; their steps may finish for up to %s, "
                    "then each run is handed back",
                    len(attempts),
                    schedules.describe_seconds(grace),
                )
            for attempt in attempts:
                if attempt.live is not None:
                    attempt.live.interrupts.hand_back()
                elif attempt.task is not None:
                    attempt.task.cancel()  # still loading its journal: nothing to finish
            await self._within_grace({a.task for a in attempts if a.task is not None})
            cut = [a for a in attempts if a.task is not None and not a.task.done()]
            steps = {a.run.run_id: a.live.running_step() if a.live else None for a in cut}
            # The step attempts cut short, recorded as interrupted with the hand-back (read
            # before the cancel below drops them).
            now = self.env.clock.now()
            interrupted = {
                a.run.run_id: in_flight.cut_short(a.live, worker=self.env.owner, now=now)
                for a in cut
            }
            for attempt in cut:
                assert attempt.task is not None
                attempt.task.cancel()
            for attempt in cut:
                assert attempt.task is not None
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await attempt.task
                run_id = attempt.run.run_id
                await self._cut_off(
                    attempt, steps[run_id], interrupted[run_id], expected=grace <= 0
                )
        await self._within_grace(set(self._releases), at_least=1.0)
        for task in list(self._releases):
            task.cancel()  # the database is away: the worker's removal below tries again
        if self._watchdog is not None:
            self._watchdog.stop()
        if self._heartbeat is not None:
            await self._heartbeat.stop()
        if self.failure is not None:
            return  # nothing can be written: its runs go to others when its lease runs out
        if attempts:
            log.info(
                "stopped: %d run(s) in flight handed back, %d of them cut off mid-step "
                "(those steps run again elsewhere)",
                len(attempts),
                len(cut),
            )
        # Also hands back whatever a hand-back above could not (owner cleared, PENDING).
        if not self._hurry.is_set():
            await self.env.store.remove_worker(self.env.owner)
            return
        try:  # told to stop at once: not for as long as the store would retry
            async with asyncio.timeout(max(1.0, self.lease / 3)):
                await self.env.store.remove_worker(self.env.owner)
        except (TimeoutError, StoreError) as exc:
            log.warning(
                "stopped without handing its runs back (%s): they are taken over once "
                "this worker's lease has run out",
                exc or "the database did not answer in time",
            )

    def hurry(self) -> None:
        """End the grace of a `stop` in progress now: cut off the steps still executing."""
        self._hurry.set()

    async def _within_grace(self, tasks: set[asyncio.Task[None]], at_least: float = 0.0) -> None:
        """Wait until `tasks` are done, the grace ends or `hurry` is called."""
        loop = asyncio.get_running_loop()
        ends = self._grace_ends if self._grace_ends is not None else time.monotonic()
        deadline = loop.time() + max(at_least, ends - time.monotonic())
        hurry = asyncio.ensure_future(self._hurry.wait())
        try:
            pending: set[asyncio.Future[Any]] = {task for task in tasks if not task.done()}
            while pending and not self._hurry.is_set() and (left := deadline - loop.time()) > 0:
                _, pending = await asyncio.wait(
                    pending | {hurry}, timeout=left, return_when=asyncio.FIRST_COMPLETED
                )
                pending.discard(hurry)
        finally:
            hurry.cancel()

    async def _cut_off(
        self,
        attempt: Attempt,
        step: str | None,
        interrupted: list[AttemptRecord],
        *,
        expected: bool,
    ) -> None:
        """Hand back the run of an attempt cut off (in `step`), trying once (see `stop`).

        `interrupted` are the step attempts it cut short, recorded with the hand-back.

        `expected`: there was no grace (a script or a test closing its engine), so being cut
        off is the plan, not news.
        """
        run = attempt.run
        threads = attempt.live is not None and not await attempt.quiesced(0)
        log.log(
            logging.INFO if expected and not threads else logging.WARNING,
            "run %s: %s cut off %s%s; handed back, the step runs again wherever the run goes next",
            run.run_id,
            f"step {step!r}" if step else "its attempt",
            "(stopping at once)" if self._hurry.is_set() else "by the end of the grace",
            " (its sync thread cannot be stopped and runs on, unrecorded)" if threads else "",
            extra=logcontext.extra(run.run_id, run.workflow, run.attempt),
        )
        if self.failure is None:
            with contextlib.suppress(Exception):
                await self.env.store.release_run(
                    run.run_id, self._lease(attempt), interrupted=interrupted
                )

    def writable(self) -> bool:
        """False once the store can never write again; the worker then stops by itself.

        It claims nothing more, ends its attempts (none of their writes could land) and
        stops heartbeating, so that other workers take its runs over once its lease has
        run out; `failed` is set for whoever runs it (`cairn worker` exits with status 1).
        """
        reason = self.env.store.health.unwritable
        if reason is None:
            return True
        if self.failure is None:
            self.failure = reason
            self._stopping = True
            log.error(
                "%s: this worker stops. It claims nothing more and stops heartbeating; "
                "other workers take its runs over once its lease has run out",
                reason,
            )
            if self._heartbeat is not None:
                self._heartbeat.cease()
            for attempt in self.active.values():
                if attempt.task is not None:
                    attempt.task.cancel()
            self.failed.set()
        return False

    def halt(self) -> None:
        """From now on, act like a killed process: no hand-backs, claims or resumes."""
        self._stopping = True
        self._halted = True

    async def abandon(self) -> None:
        """Stop without a word to the database, like a killed process (for testing)."""
        self.halt()
        if self._watchdog is not None:
            self._watchdog.stop()
        if self._heartbeat is not None:
            await self._heartbeat.stop()
        tasks = [*self._tasks, *self._handing_back, *self._releases]
        tasks += [a.task for a in self.active.values() if a.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def wake(self) -> None:
        """Look for work now rather than at the next poll."""
        self._wake.set()

    def reserve(self) -> Reservation | None:
        """Hold a slot for a run started in this process; None when full or stopping."""
        if self._stopping or self.free <= 0:
            return None
        self._reserved += 1
        return Reservation(self.env.owner, self.tenure.epoch)

    def release(self, reservation: Reservation) -> None:
        """Give back a reserved slot."""
        self._reserved -= 1
        self._wake.set()

    def launch(self, run: RunRecord, reservation: Reservation) -> None:
        """Execute a run stored with a slot from `reserve`."""
        self._reserved -= 1
        self._start(run, fresh=True, epoch=reservation.epoch)

    def _start(self, run: RunRecord, *, fresh: bool, epoch: int) -> None:
        """Execute an attempt of `run`; after the run's previous attempt here has ended.

        Two attempts of one run never execute at once in one process: a claim that hands
        back a run whose older attempt is still here (this worker was frozen past its
        lease, the run was taken over and came back) cancels the old one and waits until
        it has ended, its sync step threads included. The old one is fenced anyway.
        """
        previous = self.active.get(run.run_id)
        if previous is not None and previous.run.fence >= run.fence:
            return  # the same claim, seen twice (a late reply, and the reconciler)
        log.info(
            "run %s (%s) started, attempt %d",
            run.run_id,
            run.workflow,
            run.attempt,
            extra=logcontext.extra(run.run_id, run.workflow, run.attempt),
        )
        attempt = Attempt(run, epoch, started=time.monotonic())
        attempt.task = asyncio.create_task(
            self._execute(attempt, previous, fresh), name=f"cairn-run-{run.run_id}"
        )
        self.active[run.run_id] = attempt

    async def _execute(self, attempt: Attempt, previous: Attempt | None, fresh: bool) -> None:
        run = attempt.run
        if previous is not None:
            log.warning("run %s: an older attempt still executes here; ending it first", run.run_id)
            if previous.task is not None:
                previous.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await previous.task
            await previous.quiesced()

        def on_live(live: LiveRun) -> None:
            attempt.live = live
            self.live[run.run_id] = live

        outcome = executor.Outcome(None)
        try:
            outcome = await executor.execute(
                self.env, run, fresh=fresh, on_live=on_live, epoch=attempt.epoch
            )
        except Exception:
            log.exception("run %s: unexpected engine error; handing it back", run.run_id)
        finally:
            if self.active.get(run.run_id) is attempt:
                del self.active[run.run_id]
            if attempt.live is not None and self.live.get(run.run_id) is attempt.live:
                del self.live[run.run_id]
            # A freed slot matters only if work may be waiting for one: the last claim
            # filled every slot it asked for, or this run's queue had runs held back. A run
            # that just parked may itself be due already (a message or a cancel arrived as
            # it parked), so look then too.
            parked = outcome.status in ("SLEEPING", "WAITING", "PAUSED")
            if outcome.status is not None and not parked and self.env.futile is not None:
                self.env.futile.forget(run.run_id)  # it finished
            if not self._stopping and (self._backlog or parked or run.queue is not None):
                self._wake.set()
        log.info(
            "run %s %s",
            run.run_id,
            outcome.status or "handed back",
            extra=logcontext.extra(run.run_id, run.workflow, run.attempt),
        )
        if outcome.status is None and not self._halted and self.writable():
            self._hand_back(attempt)
        self._on_finished(run.run_id, outcome)

    def _lease(self, attempt: Attempt) -> Lease:
        return Lease(self.env.owner, attempt.run.fence)

    def _hand_back(self, attempt: Attempt) -> None:
        # An attempt that ended early while this worker lives (the store failed, its
        # outcome was unknown) would keep its run RUNNING under a heartbeating owner
        # forever: queue it again, retrying until the database answers. Fenced: if the
        # run was taken over or has ended, this matches nothing.
        run_id = attempt.run.run_id
        self._releasing.add(run_id)
        task = asyncio.create_task(self._release(attempt), name=f"cairn-hand-back-{run_id}")
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    async def _release(self, attempt: Attempt) -> None:
        run_id = attempt.run.run_id
        try:
            # Not while a step of it still runs in a thread; when stopping, only while
            # the grace lasts (then the thread is left behind, see `stop`).
            ends = self._grace_ends
            await attempt.quiesced(None if ends is None else max(0.0, ends - time.monotonic()))
            delay = 0.05
            while self.writable():
                try:
                    await self.env.store.release_run(run_id, self._lease(attempt))
                    break
                except Exception as exc:
                    if not self.writable():
                        break
                    log.warning("run %s: cannot hand it back yet (%s); retrying", run_id, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        finally:
            self._releasing.discard(run_id)
        self._wake.set()

    def _running(self, task: asyncio.Task[object]) -> str | None:
        """What `task` runs, for the watchdog (from its thread, while the loop is stuck)."""
        try:
            lives = list(self.live.values())
        except RuntimeError:  # changed while we looked: the loop is moving again
            return None
        for live in lives:
            key = live.step_of(task)
            if key is not None:
                return f"step {key!r} of run {live.run.run_id} ({live.run.workflow})"
        return None

    def executing(self, run_id: str) -> bool:
        """True while `run_id` executes in this worker."""
        return run_id in self.active

    def deliver(self, run_id: str, control: str | None) -> None:
        """Pass an operator request to a run executing here (no-op if it is not)."""
        live = self.live.get(run_id)
        if live is not None:
            live.interrupts.request(control)

    async def _poll_controls(self) -> None:
        # Requests made by other processes reach the runs we execute here.
        if not self.live:
            return
        for run_id, control in await self.env.store.controlled_runs(self.env.owner):
            live = self.live.get(run_id)
            if live is not None and not _already(live, control):
                live.interrupts.request(control)

    async def claim_once(self) -> int:
        """Claim and launch as many runs as there are free slots; returns how many."""
        if self.free <= 0 or self._stopping or time.monotonic() < self._claims_resume:
            return 0
        limit = self.free
        epoch = self.tenure.epoch  # a claim answered late must not skip the lease check
        stale = leases.may_judge_heartbeats(
            since=self._started, trouble_at=self.env.store.health.trouble_at(), lease=self.lease
        )
        # Now and then a dead worker's runs go before new ones: under a backlog they would
        # otherwise wait until the queue drains. Not every claim, to keep claims cheap.
        orphans_first = time.monotonic() >= self._orphans_due
        if orphans_first:
            self._orphans_due = time.monotonic() + self.lease / 3
        now = self.env.clock.now()
        claimed = await self.env.store.claim_runs(
            self.env.owner,
            limit,
            now=now,
            stale=stale,
            queues=self.queues,
            workflows=self.executes(),
            versions={
                name: wf.version
                for name, wf in self.env.registry.workflows.items()
                if wf.version is not None
            },
            orphans_first=orphans_first,
        )
        for run_id, workflow in claimed.poisoned.items():
            log.error("run %s given up after too many recoveries (PoisonRun)", run_id)
            if self.env.observer is not None:
                self.env.observer.poisoned(workflow)
            self._on_finished(run_id, executor.Outcome("FAILED"))
        if self.env.observer is not None and claimed.runs:
            self.env.observer.claimed(claimed.runs, claimed.due, now)
        for run in claimed.runs:
            self._start(run, fresh=False, epoch=epoch)
        self._backlog = len(claimed.runs) >= limit
        return len(claimed.runs)

    def judges_heartbeats(self) -> bool:
        """Whether this worker may take a run whose owner's heartbeat is only old (leases.py)."""
        return leases.may_judge_heartbeats(
            since=self._started, trouble_at=self.env.store.health.trouble_at(), lease=self.lease
        )

    async def take(self, run_id: str) -> bool:
        """Claim `run_id` alone and execute it here; wait until this attempt of it ends.

        What a transport's message leads to (cairn.celery): the claim applies the lease,
        queue and liveness rules of any claim, so a message delivered twice, or for a run
        another worker holds or that has finished, takes nothing. Returns whether it took
        the run.
        """
        if self._stopping or self.free <= 0:
            return False
        epoch = self.tenure.epoch
        stale = self.judges_heartbeats()
        now = self.env.clock.now()
        claimed = await self.env.store.claim_runs(
            self.env.owner,
            1,
            now=now,
            stale=stale,
            workflows=self.executes(),
            versions={
                name: wf.version
                for name, wf in self.env.registry.workflows.items()
                if wf.version is not None
            },
            only=[run_id],
        )
        for poisoned, workflow in claimed.poisoned.items():
            log.error("run %s given up after too many recoveries (PoisonRun)", poisoned)
            if self.env.observer is not None:
                self.env.observer.poisoned(workflow)
            self._on_finished(poisoned, executor.Outcome("FAILED"))
        if not claimed.runs:
            return False
        if self.env.observer is not None:
            self.env.observer.claimed(claimed.runs, claimed.due, now)
        self._start(claimed.runs[0], fresh=False, epoch=epoch)
        attempt = self.active.get(run_id)
        if attempt is not None and attempt.task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(attempt.task)
        return True

    async def _claim_loop(self) -> None:
        while self.writable():
            await self._wait_for_work(await self._idle_time())
            self._wake.clear()
            try:
                while await self.claim_once() and self.free > 0:
                    pass
                await self._poll_controls()
            except Exception:
                if self.writable():
                    log.exception("claiming runs failed; retrying")

    async def _control_loop(self) -> None:
        while self.writable():
            await self._wait_for_work(self.poll_interval)
            self._wake.clear()
            try:
                await self._poll_controls()
            except Exception:
                log.exception("reading operator requests failed; retrying")

    async def _wait_for_work(self, timeout: float) -> None:
        # Until this process has new work, the store hints that others made some (NOTIFY
        # on PostgreSQL, data_version on SQLite), or `timeout` passes: polling is the
        # fallback for what no hint reports (a dead worker's lease running out).
        local = asyncio.ensure_future(self._wake.wait())
        remote = asyncio.ensure_future(self.env.store.wait_for_work(timeout))
        try:
            await asyncio.wait(
                {local, remote}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for waiter in (local, remote):
                if not waiter.done():
                    waiter.cancel()
                elif not waiter.cancelled() and waiter.exception() is not None:
                    log.warning("waiting for work failed: %s", waiter.exception())

    async def _idle_time(self) -> float:
        # Sleep until the next timer is due (so timers fire on time), at most a poll interval.
        if self.env.store.wakes_for_timers:
            return self.poll_interval  # the store's wait ends at each timer by itself
        try:
            due = await self.env.store.next_wake()
        except Exception:
            return self.poll_interval
        if due is None:
            return self.poll_interval
        return max(0.0, min(self.poll_interval, due - self.env.clock.now()))

    # what each heartbeat saw

    def _stalled(self) -> list[tuple[str, int]]:
        """On the heartbeat's thread: the runs whose database work has waited a lease.

        Liveness is progress: such a run is let go of with the next beat, so that another
        worker can take it (its late write, should it ever land, is fenced off). For a
        lease from then on this worker claims nothing (set before the beat is sent: the
        runs' wake-up must not find this worker claiming): the runs are for another
        worker, and its own connections may be what is stuck (the store checks them).
        """
        stalled = list(self.env.store.health.stalled_runs(self.lease))
        if stalled:
            self._claims_resume = time.monotonic() + self.lease  # one float: any thread
        return stalled

    def _let_go(self, released: tuple[str, ...]) -> None:
        """End the attempts of runs a beat let go of: their database work is stuck."""
        stalled = self.env.store.health.stalled_runs(0.0)
        for run_id in released:
            attempt = self.active.get(run_id)
            waited = max((s for (r, _), s in stalled.items() if r == run_id), default=0.0)
            log.warning(
                "run %s: its database work got no reply for %.1f s (more than the %s "
                "lease): let go of it, for another worker to take; this attempt ends",
                run_id,
                waited,
                schedules.describe_seconds(self.lease),
            )
            if attempt is not None and attempt.task is not None:
                attempt.task.cancel()

    def _on_beat(self, sent_at: float, beat: Beat) -> None:
        """On the loop, after a heartbeat committed: reconcile and look for dead neighbours."""
        self.tenure.landed()
        if beat.released:
            self._let_go(beat.released)
        if self._stopping or not self.writable():
            return
        mine = {run_id: attempt.run.fence for run_id, attempt in self.active.items()}
        self._reconcile(sent_at, beat.owned, mine)
        self._last_beat = (sent_at, beat.owned, mine)
        dead = leases.dead_neighbours(beat.workers, me=self.env.owner, process=self.process)
        if dead:
            task = asyncio.create_task(self._expire(dead), name="cairn-expire")
            self._handing_back.add(task)
            task.add_done_callback(self._handing_back.discard)

    def _reconcile(self, sent_at: float, held: dict[str, int], mine: dict[str, int]) -> None:
        """Act on what differs, twice in a row, between the runs held and those executing.

        Two looks a heartbeat apart keep a claim or a finish caught mid-flight by one look
        from counting. A run held here that nothing executes (the reply to its start was
        lost, say) is resumed; an attempt whose run is held by someone else, or under
        another fence, is ended (its writes would be refused anyway).
        """
        if self._last_beat is None:
            return
        _, held_before, mine_before = self._last_beat
        for run_id, fence in held.items():
            if run_id in self._releasing:
                continue
            if held_before.get(run_id) == fence and fence not in (
                mine.get(run_id),
                mine_before.get(run_id),
            ):
                self._resume(run_id, fence)
        for run_id, fence in mine.items():
            attempt = self.active.get(run_id)
            if attempt is None or attempt.started >= sent_at:
                continue
            if held.get(run_id) != fence and held_before.get(run_id) != fence:
                if mine_before.get(run_id) == fence and attempt.task is not None:
                    log.warning(
                        "run %s: this worker no longer holds it (taken over while this "
                        "process was away?); ending this attempt",
                        run_id,
                    )
                    attempt.task.cancel()

    def _resume(self, run_id: str, fence: int) -> None:
        async def resume() -> None:
            run = await self.env.store.get_run(run_id)
            if run is None or (run.owner, run.fence, run.status) != (
                self.env.owner,
                fence,
                "RUNNING",
            ):
                return
            if run_id in self.active or run_id in self._releasing or self._stopping:
                return
            log.warning(
                "run %s is held by this worker but was not executing (a lost reply?); resuming it",
                run_id,
            )
            self._start(run, fresh=False, epoch=self.tenure.epoch)

        task = asyncio.create_task(resume(), name=f"cairn-resume-{run_id}")
        self._handing_back.add(task)
        task.add_done_callback(self._handing_back.discard)

    async def _expire(self, dead: list[str]) -> None:
        try:
            await self._expire_dead_neighbours_now(dead)
        except Exception as exc:
            log.warning("expiring dead workers failed: %s", exc)

    async def _expire_dead_neighbours(self, workers: list[WorkerRecord]) -> None:
        dead = leases.dead_neighbours(workers, me=self.env.owner, process=self.process)
        if dead:
            await self._expire_dead_neighbours_now(dead)

    async def _expire_dead_neighbours_now(self, dead: list[str]) -> None:
        log.info("recovering runs of dead workers %s", ", ".join(dead))
        await self.env.store.expire_workers(dead)
        self._wake.set()


def _already(live: LiveRun, control: str) -> bool:
    interrupts = live.interrupts
    return (control == "cancel" and interrupts.cancel) or (control == "pause" and interrupts.pause)
